"""Shared fixtures: real stores in tmp_path, real observed runs, the fixture traces; the `slow` marking
(what `pytest -m "not slow"` leaves out) and the strict-skips mode of CI."""

from __future__ import annotations

import ast
import fcntl
import functools
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
EXAMPLES = ROOT / "examples"
TRACES = ROOT / "tests" / "data" / "traces"
"""Real Kineto traces kept in the repository (HTA test data, MIT; see its README and LICENSE)."""
PY = sys.executable


def stepscope_cmd(*args: str) -> list[str]:
    return [PY, "-m", "stepscope", *args]


def installed_or_skip(module: str) -> None:
    """At a test module's top, where its tests run MODULE only in their own processes: skip the module when
    MODULE is not installed, without importing it (pytest.importorskip would import lightning, mlflow or
    transformers into every xdist worker at collection, seconds each, for tests that never use it there)."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"could not import {module!r}: not installed", allow_module_level=True)


class Result:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def __repr__(self) -> str:
        return f"Result(rc={self.rc}, out={self.out[-2000:]!r}, err={self.err[-2000:]!r})"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store folder path (created by the first run)."""
    return tmp_path / "store"


@pytest.fixture
def cli(store: Path, tmp_path: Path) -> Callable[..., Result]:
    """Run `python -m stepscope ARGS` in a subprocess against the test's store; returns rc/out/err."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120, cwd: Path | None = None,
            with_store: bool = True) -> Result:
        full_env = {**os.environ, "STEPSCOPE_HOME": str(store), **(env or {})}
        full_env.pop("STEPSCOPE_DB", None)
        proc = subprocess.run(stepscope_cmd(*args), capture_output=True, text=True, timeout=timeout,
                              cwd=cwd or tmp_path, env=full_env)
        return Result(proc)

    return run


@pytest.fixture
def observed(cli: Callable[..., Result]) -> Callable[..., Result]:
    """`stepscope run --quiet --sample-interval 0.2 -- python SCRIPT ARGS` for a script in tests/scripts."""

    def run(script: str, *args: str, opts: tuple[str, ...] = (), env: dict[str, str] | None = None) -> Result:
        path = SCRIPTS / script if not os.path.isabs(script) else Path(script)
        return cli("run", "--quiet", "--sample-interval", "0.2", *opts, "--", PY, str(path), *args, env=env)

    return run


HOSTILE = "<script>alert(1)</script>"


def observe(store: Path, *args: str, name: str = HOSTILE, opts: tuple[str, ...] = (),
            script: str = "advisor_train.py") -> subprocess.CompletedProcess[str]:
    """`stepscope run --store STORE` of a script in tests/scripts, named and tagged like an XSS attack."""
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_DB",)}
    return subprocess.run(stepscope_cmd("run", "--store", str(store), "--quiet", "--sample-interval", "0.2",
                                        "--name", name, "--tag", f"owner={HOSTILE}", *opts, "--", PY,
                                        str(SCRIPTS / script), *args),
                          capture_output=True, text=True, timeout=180, env=env, cwd=store.parent)


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder NAME, filled by BUILD(folder) once per test session, not once per xdist worker: the first
    worker to ask builds it under a file lock in the session's shared temporary folder, and the others wait
    for it and use the same folder (pytest-xdist's recipe for session fixtures that run only once). Only for
    what the tests read: a test that writes into it copies it first. A failed build is retried by the next
    asker, which then fails alike."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir()
                build(folder)
                done.touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return folder


def _observe_profiled(folder: Path) -> None:
    res = observe(folder / "store", "--steps", "16", "--sample-sleep", "0.003", "--instrument", "--compute", "2",
                  opts=("--profile-steps", "2"))
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.fixture(scope="session")
def profiled_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with one completed run named like an XSS attack: regions, logged metrics, a slow
    dataset (input-bound) and a 2-step profiled window. One real run per test session (built_once: shared by
    the xdist workers), used by the report, export, advisor and browser tests, which only read it (a test that
    writes into a store copies it first)."""
    return built_once(tmp_path_factory, "profiled", _observe_profiled) / "store"


@pytest.fixture(scope="session")
def profiled_pair_store(tmp_path_factory: pytest.TempPathFactory, profiled_store: Path) -> Path:
    """profiled_store's run (`latest~1`), then the same script with each sample sleeping 12 ms instead of 3
    (`latest`): two real runs for the diff pages. Recorded once per test session (built_once); only read."""

    def build(folder: Path) -> None:
        shutil.copytree(profiled_store, folder / "store")
        res = observe(folder / "store", "--steps", "16", "--sample-sleep", "0.012", "--instrument", "--compute", "2",
                      opts=("--profile-steps", "2"))
        assert res.returncode == 0, res.stderr[-3000:]

    return built_once(tmp_path_factory, "profiled_pair", build) / "store"


def record_tiny(folder: Path, steps: int, *opts: str) -> None:
    """One completed real run of `stepscope run --quiet --sample-interval 0.2 OPTS -- python tiny_train.py --steps
    STEPS` into the store ``folder/store`` (run from ``folder``, the user's store settings left out)."""
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}
    proc = subprocess.run(stepscope_cmd("run", "--store", str(folder / "store"), "--quiet", "--sample-interval", "0.2",
                                        *opts, "--", PY, str(SCRIPTS / "tiny_train.py"), "--steps", str(steps)),
                          capture_output=True, text=True, timeout=180, env=env, cwd=folder)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _observe_tiny3(folder: Path) -> None:
    record_tiny(folder, 3)


@pytest.fixture
def tiny_store(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test's own copy, at `store` (where `cli` runs), of a store holding one completed run of
    `stepscope run --sample-interval 0.2 -- python tiny_train.py --steps 3`, recorded once per test session
    (built_once) for the tests that only need some real run to work on (import traces into, show, ...)."""
    shutil.copytree(built_once(tmp_path_factory, "tiny3", _observe_tiny3) / "store", store)
    return store


@pytest.fixture(autouse=True)
def no_hooks_left_behind() -> object:
    """Every in-process session must remove the hooks it installed."""
    yield
    from stepscope.collect.core import undo as undo_list

    assert undo_list.installed() == 0, "a test left stepscope hooks installed"


def load(store: Path, ref: str = "latest"):  # type: ignore[no-untyped-def]
    from stepscope.store import open_store

    st = open_store(store)
    try:
        return st.load(ref)
    finally:
        st.close()


# -- the `slow` marker -----------------------------------------------------------------------------------
# `pytest -m "not slow"` is the fast inner loop, and it needs no torch. A test is slow when it is marked so,
# or when what it reaches (its own source, its fixtures' and the helpers of tests/ it calls, followed
# through names) mentions torch or a package built on it, the training scripts (tests/scripts, examples/) or a
# launcher of training processes. A module that imports torch (or such a package) at its top is slow as a
# whole and is not even imported when slow tests are deselected, so the fast loop runs where torch is absent.

SLOW_WORDS = re.compile(r"\b(torch|lightning|transformers|accelerate|mlflow|SCRIPTS|EXAMPLES|mpirun)\b"
                        r"|[\"'](scripts|examples|run|bench|sweep|data-bench)[\"']")  # their folders; launchers
SLOW_IMPORTS = {"torch", "lightning", "transformers", "accelerate", "mlflow"}
_TESTS = Path(__file__).resolve().parent
_SOURCE_CACHE: dict[int, str] = {}
_CONSTANTS: dict[str, dict[str, str]] = {}


def _deselects_slow(config: pytest.Config) -> bool:
    expr = (config.getoption("markexpr", "") or "").replace(" ", "")
    return "notslow" in expr


@functools.cache
def _imports_slow_at_top(path: Path) -> bool:
    """Asked once per test of a module at collection: parsed once per module."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    for node in tree.body:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
              and ast.unparse(node.value.func) in ("pytest.importorskip", "installed_or_skip") and node.value.args
              and isinstance(node.value.args[0], ast.Constant)):
            names = [str(node.value.args[0].value)]
        if any(n.split(".")[0] in SLOW_IMPORTS for n in names):
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if (_deselects_slow(config) and collection_path.suffix == ".py" and collection_path.name.startswith("test_")
            and _imports_slow_at_top(collection_path)):
        return True
    return None


def _source(obj: Any) -> str:
    key = id(obj)
    if key not in _SOURCE_CACHE:
        try:
            _SOURCE_CACHE[key] = inspect.getsource(obj)
        except (OSError, TypeError):
            _SOURCE_CACHE[key] = ""
    return _SOURCE_CACHE[key]


def _module_constants(path: str) -> dict[str, str]:
    """Source of each top-level assignment of a module, by the names it assigns (SCRIPT = ... / "x.py")."""
    if path not in _CONSTANTS:
        found: dict[str, str] = {}
        try:
            text = Path(path).read_text(encoding="utf-8")
            for node in ast.parse(text).body:
                if isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        for n in ast.walk(t):
                            if isinstance(n, ast.Name):
                                found[n.id] = ast.get_source_segment(text, node) or ""
        except (OSError, SyntaxError, UnicodeDecodeError):
            pass
        _CONSTANTS[path] = found
    return _CONSTANTS[path]


@functools.cache
def _file_in_tests(filename: str) -> bool:
    return Path(filename).resolve().is_relative_to(_TESTS)


def _in_tests(obj: Any) -> bool:
    try:
        return _file_in_tests(inspect.getfile(obj))
    except (OSError, TypeError):
        return False


def _reaches_slow(item: pytest.Function) -> bool:
    """True when the test's code, its fixtures or the tests/ helpers they name mention slow things."""
    todo: list[Any] = [item.function]
    for defs in item._fixtureinfo.name2fixturedefs.values():
        todo.extend(d.func for d in defs if _in_tests(d.func))
    seen: set[int] = set()
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        src = _source(obj)
        if SLOW_WORDS.search(src):
            return True
        scope = getattr(obj, "__globals__", None) or vars(inspect.getmodule(obj) or sys)
        constants = _module_constants(inspect.getfile(obj))
        for name in set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", src)):
            if SLOW_WORDS.search(constants.get(name, "")):
                return True
            ref = scope.get(name)
            if (inspect.isfunction(ref) or inspect.isclass(ref)) and _in_tests(ref):
                todo.append(ref)
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = pytest.mark.slow
    for item in items:
        if item.get_closest_marker("slow") is not None or not isinstance(item, pytest.Function):
            continue
        if _imports_slow_at_top(Path(str(item.fspath))) or _reaches_slow(item):
            item.add_marker(slow)


# -- strict skips ------------------------------------------------------------------------------------------
# With STEPSCOPE_STRICT_SKIPS=1 (CI, and `make test` as root, which installs every tool), a skip is a
# failure unless it is for a missing GPU: a missing Chromium, PostgreSQL, mpirun or fixture must not pass
# silently as a skip.

GPU_REASON = re.compile(r"\b(gpu|cuda|nvml)\b", re.IGNORECASE)


def _strict_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if os.environ.get("STEPSCOPE_STRICT_SKIPS") != "1" or not report.skipped:
        return
    reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr)
    if hasattr(report, "wasxfail") or GPU_REASON.search(reason):
        return
    report.outcome = "failed"
    report.longrepr = f"skipped in a strict run (STEPSCOPE_STRICT_SKIPS=1), not for a missing GPU: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    _strict_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    outcome = yield
    _strict_skip(outcome.get_result())
