"""The import graph follows docs/architecture.md: imports point down towards model/."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "stepscope"
ALLOWED = {
    "model": set(),
    "store": {"model", "errors"},
    "traces": {"model", "errors"},
    "collect": {"model", "store", "errors"},
    "analyze": {"model", "traces", "errors"},
    "report": {"model", "analyze", "traces", "errors", "app"},  # traces: record types only; app: RunAnalysis
    "app": {"model", "store", "traces", "analyze", "errors"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("stepscope"):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("stepscope")}
    return out


def test_layers_import_only_what_they_may():
    bad = []
    for layer, allowed in ALLOWED.items():
        for path in (SRC / layer).rglob("*.py"):
            for mod in _imports(path):
                parts = mod.split(".")
                target = parts[1] if len(parts) > 1 else ""
                if target and target != layer and target not in allowed and target != "__init__":
                    bad.append(f"{path.relative_to(SRC)} imports {mod}")
    assert not bad, "\n".join(bad)


def test_nothing_imports_cli_or_integrations():
    bad = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        if rel.parts[0] in ("cli", "integrations", "__main__.py"):
            continue
        for mod in _imports(path):
            if mod.startswith(("stepscope.cli", "stepscope.integrations")):
                bad.append(f"{rel} imports {mod}")
    assert not bad, "\n".join(bad)


def test_integrations_call_commands_as_functions_not_the_cli():
    bad = [f"{p.relative_to(SRC)} imports {m}" for p in (SRC / "integrations").rglob("*.py") for m in _imports(p)
           if m.startswith("stepscope.cli")]
    assert not bad, "\n".join(bad)


FILE_IO_MODULES = {"os", "io", "gzip", "bz2", "lzma", "shutil", "tempfile", "glob", "subprocess", "multiprocessing",
                   "concurrent", "zipfile", "tarfile", "mmap", "socket", "orjson", "json"}
PURE_PATHS = {"PurePath", "PurePosixPath", "PureWindowsPath"}
READERS = ("dask", "distributed", "stepscope.executor", "stepscope.traces.traceset", "stepscope.traces.kineto",
           "stepscope.traces.jsonstream", "stepscope.store")
"""Modules that read files or start pools of readers: analyze/ gets its inputs from them, never calls them."""


def _file_io(path: Path) -> list[str]:
    """File I/O in a module: imports of I/O modules, of pathlib's concrete Path, and calls of open()."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in FILE_IO_MODULES
                    or any(a.name == r or a.name.startswith(r + ".") for r in READERS)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            if any(node.module == r or node.module.startswith(r + ".") for r in READERS):
                out.append(f"from {node.module} import ...")
            elif root in FILE_IO_MODULES or (root == "pathlib" and {a.name for a in node.names} - PURE_PATHS):
                out.append(f"from {node.module} import {', '.join(a.name for a in node.names)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            out.append(f"open() on line {node.lineno}")
    return out


def test_analyze_does_no_file_io():
    """analyze/ is pure: it takes records and tables; reading files (and pools of readers) happens in app/,
    traces/ and store/."""
    analyze = SRC / "analyze"
    bad = [f"analyze/{p.relative_to(analyze)}: {what}" for p in analyze.rglob("*.py")
           for what in _file_io(p)]
    assert not bad, "\n".join(bad)


REGEX_EXEMPT = {"run/flops.py", "run/lost.py"}
"""flops.py matches GPU model names against its table of peak FLOP/s; lost.py reads the counts of lost record lines
from the writer's and reader's notes: neither looks at event names."""


def test_event_names_are_classified_only_in_the_trace_engine():
    """Regular expressions over event names live in traces/ (component rules, the Kineto reader) and
    analyze/trace/; the advisor and every other analysis read the trace engine's figures."""
    analyze = SRC / "analyze"
    bad = []
    for p in analyze.rglob("*.py"):
        rel = p.relative_to(analyze)
        if rel.parts[0] == "trace" or str(rel) in REGEX_EXEMPT:
            continue
        if {"re"} & {m.split(".")[0] for m in _std_imports(p)}:
            bad.append(f"analyze/{rel} imports re")
    assert not bad, "\n".join(bad)


def _std_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


def _runtime_collect_imports(path: Path) -> set[str]:
    """Modules of stepscope.collect that ``path`` imports at run time, lazily or not (``if TYPE_CHECKING:`` imports
    excluded: they never run)."""
    tree = ast.parse(path.read_text())
    typing_only = {id(m) for n in ast.walk(tree) if isinstance(n, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(n.test) for m in ast.walk(n)}
    out: set[str] = set()
    for n in ast.walk(tree):
        if id(n) in typing_only:
            continue
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("stepscope.collect"):
            out |= {n.module} | {f"{n.module}.{a.name}" for a in n.names}
        elif isinstance(n, ast.Import):
            out |= {a.name for a in n.names if a.name.startswith("stepscope.collect")}
    return out


def test_collect_has_no_import_cycle():
    """collect/ imports in one direction: a cycle (even through a lazy import) means two modules own one concept."""
    root = SRC / "collect"
    names = {".".join(("stepscope", "collect", *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__"): p
             for p in root.rglob("*.py")}
    graph = {m: sorted(d for d in _runtime_collect_imports(p) if d in names and d != m) for m, p in names.items()}
    cycles: list[str] = []
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for d in graph[m]:
            if state.get(d) == 1:
                cycles.append(" -> ".join([*path[path.index(d):], d]))
            elif d not in state:
                visit(d)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "\n".join(cycles)


def test_the_cycle_check_sees_a_lazy_import(tmp_path):
    """The check above counts an import inside a function (a positive control)."""
    p = tmp_path / "m.py"
    p.write_text("def f():\n    from stepscope.collect.core.session import Session\n")
    q = tmp_path / "n.py"
    q.write_text("from typing import TYPE_CHECKING\n"
                 "if TYPE_CHECKING:\n    from stepscope.collect.core.session import Session\n")
    assert "stepscope.collect.core.session" in _runtime_collect_imports(p)
    assert not _runtime_collect_imports(q)


ROOM_MAY_IMPORT = {
    "core": {"core"},
    "system": {"core", "system", "regions"},  # the stack sampler labels samples with the main thread's open region
    "torch": {"core", "torch"},
    "keras": {"core", "keras"},
    "mpi": {"core", "mpi"},
}
"""collect/'s rooms: a core (session, step state, buffers, clock, options, undo list), system sampling, and one
package per framework that imports only the core. startup/ (the process's start: launch, bootstrap, watchers) and
the public API modules at collect/'s top may import any room."""
CORE_STARTS = {("core/session.py", "system"), ("core/session.py", "startup")}
"""The session, once it activates, starts the system sampler and reads the process's metadata (lazy imports)."""


def test_collect_rooms_import_only_what_they_may():
    root = SRC / "collect"
    bad = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        room = rel.parts[0] if len(rel.parts) > 1 else None
        if room not in ROOM_MAY_IMPORT:
            continue
        for mod in _runtime_collect_imports(path):
            parts = mod.split(".")
            target = parts[2] if len(parts) > 2 else ""
            if target and target not in ROOM_MAY_IMPORT[room] and (str(rel), target) not in CORE_STARTS:
                bad.append(f"collect/{rel} imports {mod}")
    assert not bad, "\n".join(sorted(set(bad)))
