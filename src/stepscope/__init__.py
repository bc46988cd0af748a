"""stepscope: performance assessment for deep-learning training.

The public API only. `stepscope run -- python train.py` needs none of it; these refine what the
zero-code hooks measure::

    import stepscope
    with stepscope.session(name="ppo", role="learner"):
        for batch in stepscope.steps(loader):
            with stepscope.region("forward"):
                ...
            stepscope.log(loss=loss.item())

and read stored runs and traces in a notebook (docs/api.md)::

    run = stepscope.load("latest")          # a RunAnalysis with DataFrames: run.steps_df(), ...
    traces = stepscope.load_traces("traces/")
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stepscope.collect.api import log, session, step, steps, watch
    from stepscope.collect.regions import region, timed
    from stepscope.notebook import NotebookRun, TraceSet

__version__ = "0.1.0"
__all__ = ["load", "load_traces", "log", "region", "session", "step", "steps", "timed", "watch"]


def load(run: str | Path = "latest", store: str | Path | None = None, *, warmup: int | None = None) -> NotebookRun:
    """A stored run, analysed on demand, with its tables as DataFrames (stepscope.notebook.NotebookRun).

    ``run``: id, id prefix, name, ``latest`` or ``latest~N`` in ``store`` (default: the CLI's store), or
    the path of a run directory or of a store. The analysis code is imported here, on first use, so
    ``import stepscope`` stays light for the processes the zero-code hooks observe."""
    from stepscope.notebook import load as load_run

    return load_run(run, store, warmup=warmup)


def load_traces(*paths: str | Path) -> TraceSet:
    """Per-rank profiler traces (files, or folders of .json / .json.gz), each read and analysed once
    (stepscope.notebook.TraceSet)."""
    from stepscope.notebook import load_traces as load_set

    return load_set(*paths)


_API = {"log": "api", "session": "api", "step": "api", "steps": "api", "watch": "api", "region": "regions",
        "timed": "regions"}
"""The recording API, imported on first use (then a plain module attribute): `stepscope run`, the other
commands and every observed process that never calls it do not load the recorder."""


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'stepscope' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"stepscope.collect.{_API[name]}"), name)
    globals()[name] = value
    return value
