"""Injected by `stepscope run` (through PYTHONPATH) into every Python process of the observed command.

Chain-loads the user's own sitecustomize, then starts stepscope's dormant recorder. Never raises.
"""

import os
import sys


def _chain_user_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    import importlib.machinery
    import importlib.util

    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


try:
    _chain_user_sitecustomize()
except Exception as _e:  # the user's own sitecustomize failed: say so, as Python would
    print(f"Error in user sitecustomize (loaded by stepscope): {_e!r}", file=sys.stderr)

try:
    from stepscope.collect.bootstrap import boot as _boot

    _boot()
except Exception as _e:
    if os.environ.get("STEPSCOPE_RUN_DIR"):
        print(f"stepscope: cannot observe this process ({_e!r}); it runs unobserved", file=sys.stderr)
