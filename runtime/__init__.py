"""gradkit runtime."""
