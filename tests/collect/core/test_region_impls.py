"""The compiled region (_region.c) and the Python reference (regions.PyRegion): the same rows, the same
stacks, the same clock, on nested, threaded, raising and decorated workloads (issue 20)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import stepscope
from stepscope.collect import regions
from stepscope.collect.core.session import current

Row = tuple[str, int, int, int, int]


@pytest.fixture
def rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Row]]:
    """The region rows of an in-process session, taken where regions append them (the session's
    ``region_row``, as a fork replaces it), before the flusher can move them."""
    monkeypatch.delenv("STEPSCOPE_RUN_DIR", raising=False)
    with stepscope.session(name="impls", store=str(tmp_path)):
        s = current()
        assert s is not None
        out: list[Row] = []
        s.region_row = out.append  # type: ignore[assignment]
        yield out


class Boom(Exception):
    pass


def workload() -> None:
    """Nested regions, a decorated function, a raising block, a non-str name and a thread of its own."""
    R = regions.region

    @stepscope.timed("deco")
    def deco() -> None:
        with R("in_deco"):
            pass

    with R("outer"):
        with R("inner"), R("leaf"):
            pass
        deco()
        try:
            with R("raises"):
                raise Boom
        except Boom:
            pass
        with R(42):
            pass

    def worker() -> None:
        with R("t_outer"), R("t_inner"):
            pass

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    r = R("reused")
    for _ in range(2):
        with r:
            pass


EXPECTED = [("outer/inner/leaf", 2), ("outer/inner", 1), ("outer/deco/in_deco", 2), ("outer/deco", 1),
            ("outer/raises", 1), ("outer/42", 1), ("outer", 0), ("t_outer/t_inner", 1), ("t_outer", 0),
            ("reused", 0), ("reused", 0)]
"""(path, depth) of :func:`workload`'s rows in the order they end, written out by hand."""


def test_rows_of_a_workload(region_impl: type[regions.PyRegion], rows: list[Row]) -> None:
    s = current()
    assert s is not None
    s.step.start = None
    before = time.perf_counter_ns()
    workload()
    after = time.perf_counter_ns()
    assert [(p, d) for p, _, _, _, d in rows] == EXPECTED
    assert all(i == s.step_index for _, i, _, _, _ in rows)
    assert all(before <= t0 <= t1 <= after for _, _, t0, t1, _ in rows)  # perf_counter_ns's clock
    by_path = {p: (t0, t1) for p, _, t0, t1, _ in rows}
    for child, parent in (("outer/inner/leaf", "outer/inner"), ("outer/inner", "outer"), ("outer/deco", "outer")):
        assert by_path[parent][0] <= by_path[child][0] <= by_path[child][1] <= by_path[parent][1]
    assert s.step.start == rows[0][2]  # set at the first region's exit, to its start
    assert not regions.MAIN_STACK


def test_c_and_python_record_the_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if regions.CRegion is None:
        pytest.skip("_region not built")
    got: dict[str, list[tuple[str, int, int]]] = {}
    for cls in (regions.PyRegion, regions.CRegion):
        monkeypatch.setattr(regions, "region", cls)
        monkeypatch.delenv("STEPSCOPE_RUN_DIR", raising=False)
        with stepscope.session(name="same", store=str(tmp_path / cls.__name__)):
            s = current()
            assert s is not None
            out: list[Row] = []
            s.region_row = out.append  # type: ignore[assignment]
            workload()
            stepscope.step()
            workload()
        got[cls.__name__] = [(p, i, d) for p, i, _, _, d in out]
    py, c = got.values()
    assert py == c and len(c) == 2 * len(EXPECTED) and {i for _, i, _ in c} == {0, 1}


def test_exception_propagates_and_the_stack_unwinds(region_impl: type[regions.PyRegion], rows: list[Row]) -> None:
    with pytest.raises(Boom), region_impl("a"), region_impl("b"):
        assert regions.MAIN_STACK == ["a", "a/b"]
        raise Boom
    assert not regions.MAIN_STACK
    assert [(p, d) for p, _, _, _, d in rows] == [("a/b", 1), ("a", 0)]
    r = region_impl("x")
    assert r.__enter__() is r and r.__exit__(Boom, Boom(), None) is None  # exceptions are not swallowed


def test_decorator_keeps_the_function(region_impl: type[regions.PyRegion], rows: list[Row]) -> None:
    @region_impl("f")
    def f(a: int, *, b: int = 1) -> int:
        """doc"""
        return a + b

    assert f(1, b=2) == 3 and f.__name__ == "f" and f.__doc__ == "doc"
    assert [p for p, *_ in rows] == ["f"]


def test_threads_have_their_own_stacks(region_impl: type[regions.PyRegion], rows: list[Row]) -> None:
    """Four threads nest regions at once; each row's path and depth are its own thread's."""
    start = threading.Barrier(4)

    def work(k: int) -> None:
        start.wait()
        for _ in range(200):
            with region_impl(f"t{k}"), region_impl("x"):
                pass

    with region_impl("main"):
        ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert sorted({(p, d) for p, _, _, _, d in rows}) == sorted(
        [("main", 0)] + [(f"t{k}", 0) for k in range(4)] + [(f"t{k}/x", 1) for k in range(4)])
    assert len(rows) == 1 + 4 * 200 * 2


def test_no_session_records_nothing_but_keeps_the_stack(region_impl: type[regions.PyRegion],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_DISABLE", "1")
    monkeypatch.delenv("STEPSCOPE_RUN_DIR", raising=False)
    assert current() is None
    with region_impl("a"):
        assert regions.MAIN_STACK == ["a"]
    assert not regions.MAIN_STACK


def test_name_is_a_str(region_impl: type[regions.PyRegion]) -> None:
    class Named:
        def __format__(self, spec: str) -> str:
            return "named"

    assert region_impl(7).name == "7" and region_impl(Named()).name == "named"
    s = "already"
    assert region_impl(s).name is s


def test_region_is_the_compiled_one_unless_pure() -> None:
    code = "from stepscope.collect import regions; print(regions.region is regions.CRegion)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    built = regions.CRegion is not None
    for pure, expect in (("", built), ("1", False)):
        out = subprocess.run([sys.executable, "-c", code], env={**env, regions.ENV_PURE: pure},
                             capture_output=True, text=True, check=True).stdout.strip()
        assert out == str(expect)


def test_same_clock_as_perf_counter_ns() -> None:
    if regions.CRegion is None:
        pytest.skip("_region not built")
    from stepscope.collect import _region

    assert time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"
    for _ in range(1000):
        a = time.perf_counter_ns()
        b = _region.clock_ns()
        c = time.perf_counter_ns()
        assert a <= b <= c


def test_compiled_region_makes_no_python_call(region_impl: type[regions.PyRegion], rows: list[Row]) -> None:
    """What the hot-path budget counts (benchmarks/_hotpath.py): 3 Python calls for PyRegion, none for the
    compiled one (its work is C called from C)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from benchmarks._hotpath import count_calls

    def once() -> None:
        with region_impl("x"):
            pass

    once()
    c = count_calls(once, 50)
    assert c.py_calls == (3.0 if region_impl is regions.PyRegion else 0.0)
