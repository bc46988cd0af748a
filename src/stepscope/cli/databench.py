"""Benchmark a script's data pipeline alone: `stepscope data-bench [OPTIONS] -- python train.py`."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from stepscope.analyze.run.databench import DataBenchResult, bench_metrics, data_bench, worker_sweep
from stepscope.cli.common import StoreLike, add_store_args, as_store, print_json
from stepscope.errors import UserError
from stepscope.store import Store

KIND_TAG = "data-bench"


def parse_workers(text: str | None) -> list[int | None]:
    if not text:
        return [None]
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--workers {text!r}: expected worker counts separated by commas, e.g. 0,2,4,8") from None
    if not out or any(w < 0 for w in out):
        raise UserError(f"--workers {text!r}: expected worker counts >= 0, e.g. 0,2,4,8")
    return list(dict.fromkeys(out))


def _latest(store: Store, name: str, *, bench: bool, world: int | None = None, workers: str | None = None,
            metric: str) -> tuple[str, dict[str, float | None]] | None:
    """The newest completed run of this name (a data-bench one or an ordinary one) holding ``metric``."""
    from stepscope.cli.common import ensure_metrics

    rows = [r for r in store.index.runs("name = ? AND status = ?", (name, "completed"))
            if (r.tags.get("kind") == KIND_TAG) == bench and (world is None or r.world_size == world)
            and (workers is None or r.tags.get("workers") == workers)]
    if not rows:
        return None
    ensure_metrics(store, rows)
    metrics = store.index.metrics([r.id for r in rows])
    for r in rows:
        if metrics.get(r.id, {}).get(metric) is not None:
            return r.id, metrics[r.id]
    return None


@dataclass(frozen=True, slots=True)
class DataBenchOptions:
    """Per run: epochs per loader, the batches / seconds each epoch stops after (None: the whole epoch), the run
    name (None: the script's) and the system sampler's period."""

    epochs: int = 2
    max_batches: int | None = None
    time_s: float | None = None
    name: str | None = None
    sample_interval_s: float = 1.0


def bench_once(store: Store, command: list[str], opts: DataBenchOptions, workers: int | None,
               group: str | None) -> DataBenchResult:
    """Launch one benchmark run, check it measured something, analyse, index."""
    from stepscope.collect.core.options import Options
    from stepscope.collect.startup.launch import launch
    from stepscope.collect.torch.databench import ENV_DATABENCH, BenchSpec
    from stepscope.store.rundir import read_run

    spec = BenchSpec(epochs=opts.epochs, max_batches=opts.max_batches, time_s=opts.time_s, workers=workers)
    tags = {"kind": KIND_TAG, **({"workers": str(workers)} if workers is not None else {})}
    res = launch(store, command, name=opts.name, tags=tags, options=Options(sample_interval_s=opts.sample_interval_s),
                 group=group, extra_env={ENV_DATABENCH: spec.to_env()})
    data = read_run(res.run_dir)
    if not any(r.extra.get("databench") for r in data.ranks):
        store.index.upsert_run(data.run, data.path, {})
        ended = "ended" if res.exit_code == 0 else f"failed (exit code {res.exit_code})"
        raise UserError(f"the script {ended} without iterating a torch DataLoader: nothing to benchmark — "
                        f"data-bench measures DataLoader iteration (run {res.run_id})")
    ref = None
    if data.run.world_size > 1:
        single = _latest(store, data.run.name, bench=True, world=1, workers=tags.get("workers"),
                         metric="databench.first_local_samples_per_s")
        if single is not None:
            ref = (single[1].get("databench.first_local_samples_per_s"),
                   single[1].get("databench.later_local_samples_per_s"))
    train = _latest(store, data.run.name, bench=False, metric="samples_per_s")
    training = (train[0], float(train[1]["samples_per_s"] or 0.0)) if train else None
    result = data_bench(data, reference=ref or (None, None), training=training)
    store.index.upsert_run(data.run, data.path, bench_metrics(result))
    return result


class DataBenchCommand:
    """Run a training script but iterate only its DataLoader(s): the first loader the script iterates
    (then every other it created) is drained for --epochs epochs without running the training step.
    Reports samples/s and batches/s per rank and in total, first epoch and later epochs apart, the
    time to the first batch and the loader's configuration; with torchrun, local and global throughput
    with ideal and efficiency. Each benchmark is stored as a run tagged kind=data-bench."""

    name = "data-bench"
    help = "benchmark the script's data pipeline alone (samples/s, worker sweep)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--epochs", type=int, default=2, metavar="N", help="epochs per loader (default 2)")
        parser.add_argument("--workers", metavar="N,N,...", help="sweep num_workers over these counts (e.g. 0,2,4,8)")
        parser.add_argument("--max-batches", type=int, metavar="N", help="stop each epoch after N batches")
        parser.add_argument("--time", type=float, metavar="S", help="stop each epoch after S seconds")
        parser.add_argument("--name", help="run name (default: the script's name)")
        parser.add_argument("--sample-interval", type=float, default=1.0, metavar="S", help="system sampler period")
        parser.add_argument("--json", action="store_true", help="results as JSON (schema stepscope.databench/1)")
        add_store_args(parser)
        parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the training command")

    def run(self, args: argparse.Namespace) -> int:
        from stepscope.cli.run import command_from

        opts = DataBenchOptions(epochs=args.epochs, max_batches=args.max_batches, time_s=args.time, name=args.name,
                                sample_interval_s=args.sample_interval)
        return databench(command_from(args), workers=args.workers, options=opts, store=args.store, db=args.db,
                         json=args.json)


def databench(command: Sequence[str], *, workers: str | None = None, options: DataBenchOptions = DataBenchOptions(),
              store: StoreLike = None, db: str | None = None, json: bool = False) -> int:
    """Benchmark the DataLoader iteration of ``command`` (once, or per worker count of ``workers``: "0,2,4")."""
    from stepscope.collect.startup.launch import check_command

    if options.epochs < 1 or (options.max_batches is not None and options.max_batches < 1) or (
            options.time_s is not None and options.time_s <= 0):
        raise UserError("--epochs, --max-batches and --time must be positive")
    cmd = list(command)
    check_command(cmd)
    counts = parse_workers(workers)
    opened = as_store(store, db, create=True)
    group = None
    if len(counts) > 1:
        group = f"databench-{time.time_ns():x}"
        opened.index.add_group(group, "data-bench", options.name or "workers", time.time_ns(), {"workers": counts})
    results = [(w, bench_once(opened, cmd, options, w, group)) for w in counts]
    sweep = worker_sweep([(w if w is not None else -1, r) for w, r in results]) if len(results) > 1 else None
    if json:
        doc = results[0][1].to_dict() if sweep is None else {"runs": [r.to_dict() for _, r in results],
                                                              "sweep": sweep.to_dict()}
        print_json(doc)
        return 0
    from stepscope.report.databench import bench_view, sweep_view
    from stepscope.report.terminal import console

    out = console(file=sys.stdout)
    for _, r in results:
        out.print(bench_view(r))
    if sweep is not None:
        out.print(sweep_view(sweep))
    return 0
