"""``requires-python`` says what the code needs: every source file parses with the declared minimum's grammar,
the newest standard-library names the code uses (``tomllib``, ``datetime.UTC``, ...) need exactly that
minimum, and ruff and mypy check against the same version."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [*sorted((ROOT / "src").rglob("*.py")), *sorted((ROOT / "examples").rglob("*.py"))]

NEW_NAMES: dict[tuple[str, str | None], tuple[int, int]] = {
    ("tomllib", None): (3, 11),
    ("datetime", "UTC"): (3, 11),
    ("enum", "StrEnum"): (3, 11),
    ("enum", "verify"): (3, 11),
    ("typing", "Self"): (3, 11),
    ("typing", "Never"): (3, 11),
    ("typing", "LiteralString"): (3, 11),
    ("typing", "assert_never"): (3, 11),
    ("typing", "reveal_type"): (3, 11),
    ("typing", "Required"): (3, 11),
    ("typing", "NotRequired"): (3, 11),
    ("asyncio", "TaskGroup"): (3, 11),
    ("asyncio", "timeout"): (3, 11),
    ("wsgiref.types", None): (3, 11),
    ("builtins", "ExceptionGroup"): (3, 11),
    ("builtins", "BaseExceptionGroup"): (3, 11),
    ("typing", "override"): (3, 12),
    ("typing", "TypeAliasType"): (3, 12),
    ("itertools", "batched"): (3, 12),
    ("warnings", "deprecated"): (3, 13),
    ("typing", "ReadOnly"): (3, 13),
    ("typing", "TypeIs"): (3, 13),
    ("annotationlib", None): (3, 14),
}
"""Standard-library modules and names by the Python version that added them (3.11 onwards; older ones are
below any minimum stepscope could declare)."""


def declared_minimum() -> tuple[int, int]:
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    m = re.fullmatch(r"\s*>=\s*(\d+)\.(\d+)\s*", spec)
    assert m, f"requires-python {spec!r}: expected '>=X.Y'"
    return int(m.group(1)), int(m.group(2))


def needs(tree: ast.AST) -> dict[tuple[str, str | None], tuple[int, int]]:
    """The versioned names a module uses: imports, ``module.NAME`` attributes, builtins, ``except*``."""
    found: dict[tuple[str, str | None], tuple[int, int]] = {}
    aliases: dict[str, str] = {}

    def use(key: tuple[str, str | None]) -> None:
        if key in NEW_NAMES:
            found[key] = NEW_NAMES[key]

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                use((a.name, None))
                aliases[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            use((node.module, None))
            for a in node.names:
                use((node.module, a.name))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            use((aliases[node.value.id], node.attr))
        elif isinstance(node, ast.Name):
            use(("builtins", node.id))
        elif isinstance(node, ast.TryStar):
            found[("except*", None)] = (3, 11)
    return found


def test_every_source_parses_with_the_declared_minimum_grammar() -> None:
    minimum = declared_minimum()
    bad = []
    for path in SOURCES:
        try:
            ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=minimum)
        except SyntaxError as e:
            bad.append(f"{path.relative_to(ROOT)}:{e.lineno}: {e.msg}")
    assert not bad, f"syntax newer than requires-python >={minimum[0]}.{minimum[1]}:\n" + "\n".join(bad)


def test_declared_minimum_is_what_the_code_needs() -> None:
    minimum = declared_minimum()
    uses: dict[tuple[int, int], list[str]] = {}
    for path in SOURCES:
        for (mod, name), version in needs(ast.parse(path.read_text(encoding="utf-8"))).items():
            uses.setdefault(version, []).append(f"{path.relative_to(ROOT)}: {mod}{'.' + name if name else ''}")
    needed = max(uses, default=(3, 0))
    too_new = [u for v, us in uses.items() if v > minimum for u in us]
    assert not too_new, f"requires-python >={minimum[0]}.{minimum[1]} but the code uses newer names:\n" + \
        "\n".join(too_new)
    assert needed == minimum, (f"requires-python >={minimum[0]}.{minimum[1]} but nothing needs more than "
                               f"{needed[0]}.{needed[1]}: lower it (or say why in pyproject.toml)")


def test_the_finder_sees_the_names_that_forced_the_minimum() -> None:
    """The two uses the issue names (3.10 was declared while they needed 3.11) are found."""
    src = "import tomllib\nimport datetime\nfrom datetime import UTC\nx = datetime.UTC\n"
    assert set(needs(ast.parse(src))) == {("tomllib", None), ("datetime", "UTC")}
    try:
        ast.parse("try:\n    pass\nexcept* ValueError:\n    pass\n", feature_version=(3, 10))
    except SyntaxError:
        pass
    else:
        raise AssertionError("feature_version=(3, 10) should refuse except*")


def test_linters_check_against_the_declared_minimum() -> None:
    major, minor = declared_minimum()
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert cfg["tool"]["ruff"]["target-version"] == f"py{major}{minor}"
    assert cfg["tool"]["mypy"]["python_version"] == f"{major}.{minor}"
