"""Build of the two optional compiled parts; every other setting (metadata, dependencies, packages) is in
pyproject.toml. Both are optional: where one does not compile, stepscope installs without it and uses its
pure-Python counterpart:

- ``stepscope.traces._kineto_reader``: the trace reader (else the Python reader; docs/traces.md,
  "The compiled reader");
- ``stepscope.collect._region``: ``region()`` (else ``PyRegion``; docs/api.md, "Regions").

The step hooks have one body each, in Python (docs/architecture.md, "Hook bodies": why no compiled one)."""

import sys

from setuptools import Extension, setup

# -ffp-contract=off: no fused multiply-add, so float arithmetic rounds as the Python path's does
_FLAGS = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off"]

setup(ext_modules=[
    Extension("stepscope.traces._kineto_reader", ["src/stepscope/traces/_kineto_reader.c"],
              extra_compile_args=_FLAGS, optional=True),
    Extension("stepscope.collect._region", ["src/stepscope/collect/_region.c"],
              extra_compile_args=_FLAGS, optional=True),
])
