"""gradkit: a differentiable kernel framework."""
