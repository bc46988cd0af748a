"""What ran, where: git state, host and hardware, software versions. Every probe may fail: None then."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from stepscope.model.run import GitInfo, GpuInfo, HostInfo, SoftwareInfo

GIT_TIMEOUT_S = 10.0


def _git_all(cwd: Path, commands: dict[str, tuple[str, ...]]) -> dict[str, str | None]:
    """Each git command's stripped output (None where it failed), the commands run side by side: six git
    processes one after the other took ~0.1 s of every `stepscope run`'s start in a large work tree."""
    procs: dict[str, subprocess.Popen[str] | None] = {}
    for key, args in commands.items():
        try:
            procs[key] = subprocess.Popen(["git", *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True)
        except OSError:
            procs[key] = None
    deadline = time.monotonic() + GIT_TIMEOUT_S
    out: dict[str, str | None] = {}
    for key, proc in procs.items():  # each drained in turn: a long output only waits for its own reader
        if proc is None:
            out[key] = None
            continue
        try:
            stdout, _ = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out[key] = None
            continue
        out[key] = stdout.strip() if proc.returncode == 0 else None
    return out


def _maybe_in_work_tree(cwd: Path) -> bool:
    """False only where git certainly finds no repository (no ``.git`` in ``cwd`` or above, no GIT_DIR): no git
    process is started there."""
    if os.environ.get("GIT_DIR"):
        return True
    try:
        here = cwd.resolve()
    except OSError:
        return True
    return any((d / ".git").exists() for d in (here, *here.parents))


def git_info(cwd: Path) -> GitInfo | None:
    """HEAD of the work tree containing ``cwd``; None outside a work tree or before the first commit."""
    if not _maybe_in_work_tree(cwd):
        return None
    g = _git_all(cwd, {
        "commit": ("rev-parse", "HEAD"),
        "branch": ("symbolic-ref", "--quiet", "--short", "HEAD"),  # None on a detached HEAD
        "status": ("status", "--porcelain", "--untracked-files=no"),
        "show": ("show", "-s", "--format=%ct%x00%s", "HEAD"),
        "shallow": ("rev-parse", "--is-shallow-repository"),
        "describe": ("describe", "--tags", "--always", "--dirty"),
    })
    commit = g["commit"]
    if not commit:
        return None
    ct, _, subject = (g["show"] or "").partition("\x00")
    return GitInfo(commit=commit, branch=g["branch"], dirty=bool(g["status"]),
                   commit_time_s=float(ct) if ct else None, subject=subject or None, shallow=g["shallow"] == "true",
                   describe=g["describe"])


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


NVIDIA_DRIVER_PATHS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/dxg")
"""On Linux, NVML can answer only where one of these exists (the driver; /dev/dxg: WSL 2's GPU)."""


def nvml_gpus() -> tuple[GpuInfo, ...]:
    """GPUs through NVML; () where NVML is not installed or no driver is loaded."""
    if sys.platform.startswith("linux") and not any(os.path.exists(p) for p in NVIDIA_DRIVER_PATHS):
        return ()  # no driver: nvmlInit would fail, after tens of ms importing pynvml
    try:
        import pynvml
    except ImportError:
        return ()
    try:
        pynvml.nvmlInit()
    except Exception:
        return ()
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            out.append(GpuInfo(index=i, name=name.decode() if isinstance(name, bytes) else name,
                               memory_bytes=int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                               driver=driver.decode() if isinstance(driver, bytes) else driver,
                               uuid=str(pynvml.nvmlDeviceGetUUID(h)), compute_capability=f"{major}.{minor}"))
        return tuple(out)
    except Exception:
        return ()
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def linux_cpu_memory() -> tuple[int, int, int] | None:
    """(physical cores, logical CPUs, memory bytes) read as psutil reads them on Linux (its first method for the
    cores: distinct ``core_cpus_list`` / ``thread_siblings_list``), without importing psutil (tens of ms of
    every `stepscope run`); None where that way does not apply (psutil then answers)."""
    if not sys.platform.startswith("linux"):
        return None
    import glob

    try:
        logical = os.sysconf("SC_NPROCESSORS_ONLN")
        cores = set()
        for path in (glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology/core_cpus_list")
                     or glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list")):
            with open(path, "rb") as f:
                cores.add(f.read().strip())
        with open("/proc/meminfo", "rb") as f:
            total = next(int(line.split()[1]) * 1024 for line in f if line.startswith(b"MemTotal:"))
    except (OSError, ValueError, StopIteration, IndexError):
        return None
    if not cores or logical < 1:
        return None
    return len(cores), logical, total


def host_info() -> HostInfo:
    counts = linux_cpu_memory()
    if counts is not None:
        physical, logical, memory = counts
    else:
        import psutil

        physical, logical = psutil.cpu_count(logical=False), psutil.cpu_count(logical=True)
        memory = int(psutil.virtual_memory().total)
    return HostInfo(hostname=platform.node(), os=f"{platform.system()} {platform.release()}",
                    cpu_model=_cpu_model(), cpu_cores_physical=physical, cpu_cores_logical=logical,
                    memory_bytes=memory, gpus=nvml_gpus())


def _version(dist: str) -> str | None:
    import importlib.metadata  # (here: tens of ms to import, and most users of this module never ask)

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _metadata_name(folder: str) -> str | None:
    """The normalised distribution name of a ``NAME[-VERSION].dist-info`` / ``.egg-info`` folder name, as
    importlib.metadata's lookup reads it; None for any other name."""
    low = folder.lower()
    if not low.endswith((".dist-info", ".egg-info")):
        return None
    return low.rpartition(".")[0].partition("-")[0].replace("-", "_").replace(".", "_")


def own_version() -> str:
    """stepscope's installed version as ``importlib.metadata.version`` gives it ("dev" where none is installed):
    the Version of the first ``sys.path`` folder holding stepscope's metadata, importlib.metadata's own order,
    read without importing importlib.metadata (tens of ms of every `stepscope run` and observed process).
    Anything else than one plain metadata folder (a zip on sys.path, an egg, two candidates) asks it."""
    for entry in sys.path:
        folder = entry or "."
        try:
            names = os.listdir(folder)
        except OSError:
            if os.path.isfile(folder):  # a zip: importlib.metadata reads those
                return _version("stepscope") or "dev"
            continue
        found = [n for n in names if _metadata_name(n) == "stepscope"]
        if not found:
            if any(n.lower().startswith("stepscope") and n.lower().endswith(".egg") for n in names):
                return _version("stepscope") or "dev"
            continue
        if len(found) > 1:
            return _version("stepscope") or "dev"
        meta = os.path.join(folder, found[0], "METADATA" if found[0].lower().endswith(".dist-info") else "PKG-INFO")
        try:
            with open(meta, encoding="utf-8") as f:
                for line in f:
                    if line.startswith("Version:"):
                        return line.partition(":")[2].strip()
                    if not line.strip():
                        break  # the headers end at the first blank line
        except OSError:
            pass
        return _version("stepscope") or "dev"
    return "dev"


def software_info() -> SoftwareInfo:
    """Versions of what this process imported: torch (and CUDA / cuDNN / NCCL) only where torch is already
    imported (never imports it, and never reports a torch that is merely installed: a Keras or JAX run, or
    the launcher, records none)."""
    torch = sys.modules.get("torch")
    cuda = cudnn = nccl = None
    if torch is not None:
        try:
            cuda = torch.version.cuda or getattr(torch.version, "hip", None)
            if torch.backends.cudnn.is_available():
                cudnn = str(torch.backends.cudnn.version())
            if torch.cuda.is_available() and hasattr(torch.cuda, "nccl"):
                v = torch.cuda.nccl.version()
                nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:
            pass
    return SoftwareInfo(python=platform.python_version(), stepscope=own_version(),
                        torch=getattr(torch, "__version__", None) if torch else None,
                        cuda=cuda, cudnn=cudnn, nccl=nccl, platform=platform.platform())


def gpus_from_torch() -> tuple[GpuInfo, ...]:
    """GPUs visible to this process through an imported torch (no CUDA init if torch never used it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return ()
    try:
        if not torch.cuda.is_available():
            return ()
        out = []
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            out.append(GpuInfo(index=i, name=p.name, memory_bytes=int(p.total_memory),
                               compute_capability=f"{p.major}.{p.minor}"))
        return tuple(out)
    except Exception:
        return ()


def command_line() -> tuple[str, ...]:
    return tuple(sys.orig_argv) if hasattr(sys, "orig_argv") else (sys.executable, *sys.argv)


def hostname() -> str:
    return os.uname().nodename


CODE_MAX_FILES = 500
CODE_MAX_BYTES = 4 << 20


def code_hashes(cwd: Path | None = None) -> dict[str, str]:
    """Content hashes (sha256, first 16 hex digits) of the main script and of every Python file imported from
    the working directory (paths relative to it), so that two runs can be told to run the same code without git.
    Files of installed packages, of virtual environments and of stepscope itself are left out; at most
    CODE_MAX_FILES files of CODE_MAX_BYTES each. Never raises: a file that cannot be read is skipped."""
    import hashlib

    root = (cwd or Path.cwd()).resolve()
    own = Path(__file__).resolve().parents[2]
    files: set[Path] = set()
    main = sys.modules.get("__main__")
    candidates = [getattr(main, "__file__", None), *(getattr(m, "__file__", None) for m in list(sys.modules.values()))]
    for f in candidates:
        if not f or not str(f).endswith(".py"):
            continue
        try:
            p = Path(f).resolve()
            rel = p.relative_to(root)
        except (OSError, ValueError):
            continue
        if own in p.parents or any(part in ("site-packages", "dist-packages") or part.startswith(".") for part in
                                   rel.parts[:-1]):
            continue
        files.add(p)
    out: dict[str, str] = {}
    for p in sorted(files)[:CODE_MAX_FILES]:
        try:
            if p.stat().st_size > CODE_MAX_BYTES:
                continue
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
        except OSError:
            continue
    return out
