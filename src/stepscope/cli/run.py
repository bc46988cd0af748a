"""Observe a command's training: `stepscope run [OPTIONS] -- python train.py [ARGS]`."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from stepscope.cli.common import add_store_args, parse_pairs, store_from
from stepscope.collect.core.options import AUTO_SKIP, Options
from stepscope.errors import UserError


def add_collection_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("collection")
    g.add_argument("--samples-per-step", type=float, metavar="N",
                   help="samples per step (default: read from the batch)")
    g.add_argument("--tokens-per-step", type=float, metavar="N", help="tokens per step (default: from input_ids)")
    g.add_argument("--warmup-steps", type=int, metavar="N", help="steps excluded from statistics (default: automatic)")
    g.add_argument("--sample-interval", type=float, default=1.0, metavar="S",
                   help="system sampler period in seconds, 0 to turn it off (default: 1)")
    g.add_argument("--profile-steps", type=int, default=0, metavar="N",
                   help="record a profiler window of N active steps: torch.profiler, TensorFlow's profiler "
                        "(TensorFlow / Keras) or jax.profiler (JAX), whichever runs the steps (default: none)")
    g.add_argument("--profile-wait", type=int, default=1, metavar="N", help="steps to wait before the window's warm-up")
    g.add_argument("--profile-warmup", type=int, default=1, metavar="N", help="profiler warm-up steps (not kept)")
    g.add_argument("--profile-skip", type=int, default=None, metavar="N",
                   help="steps skipped before the window starts (default: past the automatic warm-up, 3-10; "
                        "with --warmup-steps N: N, at least 3)")
    g.add_argument("--profile-memory", action="store_true", help="record allocations in the window")
    g.add_argument("--no-comm-timing", action="store_true", help="do not time torch.distributed calls")
    g.add_argument("--memory-snapshot", type=int, default=0, metavar="N",
                   help="CUDA: record allocation history for N steps and save a snapshot (default: off)")
    g.add_argument("--sample-stacks", type=float, default=0.0, metavar="HZ",
                   help="sample the Python call stacks at HZ (e.g. 100) for `show --host` (default: off)")
    g.add_argument("--mlflow", action="store_true", default=None,
                   help="log the run to MLflow (also STEPSCOPE_MLFLOW=1; uses MLFLOW_TRACKING_URI)")
    g.add_argument("--peak-flops", type=float, metavar="FLOPS", help="peak FLOP/s of one device, for MFU")
    g.add_argument("--flops-per-step", type=float, metavar="FLOPS", help="model FLOPs per step (default: measured)")
    g.add_argument("--role", help="role of every observed process (e.g. learner); stepscope.session(role=) overrides")


def options_from(args: argparse.Namespace) -> Options:
    for name in ("samples_per_step", "tokens_per_step"):
        v = getattr(args, name)
        if v is not None and v <= 0:
            raise UserError(f"--{name.replace('_', '-')} {v}: must be positive")
    if args.sample_interval < 0:
        raise UserError(f"--sample-interval {args.sample_interval}: must be 0 (off) or positive")
    if args.memory_snapshot < 0 or args.sample_stacks < 0:
        raise UserError("--memory-snapshot and --sample-stacks must be 0 (off) or positive")
    if args.profile_steps < 0:
        raise UserError(f"--profile-steps {args.profile_steps}: must be 0 (off) or positive")
    if args.profile_skip is not None and args.profile_skip < 0:
        raise UserError(f"--profile-skip {args.profile_skip}: must be 0 or positive")
    skip = args.profile_skip if args.profile_skip is not None else (
        max(3, args.warmup_steps) if args.warmup_steps is not None else AUTO_SKIP)
    return Options(sample_interval_s=args.sample_interval, samples_per_step=args.samples_per_step,
                   tokens_per_step=args.tokens_per_step, warmup_steps=args.warmup_steps,
                   profile_steps=args.profile_steps, profile_wait=args.profile_wait,
                   profile_warmup=args.profile_warmup, profile_skip=skip, profile_memory=args.profile_memory,
                   comm_timing=not args.no_comm_timing, role=args.role,
                   memory_snapshot_steps=args.memory_snapshot, sample_stacks_hz=args.sample_stacks,
                   mlflow=bool(args.mlflow) if args.mlflow is not None else os.environ.get("STEPSCOPE_MLFLOW") == "1",
                   peak_flops=args.peak_flops, flops_per_step=args.flops_per_step)


def command_from(args: argparse.Namespace) -> list[str]:
    cmd = list(args.cmd or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UserError("no command to run — usage: stepscope run [OPTIONS] -- python train.py [ARGS]")
    return cmd


def _import_summary_code(printing: bool) -> None:
    """What the end of the run imports (the analysis; rich to print the summary), loaded while the command runs
    rather than after it: the launcher only waits then."""
    import importlib

    for module in ("stepscope.cli.finish", "stepscope.report.terminal")[:2 if printing else 1]:
        importlib.import_module(module)


class RunCommand:
    """Run a command with stepscope observing every Python process it starts (python script.py,
    python -m module, torchrun, mpirun), store the run, and print its summary. The command's output,
    exit code and signals pass through unchanged."""

    name = "run"
    help = "observe a training command: stepscope run -- python train.py"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--name", help="run name (default: the script's name)")
        parser.add_argument("--param", action="append", metavar="KEY=VALUE", help="a parameter of the run (repeatable)")
        parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="a tag of the run (repeatable)")
        parser.add_argument("--quiet", "-q", action="store_true", help="do not print the summary at the end")
        add_collection_args(parser)
        add_store_args(parser)
        parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the command to observe")

    def run(self, args: argparse.Namespace) -> int:
        from stepscope.cli.finish import finish_run
        from stepscope.collect.startup.launch import check_command, launch

        command = command_from(args)
        params, tags = parse_pairs(args.param, "param"), parse_pairs(args.tag, "tag")
        options = options_from(args)
        if options.mlflow:
            from stepscope.integrations.mlflow import require_mlflow

            require_mlflow()
        check_command(command)
        store = store_from(args, create=True)
        result = launch(store, command, name=args.name, params=params, tags=tags, options=options,
                        meanwhile=lambda: _import_summary_code(not args.quiet))
        try:
            finish_run(store, result.run_id, print_summary=not args.quiet)
        except Exception as e:  # the training is over: a stepscope failure never replaces its exit code
            why = str(e) if isinstance(e, UserError) else f"{type(e).__name__}: {e}"
            print(f"stepscope: warning: could not summarise the run ({why}); it stays in {result.run_dir}",
                  file=sys.stderr, flush=True)
        if result.signal is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            if result.signal not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(result.signal, signal.SIG_DFL)
            os.kill(os.getpid(), result.signal)
        return result.exit_code
