"""report/tables.py's rule on tables rendered by a real rich Console of fixed width: numbers whole, names
shortened uniquely, optional columns left out and named, blocks past that, names whole with ``wide``."""

from __future__ import annotations

from rich.console import Console

from stepscope.report.tables import FitTable, unique_short

NAMES = [f"void at::native::vectorized_elementwise_kernel<4, at::native::{op}Functor<float>, "
         "at::detail::Array<char*, 3>>" for op in ("Fill", "Add", "Mul", "Div")]
NUMBERS = [("1,234", "26.71 ms", "123,456.7 µs"), ("12", "177.29 ms", "1.0 µs"), ("7", "3.50 s", "500.0 ns"),
           ("100,000", "1.2 min", "12.3 µs")]


def _render(table: FitTable, width: int) -> list[str]:
    console = Console(width=width, record=True, highlight=False)
    console.print(table)
    return [ln.rstrip() for ln in console.export_text().splitlines()]


def _table(wide: bool = False) -> FitTable:
    t = FitTable("kernels", wide=wide)
    t.add_column("name")
    t.add_column("count", justify="right")
    t.add_column("sum", justify="right")
    t.add_column("mean", justify="right", drop=1)
    for name, nums in zip(NAMES, NUMBERS, strict=True):
        t.add_row(name, *nums)
    return t


def test_unique_short_tells_apart_names_that_share_start_and_end() -> None:
    names = ["layer.0.attention.output", "layer.1.attention.output", "layer.2.attention.output", "short"]
    got = unique_short(names, 12)
    assert len(set(got)) == len(names) and all(len(g) <= 12 for g in got)
    assert got[-1] == "short"


def test_numbers_whole_at_every_width() -> None:
    for width in (24, 40, 60, 80, 120, 200):
        lines = _render(_table(), width)
        assert all(len(ln) <= width for ln in lines), (width, lines)
        for count, total, _mean in NUMBERS:
            for cell in (count, total):
                assert any(cell in ln for ln in lines), (width, cell, lines)
        dropped = any("not shown" in ln for ln in lines)
        for *_, mean in NUMBERS:
            assert dropped or any(mean in ln for ln in lines), (width, mean, lines)


def test_narrow_table_prints_blocks_and_wide_names_are_whole() -> None:
    lines = _render(_table(), 24)
    assert "  sum: 177.29 ms" in lines and "  count: 100,000" in lines
    body = _render(_table(wide=True), 80)
    joined = "".join(ln.split("┃")[0].split("│")[0].strip() for ln in body)
    for name in NAMES:
        assert name.replace(" ", "") in joined.replace(" ", ""), name
    short = _render(_table(), 80)
    shown = [ln.split("│")[0].strip() for ln in short if "│" in ln]
    assert len(set(shown)) == len(NAMES) and all("…" in s for s in shown)


def test_string_cells_read_markup_as_rich_tables_do() -> None:
    t = FitTable("ranks")
    t.add_column("rank", numeric=True)
    t.add_column("step", justify="right")
    t.add_row("[red]3 straggler[/]", "12.50 ms")
    lines = _render(t, 60)
    assert any("3 straggler" in ln and "12.50 ms" in ln for ln in lines) and not any("[red]" in ln for ln in lines)
