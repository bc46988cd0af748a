"""Builds and loads benchmarks/_probe.c (the floor of a hook, hook_costs.py ``--alternate --probe``) with the
compiler Python was built with, into a temporary folder named by the source's hash; nothing is installed."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shlex
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

SOURCE = Path(__file__).with_name("_probe.c")
HOOKS = Path(__file__).resolve().parents[1] / "src" / "stepscope" / "collect"
"""Where ``_hooks.h`` is (the hooks' clock read, which the probe shares)."""


def load_probe() -> ModuleType:
    """The compiled ``_probe`` module, built on first use."""
    digest = hashlib.sha256(SOURCE.read_bytes() + (HOOKS / "_hooks.h").read_bytes()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"stepscope-probe-{digest}" / f"_probe{sysconfig.get_config_var('EXT_SUFFIX')}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
        part = out.with_name(f"{out.name}.{os.getpid()}.part")  # two builders at once write apart
        cmd = [*cc, "-shared", "-fPIC", "-O2", f"-I{sysconfig.get_paths()['include']}", f"-I{HOOKS}", str(SOURCE),
               "-o", str(part)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode:
            raise SystemExit(f"building {SOURCE.name} failed ({' '.join(cmd)}): {done.stderr.strip()}")
        part.replace(out)
    spec = importlib.util.spec_from_file_location("_probe", out)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
