"""Trains nothing and imports no framework: prints which frameworks are loaded and stepscope's finders."""

import json
import sys

import stepscope

stepscope.step()  # a stepscope API call: the session opens its stream
print(json.dumps({"loaded": sorted(m for m in ("tensorflow", "keras", "jax", "torch") if m in sys.modules),
                  "watchers": sorted(getattr(f, "name", "torch") for f in sys.meta_path
                                     if type(f).__module__.startswith("stepscope"))}))
