"""Rules about the host side of a step: input pipeline, CPU oversubscription, long first steps."""

from __future__ import annotations

import math
from typing import ClassVar

from stepscope.analyze.advisor.base import AdvisorInput, Finding, finding
from stepscope.analyze.run.summary import RankSummary

INPUT_BOUND_SHARE = 0.10
FIRST_STEP_RATIO = 5.0
FIRST_STEPS_MIN_S = 1.0
OVERSUBSCRIPTION = 1.0


class InputBound:
    id: ClassVar[str] = "input-bound"
    title: ClassVar[str] = "Training waits for input data"
    explanation: ClassVar[str] = ("A share of every step is spent blocked in the DataLoader's next(): the model "
                                  "is idle while batches are loaded and collated.")
    threshold: ClassVar[str] = (f"data wait >= {INPUT_BOUND_SHARE:.0%} of the mean step time (warm-up excluded), "
                                "and so is the share's one-sided 95% lower bound over the steps (a few steps "
                                "preempted in next() on a busy machine do not make a run input-bound)")
    suggestion: ClassVar[str] = ("Load batches in parallel and ahead of time: DataLoader(num_workers=N, "
                                 "persistent_workers=True, prefetch_factor=2..4, pin_memory=True on GPU); move "
                                 "decoding and augmentation off the training process or cache preprocessed data.")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        def sure(r: RankSummary) -> bool:
            low = r.steps.data_wait_share_low
            return (r.steps.data_wait_share or 0.0) >= INPUT_BOUND_SHARE and (low is None or low >= INPUT_BOUND_SHARE)

        worst = max((r for r in inp.summary.ranks if sure(r)), key=lambda r: r.steps.data_wait_share or 0.0,
                    default=None)
        if worst is None:
            return None
        low = worst.steps.data_wait_share_low
        wait = worst.steps.phases[0]
        workers = sorted({int(d["num_workers"]) for d in worst.dataloaders if d.get("num_workers") is not None})
        ev: dict[str, float | int | str] = {
            "rank": worst.rank, "data_wait_share": worst.steps.data_wait_share or 0.0,
            "data_wait_share_low": low if low is not None else float("nan"),
            "data_wait_per_step_s": (wait.mean_ns or 0.0) / 1e9,
            "step_time_mean_s": (worst.steps.step_time.mean if worst.steps.step_time else float("nan")) / 1e9,
        }
        if workers:
            ev["dataloader_num_workers"] = ", ".join(str(w) for w in workers)
        return finding(self, inp, ev, per_step_s=(wait.mean_ns or 0.0) / 1e9, source="steps",
                       basis="all data wait hidden behind compute (upper bound)")


class CpuOversubscription:
    id: ClassVar[str] = "cpu-oversubscription"
    title: ClassVar[str] = "More busy threads than CPU cores"
    explanation: ClassVar[str] = ("Each training process runs torch's intra-op thread pool and its DataLoader "
                                  "workers; when the busy ones exceed the logical cores of the host, threads "
                                  "preempt each other and every step slows down.")
    threshold: ClassVar[str] = (f"processes on the host × torch threads + busy DataLoader workers > "
                                f"{OVERSUBSCRIPTION:g} × logical cores. Workers count by the cores the host had "
                                "busy outside the training processes (sampled CPU use); all of them count when "
                                "CPU use was not sampled.")
    suggestion: ClassVar[str] = ("Budget the cores: torch.set_num_threads(n) (or OMP_NUM_THREADS=n) and "
                                 "DataLoader(num_workers=...) so that busy threads fit the cores.")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        host = inp.summary.run.host
        cores = host.cpu_cores_logical
        if not cores:
            return None
        per_host: dict[str, list[RankSummary]] = {}
        for r in inp.summary.ranks:
            if any(d.get("torch_threads") or d.get("num_workers") for d in r.dataloaders):
                per_host.setdefault(r.host, []).append(r)
        for hostname, ranks in sorted(per_host.items()):
            f = self._host(inp, hostname, ranks, cores)
            if f is not None:
                return f
        return None

    def _host(self, inp: AdvisorInput, hostname: str, ranks: list[RankSummary], cores: int) -> Finding | None:
        procs = len(ranks)
        threads = max(max((int(d["torch_threads"]) for d in r.dataloaders if d.get("torch_threads")), default=1)
                      for r in ranks)
        workers = max(max((int(d["num_workers"]) for d in r.dataloaders if d.get("num_workers") is not None),
                          default=0) for r in ranks)
        busy_workers = float(workers * procs)  # per host; reduced below by what was measured
        measured = _busy_outside(ranks, cores)
        if measured is not None:
            busy_workers = min(busy_workers, measured)
        demand = procs * threads + busy_workers
        if demand <= OVERSUBSCRIPTION * cores:
            return None
        budget = max(1, cores // procs)
        busy_per_proc = busy_workers / procs
        rec_threads = max(1, budget - math.ceil(busy_per_proc - 1e-9))
        room = budget - rec_threads  # cores per process left for workers
        parts = []
        if rec_threads < threads:
            parts.append(f"torch.set_num_threads({rec_threads}) (or OMP_NUM_THREADS={rec_threads}) in each of the "
                         f"{procs} training process{'es' if procs > 1 else ''}")
        if workers and busy_per_proc > room:
            wait = min((r.steps.data_wait_share for r in ranks if r.steps.data_wait_share is not None), default=None)
            if wait is not None and wait < 0.05 and 1 <= room < workers:
                parts.append(f"DataLoader(num_workers={room}) (data wait is {wait:.0%} of the step: the input "
                             "keeps up)")
            else:
                parts.append(f"more cores than this host's {cores}: its DataLoader workers keep "
                             f"{busy_per_proc:.2g} cores busy per process")
        if not parts:
            return None
        ev: dict[str, float | int | str] = {
            "host": hostname, "logical_cores": cores, "processes": procs,
            "torch_threads_per_process": threads, "dataloader_workers_per_process": workers,
            "busy_workers": busy_workers, "threads_demanded": demand, "suggested_torch_threads": rec_threads}
        if measured is not None:
            ev["busy_cores_outside_training"] = measured
        return finding(self, inp, ev, per_step_s=None, source="metadata" if measured is None else "samples",
                       suggestion="Budget the cores: " + "; ".join(parts) + ".",
                       basis="not estimated: depends on how the threads contend")


def _busy_outside(ranks: list[RankSummary], cores: int) -> float | None:
    """Cores the host had busy outside the training processes (mean of the samples: its DataLoader workers
    and anything else running), None when host or process CPU use was not sampled."""
    host_pct = [m.mean for r in ranks for m in r.system if m.name == "cpu_system_pct" and m.mean is not None]
    proc_pct = [next((m.mean for m in r.system if m.name == "cpu_process_pct" and m.mean is not None), None)
                for r in ranks]
    if not host_pct or any(p is None for p in proc_pct):
        return None
    busy = max(host_pct) / 100 * cores
    return max(0.0, busy - sum(p or 0.0 for p in proc_pct) / 100)


class LongFirstSteps:
    id: ClassVar[str] = "long-first-steps"
    title: ClassVar[str] = "The first steps are much slower than the rest"
    explanation: ClassVar[str] = ("Warm-up (torch.compile, tf.function tracing, jax.jit compilation, cuDNN "
                                  "autotuning, allocator growth, lazy initialisation, first data loads) makes "
                                  "the first steps slow. stepscope "
                                  "excludes them from statistics; in short jobs they can dominate the run.")
    threshold: ClassVar[str] = (f"first step >= {FIRST_STEP_RATIO:g} × the median step and the warm-up steps' "
                                f"excess over the median >= {FIRST_STEPS_MIN_S:g} s")
    suggestion: ClassVar[str] = ("Cache compilation (TORCHINDUCTOR_FX_GRAPH_CACHE=1, torch.compile(dynamic=False) "
                                 "with fixed shapes), set torch.backends.cudnn.benchmark only for fixed shapes, "
                                 "warm data caches before timing; exclude the warm-up steps from benchmarks "
                                 "(stepscope does) and keep runs long enough to amortise them.")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        r0 = inp.rank0
        if r0 is None or r0.steps.step_time is None or r0.steps.first_step_ns is None:
            return None
        median = r0.steps.step_time.p50
        first = r0.steps.first_step_ns
        warm = r0.steps.warmup_steps
        excess_s = (first - median) / 1e9
        if median <= 0 or first < FIRST_STEP_RATIO * median or excess_s < FIRST_STEPS_MIN_S:
            return None
        ev: dict[str, float | int | str] = {"first_step_s": first / 1e9, "median_step_s": median / 1e9,
                                            "ratio": first / median, "warmup_steps": warm,
                                            "excess_s": excess_s}
        return finding(self, inp, ev, per_step_s=None, total_s=excess_s, source="steps",
                       suggestion=WARMUP_ADVICE.get(_compiler(inp)),
                       basis="the first step's excess over the median step (once per run)")


_WARMUP_COMMON = ("warm data caches before timing; exclude the warm-up steps from benchmarks (stepscope does) and "
                  "keep runs long enough to amortise them.")
_WARMUP_TF = ("Keras / TensorFlow trace and compile the train function on its first call and again for every new "
              "input shape (the partial last batch of an epoch: batch(..., drop_remainder=True) keeps one shape; "
              "an input_signature on a tf.function avoids retracing); " + _WARMUP_COMMON)
WARMUP_ADVICE: dict[str, str] = {
    "tensorflow": _WARMUP_TF,
    "jax": ("The first call of each jitted function compiles it, and every new input shape compiles it again "
            "(the partial last batch of an epoch: pad it or drop it to keep one shape); JAX's persistent "
            "compilation cache (jax.config.update('jax_compilation_cache_dir', DIR)) skips compiling in later "
            "runs; " + _WARMUP_COMMON),
}
"""The long-first-steps remedy by what compiled the steps (:func:`_compiler`); PyTorch runs and Keras on the
PyTorch backend get the rule's own suggestion."""


def _compiler(inp: AdvisorInput) -> str:
    """"tensorflow" or "jax" where the run's ``framework`` record says its steps ran there (Keras: its backend),
    else "" (PyTorch, or no record)."""
    rec = inp.summary.framework or {}
    name = rec.get("backend") if rec.get("name") == "keras" else rec.get("name")
    return name if isinstance(name, str) else ""
