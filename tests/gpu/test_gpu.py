"""stepscope's GPU figures against torch's own (tests/gpu/check_gpu.py): CUDA step events, per-step peak memory,
the memory snapshot, NVML samples, the device name, FLOPs and MFU, the profiler window's kernels. On a machine
without CUDA the GPU test skips ("no CUDA device", which the strict-skip rule of tests/conftest.py allows); the
checker's own plumbing (FLOPs by hand, MFU from --peak-flops, the window) runs on CPU everywhere."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import PY

pytestmark = pytest.mark.slow
CHECK = Path(__file__).resolve().parent / "check_gpu.py"
NO_CUDA = 3


def _check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, str(CHECK), *args], capture_output=True, text=True, timeout=1200, cwd=cwd)


@pytest.mark.gpu
def test_gpu_figures_agree_with_torch(tmp_path: Path) -> None:
    proc = _check("--keep", str(tmp_path / "work"), cwd=tmp_path)
    if proc.returncode == NO_CUDA:
        pytest.skip("no CUDA device")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "all figures agree" in proc.stdout


def test_checker_on_cpu_counts_flops_and_mfu(tmp_path: Path) -> None:
    proc = _check("--device", "cpu", "--steps", "40", "--batch", "16", "--width", "64", "--keep",
                  str(tmp_path / "work"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    rows = {line.split("  ")[0].strip(): line for line in proc.stdout.splitlines()}
    # 16 x batch x width^2: 3 forward, 3 weight-gradient and 2 input-gradient matmuls of 2 x 16 x 64 x 64 FLOPs
    assert "1.04858e+06" in rows["FLOPs per step"] and rows["FLOPs per step"].endswith("yes")
    assert rows["MFU (--peak-flops) = achieved / peak"].endswith("yes") and rows["achieved FLOP/s"].endswith("yes")
    assert rows["profiled steps"].endswith("yes")
    assert rows["device time per step"].endswith("n/a")
