"""The post-import watcher (collect/startup/postimport.py) on real modules written to a temporary folder: a lookup is
not an import, the watcher fires once after the module's body has run, and a failed import leaves it waiting."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stepscope.collect.startup import postimport
from stepscope.collect.startup.postimport import PostImportWatcher, after_import


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path; watchers and the modules imported from it are gone after the test."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, PostImportWatcher)]
    for name in set(sys.modules) - before:
        del sys.modules[name]
    importlib.invalidate_caches()


def _watchers(name: str) -> list[PostImportWatcher]:
    """The watchers of ``name`` on sys.meta_path (other tests' in-process sessions may leave their own)."""
    return [f for f in sys.meta_path if isinstance(f, PostImportWatcher) and f.name == name]


def test_a_lookup_before_the_import_does_not_use_up_the_watcher(modules: Path) -> None:
    # TensorFlow's __init__ calls importlib.util.find_spec("keras") (to find tf.keras) before keras is imported
    (modules / "ss_probe_a.py").write_text("import sys\nSEEN = 'ss_probe_a' in sys.modules\nVALUE = 42\n")
    seen: list[int] = []
    after_import("ss_probe_a", lambda: seen.append(sys.modules["ss_probe_a"].VALUE))
    assert importlib.util.find_spec("ss_probe_a") is not None
    assert importlib.util.find_spec("ss_probe_a") is not None
    assert seen == []  # looked up twice, imported never
    import ss_probe_a

    assert seen == [42]  # after the body ran, once
    assert ss_probe_a.SEEN  # the module was in sys.modules while its body ran, as without stepscope
    assert not _watchers("ss_probe_a")  # fired, then left
    importlib.reload(ss_probe_a)
    assert seen == [42]


def test_a_failed_import_leaves_the_watcher_for_the_next_try(modules: Path) -> None:
    src = modules / "ss_probe_b.py"
    src.write_text("raise ImportError('not yet')\n")
    seen: list[str] = []
    after_import("ss_probe_b", lambda: seen.append("installed"))
    with pytest.raises(ImportError, match="not yet"):
        importlib.import_module("ss_probe_b")
    assert seen == []
    src.write_text("X = 1\n")
    importlib.invalidate_caches()
    sys.modules.pop("ss_probe_b", None)
    importlib.import_module("ss_probe_b")
    assert seen == ["installed"]


def test_a_loaded_module_installs_at_once(modules: Path) -> None:
    (modules / "ss_probe_d.py").write_text("Z = 3\n")
    importlib.import_module("ss_probe_d")
    seen: list[int] = []
    postimport.after_import("ss_probe_d", lambda: seen.append(3))
    assert seen == [3]


def test_two_watchers_of_one_module_both_fire(modules: Path) -> None:
    # two sessions in one process (stepscope.session() twice) each wait for the same framework
    (modules / "ss_probe_e.py").write_text("W = 5\n")
    seen: list[str] = []
    after_import("ss_probe_e", lambda: seen.append("first"))
    after_import("ss_probe_e", lambda: seen.append("second"))
    importlib.util.find_spec("ss_probe_e")
    importlib.import_module("ss_probe_e")
    assert sorted(seen) == ["first", "second"]
    assert not _watchers("ss_probe_e")
