"""The source distribution: it carries the licence and the package, and no stray piece of the test suite (its
tests need conftest.py, tests/data and the repository around them, so a partial copy could only fail); the
licence is declared as an SPDX expression (the TOML-table form is deprecated by setuptools)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_TOP_FILES = ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in", "LICENSE")
_SKIP = shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info", "*.pyc")


def build_sdist(root: Path, work: Path) -> tuple[list[str], str, str]:
    """Copy what an sdist is built from (the top files, src/, tests/, benchmarks/) out of ROOT into WORK and
    build it with this interpreter's setuptools. Returns the archive's member names (without the
    `stepscope-VERSION/` prefix), its PKG-INFO and the build's stderr."""
    for name in _TOP_FILES:
        if (root / name).exists():
            shutil.copy2(root / name, work / name)
    for folder in ("src", "tests", "benchmarks"):
        shutil.copytree(root / folder, work / folder, ignore=_SKIP)
    proc = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", "dist"], cwd=work,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (archive,) = (work / "dist").glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        names = [m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name]
        top = tar.getnames()[0].split("/", 1)[0]
        pkg_info = tar.extractfile(f"{top}/PKG-INFO")
        assert pkg_info is not None
        meta = pkg_info.read().decode()
    return names, meta, proc.stderr


def test_sdist_carries_the_licence_and_no_stray_tests(tmp_path: Path) -> None:
    names, meta, err = build_sdist(ROOT, tmp_path)
    assert "LICENSE" in names
    assert "src/stepscope/__init__.py" in names
    c_parts = sorted(str(f.relative_to(tmp_path)) for ext in ("*.c", "*.h") for f in (tmp_path / "src").rglob(ext))
    assert c_parts and set(c_parts) <= set(names)  # the C parts build from the sdist
    stray = [n for n in names if n.startswith(("tests/", "benchmarks/"))]
    assert stray == [], f"the sdist carries pieces of the suite: {stray}"
    assert "License-Expression: Apache-2.0" in meta
    assert "as a TOML table is deprecated" not in err


def test_licence_file_is_the_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the full text, not a stub pointing elsewhere
