"""gradkit backends/opencl."""
