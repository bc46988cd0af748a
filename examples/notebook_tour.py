"""A tour of the notebook API, cell by cell (``# %%`` cells open as a notebook in VS Code and Jupytext).

    python examples/notebook_tour.py [RUN] [--store DIR] [--traces DIR]

Loads a stored run (default: the latest in ./.stepscope or STEPSCOPE_HOME) and, with --traces, a folder of
per-rank profiler traces; builds every DataFrame and prints what it found as one JSON document (what a
notebook would display), so the figures can be checked against `stepscope show --json` and
`stepscope trace analyze --json`. Needs pandas: pip install 'stepscope[pandas]'.
"""

# %%
from __future__ import annotations

import argparse
import json
from typing import Any

import stepscope

p = argparse.ArgumentParser()
p.add_argument("run", nargs="?", default="latest")
p.add_argument("--store", default=None)
p.add_argument("--traces", default=None)
args = p.parse_args()
found: dict[str, Any] = {}

# %% [markdown]
# ## A stored run: one object, loaded once; in Jupyter `run` alone shows the headline and the top advice

# %%
run = stepscope.load(args.run, store=args.store)
found["run_id"] = run.data.run.id
found["tables"] = run.table_names()

# %% Steps: phase decoded ("train" / "validation"), times as ns and UTC datetimes, durations in ns and s
steps = run.steps_df()
found["steps"] = len(steps)
found["phases"] = sorted(steps["phase"].unique())
found["first_step_ns"] = int(steps["duration_ns"].iloc[0])
found["slowest_step_s"] = float(steps["duration_s"].max())
found["step_durations_ns"] = [int(v) for v in steps["duration_ns"]]

# %% Regions (every instance), their statistics, and the values logged with stepscope.log
regions = run.regions_df()
found["region_totals_ns"] = {str(k): int(v) for k, v in regions.groupby("path")["duration_ns"].sum().items()}
found["region_p50_ns"] = dict(zip(run.region_stats_df()["path"], run.region_stats_df()["p50_ns"], strict=True))
metrics = run.metrics_df()
found["metric_names"] = sorted(metrics["name"].unique())
found["last_loss"] = float(metrics[metrics["name"] == "loss"]["value"].iloc[-1]) if len(metrics) else None

# %% System samples and per-rank figures
samples = run.samples_df()
found["rss_peak_bytes"] = float(samples["rss_bytes"].max())
found["step_time_p50_ns"] = float(run.ranks_df()["step_time_p50_ns"].iloc[0])
found["comm_calls"] = len(run.comm_df())

# %% The profiled window: operators (self and total time), modules, kernels, GPU breakdowns, raw events
ops = run.operators_df().sort_values("cpu_self_ns", ascending=False)
found["operator_calls"] = dict(zip(ops["name"], ops["calls"].astype(int), strict=True))
found["modules"] = list(run.modules_df()["path"])
found["gpu_tables_rows"] = {n: len(run.df(n)) for n in ("kernels", "components", "temporal", "idle", "overlap")}
if run.traces.tables:
    events = run.events_df(min(run.traces.tables))
    found["events"] = len(events)
    found["addmm_events"] = int(((events["name"] == "aten::addmm") & (events["kind"] == "cpu_op")).sum())

# %% Advice, as a table (the inline view shows the top three)
found["advice"] = list(run.advice_df()["rule_id"])

# %% [markdown]
# ## A trace set: per-rank Kineto traces, analysed by the trace engine (`stepscope trace analyze`)

# %%
if args.traces:
    traces = stepscope.load_traces(args.traces)
    temporal = traces.temporal_df().set_index("rank")
    kernels = traces.kernels_df()
    top = kernels.sort_values("sum_ns", ascending=False).groupby("rank").head(1)
    found["traces"] = {
        "ranks": traces.ranks,
        "idle_pct": {int(r): float(v) for r, v in temporal["idle_pct"].items()},
        "window_ns": {int(r): int(v) for r, v in temporal["window_ns"].items()},
        "top_kernel": {int(r): str(k) for r, k in zip(top["rank"], top["key"], strict=True)},
        "kernel_count": {int(r): int(n) for r, n in kernels.groupby("rank")["count"].sum().items()},
        "host_wait_ns": {int(r): int(v) for r, v in traces.idle_df().groupby("rank")["host_wait_ns"].sum().items()},
        "exposed_comm_ns": {int(r): int(v) for r, v in zip(traces.overlap_df()["rank"],
                                                           traces.overlap_df()["exposed_ns"], strict=True)},
        "events": {r: len(traces.events_df(r)) for r in traces.ranks},
    }

# %%
print(json.dumps(found, indent=2, sort_keys=True, default=str))
