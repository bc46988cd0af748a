"""The GPU section of a many-rank run report: CPU time of the ranks' analyses, of their critical paths, and of the
rendering with the paths computed while rendering (``gpu_section`` without ``paths``) against given (as the run
report does: ``RunAnalysis.critical_paths``, once per rank). Each fixture file of FOLDER is read as ranks 0..N-1 in
turn; the two renderings alternate, REPEAT times. Figures: docs/reports.md ("Many ranks") and
benchmarks/RESULTS.md.

    python benchmarks/report_ranks.py [FOLDER] [--ranks 16] [--repeat 2]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from stepscope.analyze.advisor import Advice
from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.analyze.trace.critical_path import critical_path
from stepscope.report.html.gpu_sections import gpu_section
from stepscope.traces.kineto import read_trace

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "data" / "traces" / "a100_8rank_diff"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", nargs="?", type=Path, default=FIXTURE)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    files = sorted(args.folder.glob("*.json*"))
    tables = {r: read_trace(files[r % len(files)], rank=r) for r in range(args.ranks)}
    advice = Advice(findings=(), checked=(), notes=())
    t = time.process_time()
    analyses = {r: analyze_trace(tb) for r, tb in tables.items()}
    print(f"{args.ranks} ranks of {args.folder.name}: analyses {time.process_time() - t:.2f} CPU-s")
    t = time.process_time()
    paths = {r: critical_path(tb) for r, tb in tables.items()}
    print(f"critical paths (once, RunAnalysis.critical_paths) {time.process_time() - t:.2f} CPU-s")
    for _ in range(args.repeat):
        t = time.process_time()
        gpu_section(analyses, [], advice, tables)
        old = time.process_time() - t
        t = time.process_time()
        gpu_section(analyses, [], advice, tables, paths=paths)
        print(f"render computing the paths {old:.2f} CPU-s, given them {time.process_time() - t:.2f} CPU-s")


if __name__ == "__main__":
    main()
