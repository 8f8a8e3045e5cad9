"""gradkit app."""
