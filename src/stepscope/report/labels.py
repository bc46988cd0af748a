"""Labels shared by the terminal and HTML reports: what software a run used."""

from __future__ import annotations

from stepscope.analyze.run.summary import RunSummary

FRAMEWORK_VERSIONS = ("tensorflow", "keras", "jax")
"""Versions the ``framework`` record carries, named on the software line after torch."""


def software_line(s: RunSummary, *, libraries: bool = False) -> str:
    """"python 3.11.7, tensorflow 2.21.0, keras 3.15.1, stepscope 0.1.0": the frameworks the run's processes used
    (torch only where one imported it, with CUDA; ``libraries``: cuDNN and NCCL too), never one merely installed."""
    r = s.run
    parts = [f"python {r.software.python}"]
    torch = next((st.software for st in r.streams if st.software and st.software.torch), None)
    if torch is not None:
        parts.append(f"torch {torch.torch}")
        extras = (("CUDA", torch.cuda), ("cuDNN", torch.cudnn), ("NCCL", torch.nccl)) if libraries else \
            (("CUDA", torch.cuda),)
        parts += [f"{name} {v}" for name, v in extras if v]
    fw = s.framework or {}
    parts += [f"{k} {fw[k]}" for k in FRAMEWORK_VERSIONS if fw.get(k)]
    parts.append(f"stepscope {r.software.stepscope}")
    return ", ".join(parts)
