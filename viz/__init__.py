"""gradkit viz."""
