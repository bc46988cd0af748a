"""Rules about the host side of a step: input pipeline, CPU oversubscription, long first steps."""

from __future__ import annotations

from typing import ClassVar

from stepscope.analyze.advisor.base import AdvisorInput, Finding, evidence_source, finding
from stepscope.analyze.advisor.changes import Change
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
            "data_wait_per_step_s": wait.mean_ns / 1e9 if wait.mean_ns is not None else float("nan"),
            "step_time_mean_s": (worst.steps.step_time.mean if worst.steps.step_time else float("nan")) / 1e9,
        }
        if workers:
            ev["dataloader_num_workers"] = ", ".join(str(w) for w in workers)
        return finding(self, inp, ev, per_step_s=wait.mean_ns / 1e9 if wait.mean_ns is not None else None,
                       source="steps",
                       basis="all data wait hidden behind compute (upper bound)", upper_bound=True,
                       change=_workers_change(inp, worst, workers))


class CpuOversubscription:
    id: ClassVar[str] = "cpu-oversubscription"
    title: ClassVar[str] = "More busy threads than CPU cores"
    explanation: ClassVar[str] = ("Each training process runs torch's intra-op thread pool; when the processes on "
                                  "a host ask for more threads than it has logical cores, threads preempt each "
                                  "other and every step slows down.")
    threshold: ClassVar[str] = (f"processes on the host × torch threads > {OVERSUBSCRIPTION:g} × logical cores. "
                                "Only the run's own threads count: the host's CPU use outside the training "
                                "processes is never counted (on a shared host it is other tenants' as much as "
                                "the DataLoader workers', whose own CPU is not sampled), so workers are listed, "
                                "not counted.")
    suggestion: ClassVar[str] = ("Budget the cores: torch.set_num_threads(n) (or OMP_NUM_THREADS=n) so that the "
                                 "training processes' threads fit the cores.")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        host = inp.summary.run.host
        cores = host.cpu_cores_logical
        if not cores:
            return None
        per_host: dict[str, list[RankSummary]] = {}
        for r in inp.summary.ranks:
            if any(d.get("torch_threads") for d in r.dataloaders):
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
        demand = procs * threads
        if demand <= OVERSUBSCRIPTION * cores:
            return None
        rec_threads = max(1, cores // procs)
        if rec_threads >= threads:
            return None
        ev: dict[str, float | int | str] = {
            "host": hostname, "logical_cores": cores, "processes": procs,
            "torch_threads_per_process": threads, "dataloader_workers_per_process": workers,
            "threads_demanded": demand, "suggested_torch_threads": rec_threads}
        own = _own_cores(ranks)
        if own is not None:
            ev["training_processes_cpu_cores"] = own
        per_step, basis, measured = _own_wait(inp, ranks, demand, procs * rec_threads, cores, ev)
        suggestion = (f"Budget the cores: torch.set_num_threads({rec_threads}) (or OMP_NUM_THREADS={rec_threads}) "
                      f"in each of the {procs} training process{'es' if procs > 1 else ''}"
                      + (f", and leave cores for the {workers} DataLoader worker{'s' if workers > 1 else ''} "
                         "of each" if workers else "") + ".")
        return finding(self, inp, ev, per_step_s=per_step, source="metadata", suggestion=suggestion, basis=basis,
                       change=Change("threads", "intra", rec_threads, f"torch.set_num_threads({rec_threads})"),
                       measured_from="; ".join(
                           [evidence_source(inp, "metadata")]
                           + (["the training processes' CPU " + evidence_source(inp, "samples")] if own is not None
                              else [])
                           + ([measured] if measured else [])))


MAX_SUGGESTED_WORKERS = 4
"""More workers than this rarely pay on one rank; tune searches further."""


def _workers_change(inp: AdvisorInput, r: RankSummary, workers: list[int]) -> Change | None:
    """More DataLoader workers as a change the torch hooks apply at construction: from 0 to the cores each
    process can have (at most :data:`MAX_SUGGESTED_WORKERS`), else double the most used, within the cores.
    None where no torch DataLoader was recorded (tf.data, a hand-written loop: a code change)."""
    if not workers:
        return None
    cores = inp.summary.run.host.cpu_cores_logical or 1
    procs = max(1, sum(1 for x in inp.summary.ranks if x.host == r.host))
    per_proc = max(1, cores // procs)
    now = max(workers)
    n = max(1, min(MAX_SUGGESTED_WORKERS, per_proc)) if now == 0 else min(2 * now, per_proc)
    if n <= now:
        return None
    return Change("loader", "num_workers", n, f"DataLoader num_workers={n}")


OWN_WAIT_BASIS = ("the training thread's run-queue wait during the measured steps, as far as the run's own other "
                  "threads can account for it (at most their CPU time: the wait behind other processes is not "
                  "counted); an estimate that runs low: spinning at the thread pool's barriers, on a CPU, is "
                  "not counted")


def _own_wait(inp: AdvisorInput, ranks: list[RankSummary], demand: int, budget: int, cores: int,
              ev: dict[str, float | int | str]) -> tuple[float | None, str, str]:
    """The step time fewer threads could save, from the run's own processes only: (seconds per step or None,
    basis, what it was measured from). Adds its inputs to ``ev``.

    The training thread of one rank (rank 0 where it is on this host) waited ``wait`` of its steps' time runnable
    but without a CPU (Linux schedstat). While it waited every core was busy; the part of that time when one of
    the run's own other threads held a core is at most their CPU time, ``own`` = the host's training processes'
    CPU minus this thread's, in cores. ``min(wait, own)`` of the step is the wait the run's own threads can
    explain; a hog beside the run raises ``wait`` but not ``own`` (its threads then get less CPU). Where the
    suggested threads still exceed the cores (more processes than cores) only the share of the other threads
    the change removes counts. Spinning at the pool's barriers while a sibling waits is on a CPU and not seen:
    the realised saving is larger (benchmarks/advice.py)."""
    r = next((x for x in ranks if x.rank == 0), min(ranks, key=lambda x: x.rank))
    st, cpu = r.steps, r.cpu_in_steps
    step_s = st.wall_ns / st.measured_steps / 1e9 if st.measured_steps > 0 and st.wall_ns > 0 else None
    procs_pct = [x.cpu_in_steps.process_pct if x.cpu_in_steps is not None else None for x in ranks]
    if (step_s is None or cpu is None or cpu.run_queue_wait_pct is None or cpu.main_thread_pct is None
            or any(p is None for p in procs_pct)):
        missing = ("no measured steps" if step_s is None else
                   "the training thread's run-queue wait (Linux /proc/PID/schedstat) or the training processes' "
                   "CPU was not sampled during the measured steps (a run shorter than a sampling interval: "
                   "rerun with a smaller --sample-interval)")
        return None, f"not measurable: {missing}", ""
    wait = min(max(cpu.run_queue_wait_pct / 100, 0.0), 1.0)
    own = max(sum(p or 0.0 for p in procs_pct) / 100 - cpu.main_thread_pct / 100, 0.0)
    share = min(wait, own)
    if budget > cores and demand > 1:
        share *= (demand - budget) / (demand - 1)
    ev.update({"estimate_rank": r.rank, "step_time_mean_s": step_s, "training_thread_wait_share": wait,
               "training_thread_cpu_share": cpu.main_thread_pct / 100, "own_other_threads_cpu_cores": own})
    measured = (f"the estimate from rank {r.rank}'s training thread's run-queue wait and CPU (/proc/PID/schedstat) and "
                f"the training processes' CPU over the {st.measured_steps} measured steps ({cpu.intervals} sampling "
                f"interval{'s' if cpu.intervals != 1 else ''}, {cpu.seconds:.3g} s)")
    return share * step_s, OWN_WAIT_BASIS, measured


def _own_cores(ranks: list[RankSummary]) -> float | None:
    """Cores the training processes themselves kept busy (mean of the sampler's per-process CPU, summed over
    the host's ranks), None when a rank's CPU use was not sampled. The host-wide figure is not used: on a
    shared host it counts other tenants."""
    pct = [next((m.mean for m in r.system if m.name == "cpu_process_pct" and m.mean is not None), None)
           for r in ranks]
    if not pct or any(p is None for p in pct):
        return None
    return sum(p or 0.0 for p in pct) / 100


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
