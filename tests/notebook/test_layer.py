"""The notebook package sits at the top (docs/architecture.md): it reads runs through app/, renders with
report/ and reads traces with traces/; only the lazy ``stepscope.load`` / ``load_traces`` import it."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "stepscope"
ALLOWED = {"model", "store", "traces", "analyze", "app", "report", "errors", "notebook"}


def imports(path: Path) -> list[tuple[str, bool]]:
    """(module, at top level) of every stepscope import of a file."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("stepscope"):
            out.append((node.module, id(node) in top))
        elif isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names if a.name.startswith("stepscope")]
    return out


def test_notebook_imports_only_the_layers_below_it() -> None:
    bad = [f"{p.relative_to(SRC)} imports {m}" for p in (SRC / "notebook").rglob("*.py") for m, _ in imports(p)
           if m.split(".")[1] not in ALLOWED]
    assert not bad, "\n".join(bad)


def test_only_the_package_entry_imports_notebook_and_only_lazily() -> None:
    users = {str(p.relative_to(SRC)): [top for m, top in imports(p) if m.startswith("stepscope.notebook")]
             for p in SRC.rglob("*.py") if "notebook" not in p.relative_to(SRC).parts}
    users = {k: v for k, v in users.items() if v}
    assert set(users) == {"__init__.py"}, users
    assert not any(users["__init__.py"]), "stepscope/__init__.py must import the notebook API inside load()"
