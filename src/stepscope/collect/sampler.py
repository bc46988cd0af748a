"""Background system sampler: one daemon thread per observed process.

One sample when the session opens (memory, threads, GPUs: no rates yet), one every
``sample_interval_s``, and a last one when the session closes, so a run shorter than the period
still has memory figures. Each periodic and the last sample: process CPU % and RSS, system CPU %
and memory, disk and network I/O rates; on local rank 0 only (one per node, not one per rank),
every GPU through NVML (utilisation, memory, power, cumulative energy, SM clock, temperature) and
CPU package energy through RAPL where readable. For the host's CPU contention (what `diff` compares between
two single runs): the 1-minute load average (``load_avg_1m``) and, from Linux ``/proc/PID/schedstat``, the main
(training) thread's run-queue wait, the share of the interval it was runnable but waiting for a CPU
(``run_queue_wait_pct``), its CPU time (``main_thread_cpu_pct``, 100 = the whole interval) and how many times it
was put on a CPU (``main_thread_slices``). A source that cannot be read is left out (its columns are absent, never
zero). Slow NVML queries run here, never on the training thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stepscope.collect.session import Session

RAPL_ROOT = Path("/sys/class/powercap")


class Nvml:
    """The NVML devices of this node, or none."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nv = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # not installed, or no driver (NVMLError_LibraryNotFound): no GPU columns
            self.handles = []

    def read(self, out: dict[str, Any]) -> None:
        nv: Any = getattr(self, "nv", None)  # the pynvml module (untyped)
        for i, h in enumerate(self.handles):
            readers: tuple[tuple[str, Callable[..., Any]], ...] = (
                (f"gpu{i}_util_pct", lambda h=h: nv.nvmlDeviceGetUtilizationRates(h).gpu),
                (f"gpu{i}_mem_used_bytes", lambda h=h: nv.nvmlDeviceGetMemoryInfo(h).used),
                (f"gpu{i}_mem_total_bytes", lambda h=h: nv.nvmlDeviceGetMemoryInfo(h).total),
                (f"gpu{i}_power_w", lambda h=h: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
                (f"gpu{i}_energy_j", lambda h=h: nv.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0),
                (f"gpu{i}_sm_clock_mhz", lambda h=h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                (f"gpu{i}_temp_c", lambda h=h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
            )
            for key, fn in readers:
                try:
                    out[key] = float(fn())
                except Exception:
                    pass


def rapl_files() -> list[Path]:
    """Readable package-level RAPL energy counters (root-only on recent kernels: often none)."""
    out = []
    for p in sorted(RAPL_ROOT.glob("intel-rapl:*/energy_uj")):
        if p.parent.name.count(":") == 1:
            try:
                p.read_text()
                out.append(p)
            except OSError:
                pass
    return out


class Sampler(threading.Thread):
    def __init__(self, session: Session, interval_s: float, gpus: bool) -> None:
        super().__init__(name="stepscope-sampler", daemon=True)
        self.session = session
        self.interval_s = interval_s
        self.stop_event = threading.Event()
        self.gpus = gpus

    def run(self) -> None:
        try:
            self._loop()
        except Exception as e:
            self.session.warn_once("sampler", f"the system sampler stopped ({e})")

    def _loop(self) -> None:
        import os

        import psutil

        if "sampler" in os.environ.get("STEPSCOPE_DEBUG_FAULT", "").split(","):
            raise RuntimeError("injected fault (STEPSCOPE_DEBUG_FAULT=sampler)")

        proc = psutil.Process()
        proc.cpu_percent(None)
        psutil.cpu_percent(None)
        nvml = Nvml() if self.gpus else None
        rapl = rapl_files() if self.gpus else []
        prev_io = _io_counters(psutil)
        prev_t = time.monotonic()
        rapl_total = 0.0
        rapl_prev = [_read_uj(p) for p in rapl]
        schedstat = Path(f"/proc/{os.getpid()}/schedstat")
        prev_sched = _schedstat_ns(schedstat)
        first = True
        while True:
            # one sample at once (memory and GPU figures; rates need an interval), one per period, and
            # a last one when the session stops: every run, however short, has memory figures
            stopping = not first and self.stop_event.wait(self.interval_s)
            now = time.monotonic()
            dt = max(now - prev_t, 1e-9)
            s: dict[str, Any] = {"t_ns": time.time_ns()}
            with proc.oneshot():
                if not first:
                    s["cpu_process_pct"] = proc.cpu_percent(None)
                s["rss_bytes"] = float(proc.memory_info().rss)
                s["threads"] = float(proc.num_threads())
            if not first:
                s["cpu_system_pct"] = psutil.cpu_percent(None)
                sched = _schedstat_ns(schedstat)
                if sched is not None and prev_sched is not None:
                    s["main_thread_cpu_pct"] = 100.0 * max(sched[0] - prev_sched[0], 0) / (dt * 1e9)
                    s["run_queue_wait_pct"] = 100.0 * max(sched[1] - prev_sched[1], 0) / (dt * 1e9)
                    s["main_thread_slices"] = float(max(sched[2] - prev_sched[2], 0))
                prev_sched = sched
            if hasattr(os, "getloadavg"):
                s["load_avg_1m"] = os.getloadavg()[0]
            vm = psutil.virtual_memory()
            s["mem_system_used_bytes"] = float(vm.total - vm.available)
            s["mem_system_total_bytes"] = float(vm.total)
            if not first:
                io = _io_counters(psutil)
                for key, cur in io.items():
                    if key in prev_io:
                        s[key] = max(cur - prev_io[key], 0.0) / dt
                prev_io, prev_t = io, now
            if nvml is not None:
                nvml.read(s)
            if rapl and not first:
                cur_uj = [_read_uj(p) for p in rapl]
                for a, b in zip(rapl_prev, cur_uj, strict=True):
                    if a is not None and b is not None and b >= a:  # counters wrap: skip a wrap interval
                        rapl_total += (b - a) / 1e6
                rapl_prev = cur_uj
                s["cpu_energy_j"] = rapl_total
            self.session.buffers.add_sample(s)
            first = False
            if stopping:
                return


def _read_uj(p: Path) -> float | None:
    try:
        return float(p.read_text())
    except (OSError, ValueError):
        return None


def _schedstat_ns(path: Path) -> tuple[int, int, int] | None:
    """Cumulative ns the thread has run on a CPU and waited on a run queue, and how many times it was put on a CPU
    (the three fields of schedstat), None where unreadable."""
    try:
        fields = path.read_text().split()
        return int(fields[0]), int(fields[1]), int(fields[2])
    except (OSError, ValueError, IndexError):
        return None


def _io_counters(psutil: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        d = psutil.disk_io_counters()
        if d is not None:
            out["disk_read_bps"] = float(d.read_bytes)
            out["disk_write_bps"] = float(d.write_bytes)
    except Exception:
        pass
    try:
        n = psutil.net_io_counters()
        out["net_recv_bps"] = float(n.bytes_recv)
        out["net_sent_bps"] = float(n.bytes_sent)
    except Exception:
        pass
    return out


def start_sampler(session: Session) -> Sampler | None:
    interval = session.options.sample_interval_s
    if interval <= 0:
        return None
    local_rank = session.stream.local_rank if session.stream else 0
    sampler = Sampler(session, interval, gpus=local_rank == 0)
    sampler.start()

    def stop() -> None:
        sampler.stop_event.set()
        if sampler is not threading.current_thread():
            sampler.join(timeout=2.0)  # finished before interpreter finalization, never killed mid-call

    session.closers.append(stop)
    return sampler
