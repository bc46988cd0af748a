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

On Linux the host figures are read from ``/proc`` through descriptors opened once (collect/system/procfs.py: the
numbers psutil gives, at a few system calls a sample); elsewhere through psutil.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from stepscope.collect.system import procfs
from stepscope.collect.system.procfs import ProcFile, open_or_none

if TYPE_CHECKING:
    from stepscope.collect.core.session import Session

RAPL_ROOT = Path("/sys/class/powercap")
_T = TypeVar("_T")


class Nvml:
    """The NVML devices of this node, or none."""

    def __init__(self) -> None:
        self.readers: list[tuple[str, Callable[..., Any]]] = []
        """(column, query) of every GPU, built once: a sample only calls them."""
        try:
            import pynvml

            nv: Any = pynvml  # untyped
            nv.nvmlInit()
            handles: list[Any] = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
        except Exception:  # not installed, or no driver (NVMLError_LibraryNotFound): no GPU columns
            return
        for i, h in enumerate(handles):
            readers: tuple[tuple[str, Callable[..., Any]], ...] = (
                (f"gpu{i}_util_pct", lambda h=h: nv.nvmlDeviceGetUtilizationRates(h).gpu),
                (f"gpu{i}_mem_used_bytes", lambda h=h: nv.nvmlDeviceGetMemoryInfo(h).used),
                (f"gpu{i}_mem_total_bytes", lambda h=h: nv.nvmlDeviceGetMemoryInfo(h).total),
                (f"gpu{i}_power_w", lambda h=h: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
                (f"gpu{i}_energy_j", lambda h=h: nv.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0),
                (f"gpu{i}_sm_clock_mhz", lambda h=h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                (f"gpu{i}_temp_c", lambda h=h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
            )
            self.readers += readers

    def read(self, out: dict[str, Any]) -> None:
        for key, fn in self.readers:
            try:
                out[key] = float(fn())
            except Exception:
                pass


def rapl_files() -> list[ProcFile]:
    """Readable package-level RAPL energy counters, kept open (root-only on recent kernels: often none)."""
    out = []
    for p in sorted(RAPL_ROOT.glob("intel-rapl:*/energy_uj")):
        if p.parent.name.count(":") == 1:
            f = open_or_none(str(p), 64)
            if f is not None and _read_uj(f) is not None:
                out.append(f)
            elif f is not None:
                f.close()
    return out


class Host(Protocol):
    """Where a sample's host figures come from; each reading is None (its columns left out) where unreadable."""

    def process(self) -> tuple[float, float, float] | None:
        """(CPU seconds, user + system, so far; resident bytes; threads) of this process."""

    def cpu_times(self) -> tuple[float, ...] | None:
        """System-wide CPU times so far, in the order and unit :func:`procfs.busy_pct` takes."""

    def memory(self) -> tuple[float, float] | None:
        """(total, available) bytes of the host's memory."""

    def io(self) -> dict[str, float]:
        """Cumulative disk and network bytes, by the name of the rate column they make."""

    def close(self) -> None: ...


class ProcHost:
    """Linux: the figures psutil reports, read from ``/proc`` through descriptors kept open (collect/system/procfs.py):
    six ``pread`` calls a sample instead of psutil's ~40 system calls and ~500 Python calls."""

    def __init__(self, pid: int) -> None:
        self.tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
        self.page_bytes = os.sysconf("SC_PAGE_SIZE")
        self.stat = ProcFile(f"/proc/{pid}/stat", 1024)
        self.statm = ProcFile(f"/proc/{pid}/statm", 256)
        self.cpu = open_or_none("/proc/stat", 256)  # the cpu line comes first: only it is read
        self.mem = open_or_none("/proc/meminfo", 256)  # MemTotal, MemFree, MemAvailable: the first lines
        self.disk = open_or_none("/proc/diskstats")
        self.net = open_or_none("/proc/net/dev")
        self.disk_names = procfs.DiskNames()

    def process(self) -> tuple[float, float, float] | None:
        try:
            ticks, threads = procfs.pid_stat(self.stat.read())
            pages = procfs.statm_resident_pages(self.statm.read())
        except (OSError, ValueError, IndexError):
            return None
        return ticks * self.tick_s, float(pages * self.page_bytes), float(threads)

    def cpu_times(self) -> tuple[float, ...] | None:
        return _parsed(self.cpu, procfs.cpu_times)

    def memory(self) -> tuple[float, float] | None:
        m = _parsed(self.mem, procfs.meminfo)
        if m is None:  # no MemAvailable: psutil estimates it
            import psutil

            return _psutil_memory(psutil)
        return float(m[0]), float(m[1])

    def io(self) -> dict[str, float]:
        out: dict[str, float] = {}
        d = _parsed(self.disk, lambda b: procfs.disk_bytes(b, self.disk_names))
        if d is not None:
            out["disk_read_bps"], out["disk_write_bps"] = float(d[0]), float(d[1])
        n = _parsed(self.net, procfs.net_bytes)
        if n is not None:
            out["net_recv_bps"], out["net_sent_bps"] = float(n[0]), float(n[1])
        return out

    def close(self) -> None:
        for f in (self.stat, self.statm, self.cpu, self.mem, self.disk, self.net):
            if f is not None:
                f.close()


def _parsed(f: ProcFile | None, parse: Callable[[bytes], _T | None]) -> _T | None:
    if f is None:
        return None
    try:
        return parse(f.read())
    except (OSError, ValueError, IndexError):
        return None


class PsutilHost:
    """Elsewhere (no ``/proc``): the same figures through psutil."""

    def __init__(self) -> None:
        import psutil

        self.psutil = psutil
        self.proc = psutil.Process()

    def process(self) -> tuple[float, float, float] | None:
        try:
            with self.proc.oneshot():
                t = self.proc.cpu_times()
                return t.user + t.system, float(self.proc.memory_info().rss), float(self.proc.num_threads())
        except Exception:
            return None

    def cpu_times(self) -> tuple[float, ...] | None:
        try:
            return tuple(self.psutil.cpu_times())
        except Exception:
            return None

    def memory(self) -> tuple[float, float] | None:
        return _psutil_memory(self.psutil)

    def io(self) -> dict[str, float]:
        return _io_counters(self.psutil)

    def close(self) -> None:
        pass


def open_host(pid: int) -> Host:
    try:
        return ProcHost(pid)
    except OSError:
        return PsutilHost()


class StopSignal:
    """Set once, from any thread; :meth:`wait` is one lock acquire with a timeout, where ``threading.Event.wait``
    builds a Condition waiter each time (about twice the work per period of a thread that mostly waits)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()  # released by set(): a waiter gets it then, at once
        self._guard = threading.Lock()
        self._set = False

    def set(self) -> None:
        with self._guard:
            if not self._set:
                self._set = True
                self._lock.release()

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        """True once set (at once if it is), False after ``timeout`` seconds without."""
        if self._lock.acquire(timeout=timeout):
            self._lock.release()  # stays set for the next wait
            return True
        return self._set


class Sampler(threading.Thread):
    def __init__(self, session: Session, interval_s: float, gpus: bool) -> None:
        super().__init__(name="stepscope-sampler", daemon=True)
        self.session = session
        self.interval_s = interval_s
        self.stop_event = StopSignal()
        self.gpus = gpus

    def run(self) -> None:
        try:
            self._loop()
        except Exception as e:
            self.session.warn_once("sampler", f"the system sampler stopped ({e})")

    def _loop(self) -> None:
        if "sampler" in os.environ.get("STEPSCOPE_DEBUG_FAULT", "").split(","):
            raise RuntimeError("injected fault (STEPSCOPE_DEBUG_FAULT=sampler)")
        host = open_host(os.getpid())
        try:
            self._sample_until_stopped(host)
        finally:
            host.close()

    def _sample_until_stopped(self, host: Host) -> None:
        nvml = Nvml() if self.gpus else None
        rapl = rapl_files() if self.gpus else []
        schedstat = open_or_none(f"/proc/{os.getpid()}/schedstat", 128)
        try:
            self._sample(host, nvml, rapl, schedstat)
        finally:
            for f in (schedstat, *rapl):
                if f is not None:
                    f.close()

    def _sample(self, host: Host, nvml: Nvml | None, rapl: list[ProcFile], schedstat: ProcFile | None) -> None:
        prev_proc = host.process()
        prev_cpu = host.cpu_times()
        prev_io = host.io()
        prev_t = time.monotonic()
        rapl_total = 0.0
        rapl_prev = [_read_uj(f) for f in rapl]
        prev_sched = _schedstat_ns(schedstat)
        first = True
        add = self.session.buffers.add_sample
        while True:
            # one sample at once (memory and GPU figures; rates need an interval), one per period, and
            # a last one when the session stops: every run, however short, has memory figures
            stopping = not first and self.stop_event.wait(self.interval_s)
            now = time.monotonic()
            dt = max(now - prev_t, 1e-9)
            s: dict[str, Any] = {"t_ns": time.time_ns()}
            proc = host.process()
            if proc is not None:
                if not first and prev_proc is not None:
                    s["cpu_process_pct"] = round(max(proc[0] - prev_proc[0], 0.0) / dt * 100, 1)
                s["rss_bytes"], s["threads"] = proc[1], proc[2]
            if not first:
                prev_proc = proc
                cpu = host.cpu_times()
                if cpu is not None and prev_cpu is not None and len(cpu) == len(prev_cpu):
                    s["cpu_system_pct"] = procfs.busy_pct(prev_cpu, cpu)
                prev_cpu = cpu
                sched = _schedstat_ns(schedstat)
                if sched is not None and prev_sched is not None:
                    s["main_thread_cpu_pct"] = 100.0 * max(sched[0] - prev_sched[0], 0) / (dt * 1e9)
                    s["run_queue_wait_pct"] = 100.0 * max(sched[1] - prev_sched[1], 0) / (dt * 1e9)
                    s["main_thread_slices"] = float(max(sched[2] - prev_sched[2], 0))
                prev_sched = sched
            if hasattr(os, "getloadavg"):
                s["load_avg_1m"] = os.getloadavg()[0]
            mem = host.memory()
            if mem is not None:
                s["mem_system_used_bytes"] = mem[0] - mem[1]
                s["mem_system_total_bytes"] = mem[0]
            if not first:
                io = host.io()
                for key, cur in io.items():
                    if key in prev_io:
                        s[key] = max(cur - prev_io[key], 0.0) / dt
                prev_io, prev_t = io, now
            if nvml is not None:
                nvml.read(s)
            if rapl and not first:
                cur_uj = [_read_uj(f) for f in rapl]
                for a, b in zip(rapl_prev, cur_uj, strict=True):
                    if a is not None and b is not None and b >= a:  # counters wrap: skip a wrap interval
                        rapl_total += (b - a) / 1e6
                rapl_prev = cur_uj
                s["cpu_energy_j"] = rapl_total
            add(s)
            first = False
            if stopping:
                return


def _read_uj(f: ProcFile) -> float | None:
    try:
        return float(f.read())
    except (OSError, ValueError):
        return None


def _schedstat_ns(f: ProcFile | None) -> tuple[int, int, int] | None:
    """Cumulative ns the thread has run on a CPU and waited on a run queue, and how many times it was put on a CPU
    (the three fields of schedstat), None where unreadable."""
    if f is None:
        return None
    try:
        fields = f.read().split()
        return int(fields[0]), int(fields[1]), int(fields[2])
    except (OSError, ValueError, IndexError):
        return None


def _psutil_memory(psutil: Any) -> tuple[float, float] | None:
    try:
        vm = psutil.virtual_memory()
    except Exception:
        return None
    return float(vm.total), float(vm.available)


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
