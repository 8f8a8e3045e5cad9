"""gradkit ad."""
