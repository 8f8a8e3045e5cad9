"""Process-wide recording state: the active Tape and ForwardMode (if any)."""

tape = None          # the innermost recording gk.Tape
forward_mode = None  # the active gk.ForwardMode
capture = None       # the active viz.capture.Capture of `gradkit debug` (if any)
