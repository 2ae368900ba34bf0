"""pip install . at the top of the source tree: python/setup.py's package."""

import importlib.util
import os

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python", "setup.py")
_spec = importlib.util.spec_from_file_location("cohort_python_setup", _path)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
_module.main(prefix="python")
