"""gradkit backends."""
