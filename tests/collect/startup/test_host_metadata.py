"""The host and version figures a run records, read without psutil, pynvml or importlib.metadata at start-up, must
equal what those libraries say (real /proc and /sys, real metadata folders on sys.path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope.collect.startup.metadata import NVIDIA_DRIVER_PATHS, host_info, linux_cpu_memory, own_version


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the /proc and /sys reading is Linux's")
def test_cores_and_memory_are_psutils() -> None:
    import psutil

    assert linux_cpu_memory() == (psutil.cpu_count(logical=False), psutil.cpu_count(logical=True),
                                  psutil.virtual_memory().total)
    h = host_info()
    assert (h.cpu_cores_physical, h.cpu_cores_logical) == (psutil.cpu_count(logical=False), psutil.cpu_count())


def _both(monkeypatch: pytest.MonkeyPatch, path: list[str]) -> tuple[str, str]:
    """own_version() and importlib.metadata's answer ("dev" where it finds none) for ``sys.path`` = ``path``."""
    import importlib.metadata

    monkeypatch.setattr(sys, "path", path)
    try:
        theirs = importlib.metadata.version("stepscope")
    except importlib.metadata.PackageNotFoundError:
        theirs = "dev"
    return own_version(), theirs


def test_the_version_is_importlib_metadatas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = list(sys.path)
    mine, theirs = _both(monkeypatch, here)
    assert mine == theirs and mine != "dev"
    dist = tmp_path / "dist"
    (dist / "stepscope-9.8.7.dist-info").mkdir(parents=True)
    (dist / "stepscope-9.8.7.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: stepscope\n"
                                                                 "Version: 9.8.7\n\nVersion: 0\n")
    assert _both(monkeypatch, [str(dist), *here]) == ("9.8.7", "9.8.7")  # the first on sys.path wins
    egg = tmp_path / "egg"
    (egg / "Stepscope.egg-info").mkdir(parents=True)
    (egg / "Stepscope.egg-info" / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: stepscope\nVersion: 1.2.3\n")
    assert _both(monkeypatch, [str(egg), str(dist)]) == ("1.2.3", "1.2.3")
    other = tmp_path / "other"
    (other / "stepscope_extras-5.0.dist-info").mkdir(parents=True)  # another distribution's name
    assert _both(monkeypatch, [str(other), str(tmp_path / "missing")]) == ("dev", "dev")


@pytest.mark.skipif(any(os.path.exists(p) for p in NVIDIA_DRIVER_PATHS), reason="an NVIDIA driver is present")
def test_no_driver_no_nvml_import() -> None:
    code = ("import sys\nfrom stepscope.collect.startup.metadata import nvml_gpus\n"
            "print(nvml_gpus(), 'pynvml' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["()", "False"], r.stderr
