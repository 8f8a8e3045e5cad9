"""gradkit backends/llvm."""
