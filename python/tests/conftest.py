import os
import sys

_PY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _PY not in sys.path:
    sys.path.insert(0, _PY)

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
