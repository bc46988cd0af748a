"""The chart module's Python side: specs hold the data, names are shortened without losing what tells
them apart, raw column names become words, long series are binned, spiky ones get a rolling median, and
a profiled run's report stays under 1.5 MB."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from stepscope.cli import main
from stepscope.report.html.charts import (
    MAX_POINTS,
    Axis,
    Bars,
    Series,
    auto_window,
    bar_chart,
    chart_script,
    shorten_names,
    words,
    xy_chart,
)

KERNELS = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
    "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>, at::detail::Array<char*, 3> >"
    "(int, at::native::MulFunctor<float>, at::detail::Array<char*, 3>)",
    "volta_sgemm_128x64_nn",
    "aten::add",
]


def _spec(html: str) -> dict:  # type: ignore[type-arg]
    m = re.search(r'class="ss-spec">(.*?)</script>', html)
    assert m is not None
    return json.loads(m.group(1))  # type: ignore[no-any-return]


def test_kernel_names_shortened_distinct_and_short_names_kept() -> None:
    short = shorten_names(KERNELS, 60)
    assert all(len(s) <= 60 for s in short)
    assert len(set(short)) == len(KERNELS)  # the three vectorized_elementwise_kernel rows stay distinct
    assert "Fill" in short[0] and "CUDAFunctor_add" in short[1] and "MulFunctor" in short[2]
    assert short[3:] == ["volta_sgemm_128x64_nn", "aten::add"]  # short names untouched
    spec = _spec(bar_chart("Top kernels", KERNELS, [Bars("GPU time", [3.0, 2.0, 1.0, 4.0, 5.0])],
                           axis=Axis("total time", "ns")))
    assert spec["categories"] == KERNELS and spec["labels"] == shorten_names(KERNELS)


def test_legend_labels_in_words() -> None:
    spec = _spec(xy_chart("CPU", [0, 1], [Series("cpu_process_pct", [1, 2]), Series("gpu3_util_pct", [3, 4])],
                          x_axis=Axis("time", "s"), y_axis=Axis("CPU", "%")))
    assert [s["label"] for s in spec["series"]] == ["CPU, this process", "GPU 3 utilisation"]
    assert words("samples/s") == "samples/s"


def test_spiky_series_get_a_rolling_median_and_steady_ones_do_not() -> None:
    rng = np.random.default_rng(1)
    steady = rng.normal(340, 10, 500)
    spiky = steady.copy()
    spiky[::40] = 30_000
    assert auto_window(steady) == 0
    w = auto_window(spiky)
    assert w > 1 and w % 2 == 1
    assert auto_window(spiky[:20]) == 0  # too few points to smooth
    spec = _spec(xy_chart("t", np.arange(500), [Series("rate", spiky), Series("off", spiky, smooth=0)],
                          x_axis=Axis("step"), y_axis=Axis("throughput", "samples/s")))
    assert [s["smooth"] for s in spec["series"]] == [w, 0]
    assert spec["series"][0]["y"] == spiky.tolist()  # raw values embedded; the median is drawn from them


def test_long_series_are_binned_gaps_kept() -> None:
    n = 10 * MAX_POINTS
    y = np.arange(n, dtype=float)
    y[: 10 * 10] = np.nan  # the first 10 bins hold no value: a gap
    spec = _spec(xy_chart("long", np.arange(n), [Series("y", y, smooth=0)], x_axis=Axis("step"),
                          y_axis=Axis("y")))
    assert spec["binned"] == 10 and len(spec["x"]) == MAX_POINTS
    assert spec["series"][0]["y"][:10] == [None] * 10
    assert spec["series"][0]["y"][10] == np.mean(np.arange(100, 110))  # mean of its bin
    assert spec["x"][-1] == np.mean(np.arange(n - 10, n))


def test_own_x_series_embedded_as_given() -> None:
    spec = _spec(xy_chart("pair", [], [Series("baseline", [1, 2], x=[0, 2]), Series("experiment", [3, None], x=[1, 3])],
                          x_axis=Axis("step"), y_axis=Axis("cumulative time (s)")))
    assert spec["series"][0]["x"] == [0, 2] and spec["series"][1]["y"] == [3, None]


def test_script_names_no_address() -> None:
    js = chart_script()
    assert "http://" not in js and "https://" not in js and "</script" not in js.lower()
    assert "uPlot" in js and "MIT" in js


def test_profiled_report_under_1_5_mb(profiled_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main(["report", "--store", str(profiled_store), "-o", str(out)]) == 0
    size = out.stat().st_size
    assert 'id="kernels"' in out.read_text() and size < 1_500_000, size
