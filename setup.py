"""Build of the optional compiled trace reader; every other setting (metadata, dependencies, packages) is in
pyproject.toml. The extension is optional: where it does not compile, stepscope installs without it and reads
traces with the pure-Python reader (see docs/traces.md, "The compiled reader")."""

import sys

from setuptools import Extension, setup

# -ffp-contract=off: no fused multiply-add, so float arithmetic rounds as the Python path's does
_FLAGS = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off"]

setup(ext_modules=[Extension("stepscope.traces._kineto_reader", ["src/stepscope/traces/_kineto_reader.c"],
                             extra_compile_args=_FLAGS, optional=True)])
