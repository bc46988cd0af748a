"""A StepLog's take() run out of memory at each of its allocations in turn (_testcapi.set_nomemory makes
exactly one allocation fail): each failure raises MemoryError with every row still in the log, and the next
take() gives the columns zip(*rows) gives. A subprocess of tests/collect/test_pystate.py, so that an allocator
fault that crashed the interpreter fails one test and not the run. Prints: failures, takes that got through."""

import _testcapi
import math

from stepscope.collect import _hooks


def rows(base: int) -> list[tuple[object, ...]]:
    return [(base + i, 10**13 + i, 2**70 + i, 48.0, math.nan, i * 3, True, -5, 0, None, "x", 2**63 - 1)
            for i in range(100)]


def main() -> None:
    failed = ok = 0
    for start in range(0, 400, 3):
        log = _hooks.StepLog()
        want = rows(start)
        for r in want:
            log(r)
        _testcapi.set_nomemory(start, start + 1)  # the (start + 1)-th allocation from here fails, no other
        try:
            cols = log.take()
        except MemoryError:
            _testcapi.remove_mem_hooks()
            failed += 1
            assert len(log) == len(want), (start, len(log))
            cols = log.take()
        else:
            _testcapi.remove_mem_hooks()
            ok += 1
        assert [[repr(v) for v in c] for c in cols] == [[repr(v) for v in c] for c in zip(*want)], start
        assert len(log) == 0
    print(failed, ok)


if __name__ == "__main__":
    main()
