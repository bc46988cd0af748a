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


POOLS_AND_FILES = ("concurrent.futures", "multiprocessing", "distributed", "dask", "subprocess", "gzip", "io",
                   "shutil", "tempfile", "mmap", "stepscope.traces.traceset", "stepscope.traces.kineto",
                   "stepscope.traces.jsonstream", "stepscope.executor", "stepscope.store")
"""Modules that start process pools or open files: analyze/ gets its inputs from traces/, store/ or the
executor (issue 13: analyze/ is pure)."""


def test_analyze_starts_no_pools_and_opens_no_files():
    bad = []
    for path in (SRC / "analyze").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            bad += [f"{path.relative_to(SRC)} imports {n}" for n in names
                    if any(n == m or n.startswith(m + ".") for m in POOLS_AND_FILES)]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                bad.append(f"{path.relative_to(SRC)}:{node.lineno} calls open()")
            if isinstance(node, ast.Attribute) and node.attr in ("read_text", "read_bytes", "write_text",
                                                                 "write_bytes", "iterdir", "open"):
                bad.append(f"{path.relative_to(SRC)}:{node.lineno} uses .{node.attr}")
    assert not bad, "\n".join(bad)
