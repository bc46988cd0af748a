"""What the "loud when blind" exit path costs a process that imported a framework but recorded no step
(docs/frameworks.md, "Nothing is imported for you"; history in benchmarks/RESULTS.md).

Such a process writes its stream at exit, with the hooks it had (collect/core/session.py, ``_close_if_blind``). Each
round runs one process under ``stepscope run`` that imports a stand-in Keras 2 (a package with only a version,
written to a temporary folder: no real framework's import time in the figure) and records, with two atexit
handlers of its own around stepscope's (atexit runs last-registered first), the wall time of the exit path alone.
Printed: the median over the rounds, min and max.

    .venv/bin/python benchmarks/blind_exit.py              # 7 rounds, about 10 s
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = """\
import atexit, sys, time
T = {}
atexit.register(lambda: print(f"EXIT_NS {time.perf_counter_ns() - T['t']}", file=sys.stderr))
import keras
atexit.register(lambda: T.__setitem__("t", time.perf_counter_ns()))
"""


def one_round(folder: Path) -> float:
    """Milliseconds of the blind exit path in one observed process."""
    env = {**os.environ, "STEPSCOPE_HOME": str(folder / "store"),
           "PYTHONPATH": os.pathsep.join(p for p in (str(folder / "fake"), os.environ.get("PYTHONPATH")) if p)}
    env.pop("STEPSCOPE_DB", None)
    r = subprocess.run([sys.executable, "-m", "stepscope", "run", "--quiet", "--", sys.executable,
                        str(folder / "blind.py")], capture_output=True, text=True, env=env, timeout=120)
    line = next((s for s in r.stderr.splitlines() if s.startswith("EXIT_NS ")), None)
    if r.returncode or line is None:
        raise SystemExit(f"the observed process failed: {r.stderr[-2000:]}")
    return int(line.split()[1]) / 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "fake" / "keras").mkdir(parents=True)
        (folder / "fake" / "keras" / "__init__.py").write_text('__version__ = "2.15.0"\n')
        (folder / "blind.py").write_text(SCRIPT)
        ms = [one_round(folder) for _ in range(args.rounds)]
    load = os.getloadavg()[0]
    print(f"blind exit path: median {statistics.median(ms):.1f} ms (min {min(ms):.1f}, max {max(ms):.1f}) over "
          f"{len(ms)} processes; load average {load:.1f}")


if __name__ == "__main__":
    main()
