"""The dialect tests import their helpers (taichi_programs.py) from this folder."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
