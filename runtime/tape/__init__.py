"""The tape: launch records, the gradient rules and version checks, consumption, hazards, checkpoints, snapshots and forward mode."""
