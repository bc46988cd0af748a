"""The sampler's /proc sources (collect/system/procfs.py): the parsers on kernel text written out here, and the live
readers against psutil, which the sampler used before and whose figures they must give."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from stepscope.collect.system import procfs
from stepscope.collect.system.procfs import ProcFile

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")


def test_pid_stat_counts_fields_after_the_command_name() -> None:
    # field 2, the command name, holds spaces and parentheses; utime 150 + stime 25 ticks, 7 threads
    after = ["S", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "150", "25", "0", "0", "20", "0", "7", "0",
             "100", "2000", "300"]
    data = ("4242 (we) ird (name) " + " ".join(after) + "\n").encode()
    assert procfs.pid_stat(data) == (175, 7)
    assert procfs.statm_resident_pages(b"5000 1234 300 10 0 900 0\n") == 1234


def test_busy_pct_as_psutil_computes_it() -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice (ticks)
    t1 = (100, 0, 50, 800, 50, 0, 0, 0, 0, 0)
    t2 = (160, 0, 70, 900, 70, 0, 0, 0, 0, 0)
    # total 60 + 20 + 100 + 20 = 200; busy = 200 - idle 100 - iowait 20 = 80
    assert procfs.busy_pct(t1, t2) == 40.0
    # 10 ticks of guest time, already counted in user: the total stays 200, busy 80
    assert procfs.busy_pct(t1, (160, 0, 70, 900, 70, 0, 0, 0, 10, 0)) == 40.0
    # a field going backwards counts 0, not negative: user -10 -> 0, system +20, idle +180: 20 / 200
    assert procfs.busy_pct(t1, (90, 0, 70, 980, 50, 0, 0, 0, 0, 0)) == 10.0
    assert procfs.busy_pct(t1, t1) == 0.0
    assert procfs.busy_pct((1, 2, 3, 4), (2, 2, 4, 6)) == 50.0  # an old kernel's four fields: no iowait
    assert procfs.cpu_times(b"cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 1 1 1 1 1 1 1 1 1\n") == tuple(range(1, 11))
    with pytest.raises(ValueError):
        procfs.cpu_times(b"intr 1 2 3\n")


def test_meminfo_total_and_available() -> None:
    text = b"MemTotal:       16000 kB\nMemFree:         2000 kB\nMemAvailable:    9000 kB\nBuffers: 10 kB\n"
    assert procfs.meminfo(text) == (16000 * 1024, 9000 * 1024)
    # an old kernel (or a container reporting 0): psutil estimates it, the sampler asks psutil
    assert procfs.meminfo(b"MemTotal:       16000 kB\nMemFree:         2000 kB\n") is None
    assert procfs.meminfo(text.replace(b"9000", b"0")) is None


DISKSTATS = b"""   7       0 loop0 100 0 800 5 0 0 0 0 0 10 5 0 0 0 0 0 0
   8       0 sda 4000 10 160000 900 2000 30 64000 700 0 800 1600 0 0 0 0 0 0
   8       1 sda1 3900 10 150000 880 1990 30 63000 690 0 790 1570 0 0 0 0 0 0
 259       0 nvme0n1 10 0 2 0 1 0 4 0 0 0 0
   8       2 sda2 5 20 3 4
"""


def test_disk_bytes_sums_whole_disks_in_sectors_of_512() -> None:
    disks = {"loop0", "sda", "nvme0n1"}  # sda1, sda2: partitions, counted by sda
    got = procfs.disk_bytes(DISKSTATS, disks.__contains__)
    assert got == ((800 + 160000 + 2) * 512, (0 + 64000 + 4) * 512)
    assert procfs.disk_bytes(DISKSTATS, lambda name: name == "sda2") == (20 * 512, 4 * 512)  # 7-field layout
    assert procfs.disk_bytes(DISKSTATS, lambda name: False) is None
    assert procfs.disk_bytes(b"8 0 sda 1 2 3\n", lambda name: True) is None  # a layout psutil cannot read either


def test_net_bytes_sums_every_interface() -> None:
    text = (b"Inter-|   Receive                            |  Transmit\n"
            b" face |bytes    packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls"
            b" carrier compressed\n"
            b"    lo:  5000      50    0    0    0     0          0         0     5000      50    0    0    0     0"
            b"       0          0\n"
            b"  eth0:123456   1000    0    0    0     0          0         0    65432     900    0    0    0     0"
            b"       0          0\n")
    assert procfs.net_bytes(text) == (5000 + 123456, 5000 + 65432)
    assert procfs.net_bytes(text[:text.index(b"    lo")]) is None


def test_proc_file_reads_past_its_buffer_and_rereads_the_present(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"x" * 1000)
    f = ProcFile(str(p), size=64)
    assert f.read() == b"x" * 1000
    assert f.size >= 1000  # read whole in one go from now on
    p.write_bytes(b"short")  # the same file, rewritten in place
    assert f.read() == b"short"
    f.close()


@linux
def test_proc_stat_descriptor_sees_cpu_time_move() -> None:
    f = ProcFile(f"/proc/{os.getpid()}/stat")
    before = procfs.pid_stat(f.read())[0]
    t_end = time.process_time() + 0.1
    while time.process_time() < t_end:
        pass
    after = procfs.pid_stat(f.read())[0]
    f.close()
    ticks = os.sysconf("SC_CLK_TCK")
    assert after - before >= 0.05 * ticks  # the kept descriptor reads the present, not its first read


@linux
def test_proc_host_gives_psutil_figures() -> None:
    """Read between two psutil readings, each cumulative counter lies between them; memory total and threads
    are psutil's; RSS too, within what the process allocates meanwhile."""
    psutil = pytest.importorskip("psutil")
    from stepscope.collect.system.sampler import ProcHost

    host = ProcHost(os.getpid())
    proc = psutil.Process()

    def ps() -> tuple[float, tuple[float, ...], float, dict[str, float]]:
        t = proc.cpu_times()
        d, n = psutil.disk_io_counters(), psutil.net_io_counters()
        io = {"net_recv_bps": float(n.bytes_recv), "net_sent_bps": float(n.bytes_sent)}
        if d is not None:
            io |= {"disk_read_bps": float(d.read_bytes), "disk_write_bps": float(d.write_bytes)}
        return t.user + t.system, tuple(psutil.cpu_times()), float(psutil.virtual_memory().total), io

    cpu0, sys0, total0, io0 = ps()
    mine_proc, mine_sys, mine_mem, mine_io = host.process(), host.cpu_times(), host.memory(), host.io()
    cpu1, sys1, total1, io1 = ps()
    rss, threads = float(proc.memory_info().rss), float(proc.num_threads())
    host.close()
    assert mine_proc is not None and mine_sys is not None and mine_mem is not None
    eps = 1e-6
    assert cpu0 - eps <= mine_proc[0] <= cpu1 + eps
    assert abs(mine_proc[1] - rss) <= 4 << 20 and mine_proc[2] == threads
    tick = 1.0 / os.sysconf("SC_CLK_TCK")
    assert len(mine_sys) == len(sys0)
    for a, m, b in zip(sys0, mine_sys, sys1, strict=True):
        assert a - eps <= m * tick <= b + eps
    assert mine_mem[0] == total0 == total1 and 0 < mine_mem[1] <= mine_mem[0]
    assert set(mine_io) == set(io0)
    for k, v in mine_io.items():
        assert io0[k] <= v <= io1[k], k
