"""gradkit arrays: the array type, its creation, views, copies, interop and host-side writes."""
