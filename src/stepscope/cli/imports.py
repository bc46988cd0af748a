"""Attach traces recorded elsewhere to a stored run."""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from stepscope.cli.common import StoreLike, add_store_args, as_store
from stepscope.errors import UserError

MAX_RANK = 1_000_000
"""Ranks beyond this are damage, not a job: they would name files like rank1000000000000.json.gz."""
MISFIT_EXIT = 3
"""Exit status of an import refused because a trace does not fit the run (docs/cli.md); 2: other mistakes."""


class ImportCommand:
    """Attach Kineto / PyTorch-profiler traces recorded elsewhere to RUN, one per rank (the rank is read from
    the trace's distributedInfo, else its file name). They are stored gzipped as
    artifacts/traces/rank<R>.json.gz, where `show --traces`, the report and `diff` find them. Every file
    is parsed first: a damaged one is named and nothing is attached. A trace that does not fit the run (its
    world size, a rank the run lacks, GPU work on a run without GPUs, another GPU model, wall-clock times
    outside the run) is refused with exit status 3, unless --accept-misfit stores it with a note."""

    name = "import"
    help = "attach traces recorded elsewhere to a run"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("run", help="the run to attach the traces to")
        parser.add_argument("traces", nargs="+", help="trace files or folders of them (.json, .json.gz)")
        parser.add_argument("--force", action="store_true", help="replace a rank's trace the run already has")
        parser.add_argument("--rank", type=int, metavar="R",
                            help="the rank of a single trace (instead of its distributedInfo or file name)")
        parser.add_argument("--accept-misfit", action="store_true",
                            help="attach traces that do not fit the run, with a note every view shows")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        return import_traces(args.run, args.traces, store=as_store(args.store, args.db), rank=args.rank,
                             force=args.force, accept_misfit=args.accept_misfit)


def import_traces(run: str, traces: Sequence[str | Path], *, store: StoreLike = None, rank: int | None = None,
                  force: bool = False, accept_misfit: bool = False) -> int:
    """Attach Kineto traces (files or folders) to run ``run`` as its per-rank trace artifacts, then index their
    figures with the run's."""
    from stepscope.app.importfit import misfit_note, misfits, note_path
    from stepscope.store.rundir import read_run
    from stepscope.traces.kineto import read_trace
    from stepscope.traces.traceset import trace_files

    if rank is not None and not 0 <= rank < MAX_RANK:
        raise UserError(f"--rank {rank}: a rank is 0 to {MAX_RANK - 1:,}")
    opened = as_store(store)
    run_dir = opened.run_path(opened.resolve(run))
    files = trace_files(traces)
    if rank is not None and len(files) != 1:
        raise UserError(f"--rank names the rank of one trace; {len(files)} were given — import them one by one "
                        "or let their distributedInfo / file names say")
    the_run = read_run(run_dir).run  # (with its streams: their GPUs and end times)
    ranks: dict[int, Path] = {}
    notes: dict[int, str] = {}
    refused: list[str] = []
    for f in files:
        table = read_trace(f)  # validates the whole file before anything is copied
        meta = table.meta
        r = rank if rank is not None else meta.rank
        if not 0 <= r < MAX_RANK:
            raise UserError(f"{f}: rank {r} (from its {meta.rank_source}) is not 0 to {MAX_RANK - 1:,} — "
                            "pass --rank R for this trace")
        if r in ranks:
            raise UserError(f"{f}: rank {r} again (also {ranks[r].name}) — import one trace per rank")
        ranks[r] = f
        if why := misfits(the_run, table, r):
            refused.append(f"{f}: does not fit run {the_run.id} as rank {r}: {'; '.join(why)}")
            notes[r] = misfit_note(r, f.name, why)
    if refused and not accept_misfit:  # (after every file parsed: a damaged file is named first)
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise UserError(f"{refused[0]}{more} — import the run's own traces, or pass --accept-misfit to attach "
                        "them with a note", exit_code=MISFIT_EXIT)
    dest_dir = run_dir / "artifacts" / "traces"
    clashes = [r for r in ranks if (dest_dir / f"rank{r}.json.gz").exists()]
    if clashes and not force:
        raise UserError(f"the run already has traces for rank(s) {', '.join(map(str, sorted(clashes)))} — "
                        "pass --force to replace them")
    dest_dir.mkdir(parents=True, exist_ok=True)
    for r, src in sorted(ranks.items()):
        dest = dest_dir / f"rank{r}.json.gz"
        tmp = dest.with_suffix(".tmp")
        with (gzip.open(src, "rb") if src.name.endswith(".gz") else src.open("rb")) as fin, \
                gzip.open(tmp, "wb") as fout:
            shutil.copyfileobj(fin, fout)
        tmp.replace(dest)
        note = note_path(dest)
        if r in notes:
            note.write_text(notes[r] + "\n", encoding="utf-8")
        else:
            note.unlink(missing_ok=True)  # (a fitting trace replaces a misfit one: its note goes too)
        print(f"rank {r}: {src} -> {dest.relative_to(run_dir)}", file=sys.stdout)
    from stepscope.app import RunAnalysis

    ra = RunAnalysis.from_dir(run_dir)  # the traces' figures join the run's indexed metrics (history, check)
    ra.print_notes()
    opened.index.upsert_run(ra.data.run, ra.data.path, ra.index_metrics)
    return 0
