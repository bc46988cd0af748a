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
