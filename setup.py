"""Build of the optional compiled region; every other setting (metadata, dependencies, packages) is in
pyproject.toml. The extension is optional: where it does not compile, stepscope installs without it and
times regions with the pure-Python ``PyRegion`` (see docs/api.md, "Regions")."""

import sys

from setuptools import Extension, setup

_FLAGS = [] if sys.platform == "win32" else ["-O2"]

setup(ext_modules=[Extension("stepscope.collect._region", ["src/stepscope/collect/_region.c"],
                             extra_compile_args=_FLAGS, optional=True)])
