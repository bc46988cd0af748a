"""The system sampler's Linux sources, read straight from ``/proc`` through file descriptors kept open.

Each source is one ``pread`` of a file opened once (``/proc/PID/stat`` and ``statm``, ``/proc/stat``, ``/proc/meminfo``,
``/proc/diskstats``, ``/proc/net/dev``), parsed by a pure function below: the same numbers psutil reports
(same files, same fields, same sums), without psutil's per-call ``open``/``close``, ``access`` checks and
hundreds of Python calls, which a sampler woken once a second pays with cold caches each time.
A read of a ``/proc`` file at offset 0 regenerates its contents, so a kept descriptor always reads the present.
"""

from __future__ import annotations

import os
from collections.abc import Callable

DISK_SECTOR_BYTES = 512
"""The unit of ``/proc/diskstats``' sector counts, whatever the device's own sector size (as psutil)."""


class ProcFile:
    """One file kept open and read whole from offset 0 on each :meth:`read` (one ``pread`` while it fits)."""

    def __init__(self, path: str, size: int = 16384) -> None:
        self.path = path
        self.size = size
        self.fd = os.open(path, os.O_RDONLY)

    def read(self) -> bytes:
        data = os.pread(self.fd, self.size, 0)
        while len(data) >= self.size:  # more than the buffer: read on, and read it whole at once next time
            more = os.pread(self.fd, self.size, len(data))
            data += more
            if len(more) < self.size:
                self.size = max(self.size, 2 * len(data))
                break
        return data

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1


def open_or_none(path: str, size: int = 16384) -> ProcFile | None:
    try:
        return ProcFile(path, size)
    except OSError:
        return None


def pid_stat(data: bytes) -> tuple[int, int]:
    """(user + system CPU ticks, threads) from ``/proc/PID/stat``: fields 14 + 15 and 20 (psutil's
    ``cpu_times`` user + system and ``num_threads`` read the same counters). The command name (field 2) may
    hold spaces and parentheses: fields are counted after its last ``)``."""
    f = data[data.rindex(b")") + 2:].split()
    return int(f[11]) + int(f[12]), int(f[17])


def statm_resident_pages(data: bytes) -> int:
    """Resident pages, the second field of ``/proc/PID/statm`` (psutil's ``memory_info().rss``; field 24 of
    ``/proc/PID/stat`` is summed differently and can differ by a few pages)."""
    return int(data.split()[1])


def cpu_times(data: bytes) -> tuple[int, ...]:
    """The system-wide CPU times (ticks) of ``/proc/stat``'s first line: user, nice, system, idle, iowait,
    irq, softirq, steal, guest, guest_nice (as many as the kernel reports, up to these ten)."""
    line = data[:data.index(b"\n")].split()
    if line[0] != b"cpu":
        raise ValueError("/proc/stat does not start with the cpu line")
    return tuple(int(x) for x in line[1:11])


def busy_pct(t1: tuple[float, ...], t2: tuple[float, ...]) -> float:
    """System CPU % between two :func:`cpu_times` readings, as ``psutil.cpu_percent``: per-field deltas
    clipped at 0, the total without guest and guest_nice (already counted in user and nice), busy = total
    minus idle and iowait, rounded to one decimal; 0.0 when no time passed."""
    d = [max(0.0, b - a) for a, b in zip(t1, t2, strict=True)]
    total = sum(d) - sum(d[8:10])
    busy = total - d[3] - (d[4] if len(d) > 4 else 0)
    return round(busy / total * 100, 1) if total else 0.0


def meminfo(data: bytes) -> tuple[int, int] | None:
    """(total, available) bytes from ``/proc/meminfo``'s MemTotal and MemAvailable; None where the kernel
    gives no (or a zero) MemAvailable, for which psutil estimates it (the caller asks psutil then)."""
    total = avail = 0
    for line in data.splitlines():
        if line.startswith(b"MemTotal:"):
            total = int(line.split()[1]) * 1024
        elif line.startswith(b"MemAvailable:"):
            avail = int(line.split()[1]) * 1024
            break
    return (total, avail) if total and avail else None


def disk_bytes(data: bytes, is_disk: Callable[[str], bool]) -> tuple[int, int] | None:
    """(read, written) bytes summed over the whole disks of ``/proc/diskstats`` (partitions left out, their
    disk counts them: psutil's ``disk_io_counters()``); None when no line names a disk or a line has a
    layout psutil does not read either."""
    read = written = 0
    seen = False
    for line in data.splitlines():
        f = line.split()
        n = len(f)
        if n == 15:  # Linux 2.4
            name, r, w = f[3], 5, 9
        elif n == 14 or n >= 18:  # Linux 2.6+: a disk
            name, r, w = f[2], 5, 9
        elif n == 7:  # Linux 2.6+: a partition
            name, r, w = f[2], 4, 6
        else:
            return None
        if is_disk(name.decode()):
            read += int(f[r])
            written += int(f[w])
            seen = True
    return (read * DISK_SECTOR_BYTES, written * DISK_SECTOR_BYTES) if seen else None


def net_bytes(data: bytes) -> tuple[int, int] | None:
    """(received, sent) bytes summed over every interface of ``/proc/net/dev`` (loopback included, as psutil's
    ``net_io_counters()``); None when it lists none."""
    recv = sent = 0
    lines = data.splitlines()[2:]
    for line in lines:
        f = line[line.rindex(b":") + 1:].split()
        recv += int(f[0])
        sent += int(f[8])
    return (recv, sent) if lines else None


class DiskNames:
    """Which names of ``/proc/diskstats`` are whole disks: those with a ``/sys/block`` entry (psutil's
    ``is_storage_device``), looked up once per name instead of once per name per sample."""

    def __init__(self) -> None:
        self.known: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        v = self.known.get(name)
        if v is None:
            v = self.known[name] = os.access(f"/sys/block/{name.replace('/', '!')}", os.F_OK)
        return v
