"""Rules about the host side of a step: input pipeline, CPU oversubscription, long first steps."""

from __future__ import annotations

from typing import ClassVar

from stepscope.analyze.advisor.base import AdvisorInput, Finding, finding

INPUT_BOUND_SHARE = 0.10
FIRST_STEP_RATIO = 5.0
FIRST_STEPS_MIN_S = 1.0
OVERSUBSCRIPTION = 1.0


class InputBound:
    id: ClassVar[str] = "input-bound"
    title: ClassVar[str] = "Training waits for input data"
    explanation: ClassVar[str] = ("A share of every step is spent blocked in the DataLoader's next(): the model "
                                  "is idle while batches are loaded and collated.")
    threshold: ClassVar[str] = f"data wait >= {INPUT_BOUND_SHARE:.0%} of the mean step time (warm-up excluded)"
    suggestion: ClassVar[str] = ("Load batches in parallel and ahead of time: DataLoader(num_workers=N, "
                                 "persistent_workers=True, prefetch_factor=2..4, pin_memory=True on GPU); move "
                                 "decoding and augmentation off the training process or cache preprocessed data.")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        worst = max((r for r in inp.summary.ranks if r.steps.data_wait_share is not None),
                    key=lambda r: r.steps.data_wait_share or 0.0, default=None)
        if worst is None or (worst.steps.data_wait_share or 0.0) < INPUT_BOUND_SHARE:
            return None
        wait = worst.steps.phases[0]
        workers = sorted({int(d["num_workers"]) for d in worst.dataloaders if d.get("num_workers") is not None})
        ev: dict[str, float | int | str] = {
            "rank": worst.rank, "data_wait_share": worst.steps.data_wait_share or 0.0,
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
                                  "workers; when their total exceeds the logical cores of the host, threads "
                                  "preempt each other and every step slows down.")
    threshold: ClassVar[str] = (f"processes on the host × (torch threads + DataLoader workers) > "
                                f"{OVERSUBSCRIPTION:g} × logical cores")
    suggestion: ClassVar[str] = ("Budget the cores: torch.set_num_threads(cores // processes - workers) (or "
                                 "OMP_NUM_THREADS), and DataLoader(num_workers=...) so that the sum fits the cores.")

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        host = inp.summary.run.host
        cores = host.cpu_cores_logical
        if not cores:
            return None
        per_host: dict[str, list[tuple[int, int]]] = {}
        for r in inp.summary.ranks:
            threads = max((int(d["torch_threads"]) for d in r.dataloaders if d.get("torch_threads")), default=0)
            workers = max((int(d["num_workers"]) for d in r.dataloaders if d.get("num_workers") is not None), default=0)
            if threads or workers:
                per_host.setdefault(r.host, []).append((threads or 1, workers))
        for hostname, procs in sorted(per_host.items()):
            demand = sum(t + w for t, w in procs)
            if demand > OVERSUBSCRIPTION * cores:
                ev: dict[str, float | int | str] = {
                    "host": hostname, "logical_cores": cores, "processes": len(procs),
                    "torch_threads_per_process": max(t for t, _ in procs),
                    "dataloader_workers_per_process": max(w for _, w in procs), "threads_demanded": demand,
                }
                return finding(self, inp, ev, per_step_s=None, source="metadata",
                               basis="not estimated: depends on how busy the workers are")
        return None


class LongFirstSteps:
    id: ClassVar[str] = "long-first-steps"
    title: ClassVar[str] = "The first steps are much slower than the rest"
    explanation: ClassVar[str] = ("Warm-up (torch.compile, cuDNN autotuning, allocator growth, lazy "
                                  "initialisation, first data loads) makes the first steps slow. stepscope "
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
                       basis="the first step's excess over the median step (once per run)")
