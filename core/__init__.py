"""Core of gradkit: types, the typed IR, the builtins table and the Python frontend."""
