"""Read a TensorFlow / JAX profile (XPlane, or the trace-viewer JSON converted from it) into an EventTable.

TensorFlow's and JAX's profilers write an XSpace protobuf (``<host>.xplane.pb``) under
``<logdir>/plugins/profile/<timestamp>/``; JAX also writes the trace-viewer JSON converted from it
(``<host>.trace.json.gz``). An XPlane alone is converted with jaxlib's own XSpace -> trace-viewer converter
(the one ``jax.profiler`` uses; TensorFlow and JAX share the XSpace format), so reading a TensorFlow profile
needs JAX installed (``pip install 'stepscope[jax]'``).

The trace-viewer JSON has no Kineto categories. Each event gets the kind the trace engine knows
(see docs/traces.md, "TensorFlow and JAX profiles"):

- events carrying ``step_num`` (``jax.profiler.StepTraceAnnotation``, ``tf.profiler.experimental.Trace(...,
  step_num=N)``; stepscope's own window names its annotations :data:`STEP_ANNOTATION` and then only those
  count) become the step annotations ``ProfilerStep#N``;
- device work: on a profile with accelerator planes (``/device:GPU:0``, ...), the events of their
  ``Stream #...`` lines (kernels; ``Memcpy*`` / ``Memset*`` names are copies / sets); the derived lines
  (``XLA Ops``, ``XLA Modules``, ``TensorFlow Ops``, ``Steps``, ...) repeat that time per op and are kept as
  device annotations, never counted twice. A device plane without stream lines (a TPU's) has its work on
  its ``XLA Ops`` line: those events are its device work. On a CPU-only profile the ops the runtime executes on its
  thread pools (events with an ``hlo_op`` argument: XLA ops; with a ``long_name``: TensorFlow op kernels)
  are the device work of device 0 (the CPU), one stream per thread, except tf.data's ``Iterator::*`` stages
  (input pipeline work, host operators); an op that contains another such op
  on its thread is a host operator instead (so no time counts twice);
- ``$file.py:N func`` events are Python functions, everything else on the host a host operator;
  zero-length ``ThreadpoolListener::*`` marks are dropped.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from stepscope.errors import TraceError
from stepscope.model.events import EventTable, TraceMeta

STEP_ANNOTATION = "stepscope.step"
"""Name of the step annotations stepscope's profiler window puts around each profiled step."""
XPLANE_SUFFIX = ".xplane.pb"
TRACE_VIEWER_SUFFIX = ".trace.json.gz"
PROFILE_SUBDIR = Path("plugins") / "profile"
_DEVICE_PLANE = re.compile(r"^/device:(GPU|TPU|XPU|[A-Z_]+):(\d+)")
_STREAM_LINE = re.compile(r"^stream\b", re.I)
_RANK_IN_NAME = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)
_CHUNK = 200_000
_OPS_LINE = "XLA Ops"
"""The per-op line of a device plane: the device work itself on a plane without stream lines (TPU)."""
_INPUT_PIPELINE = "Iterator::"
"""tf.data's pipeline stages (``Iterator::ParallelMapV2``): input work on tf.data's threads, host operators."""


def is_xla_trace(path: Path) -> bool:
    """An XPlane, or a trace-viewer JSON written by the TensorFlow/JAX profiler (not a PyTorch ``.pt.trace``)."""
    name = path.name
    if name.endswith(XPLANE_SUFFIX):
        return True
    if name.endswith((".pt.trace.json", ".pt.trace.json.gz")):
        return False
    return name.endswith((TRACE_VIEWER_SUFFIX, ".trace.json"))


def profile_files(folder: Path) -> list[Path] | None:
    """The host profiles of a TensorFlow/JAX profile folder, or None when ``folder`` is not one.

    ``folder`` is a log dir (with ``plugins/profile/<run>/``), a ``plugins/profile`` folder, or one run
    folder. Of several runs the newest (its timestamp name sorts last) is read. Per host its trace-viewer
    JSON where the profiler wrote one, else its XPlane. Raises TraceError for a profile folder without any.
    """
    runs: list[Path]
    if (folder / PROFILE_SUBDIR).is_dir():
        runs = sorted(p for p in (folder / PROFILE_SUBDIR).iterdir() if p.is_dir())
    elif folder.name == "profile" and folder.parent.name == "plugins":
        runs = sorted(p for p in folder.iterdir() if p.is_dir())
    elif any(f.name.endswith(XPLANE_SUFFIX) for f in folder.iterdir()):
        runs = [folder]
    else:
        return None
    for run in reversed(runs):
        files = _host_files(run)
        if files:
            return files
    raise TraceError(f"{folder}: a TensorFlow/JAX profile folder with no XPlane (.xplane.pb) or trace-viewer "
                     "(.trace.json.gz) files — the profiler wrote nothing (was it stopped?)")


def _host_files(run: Path) -> list[Path]:
    hosts: dict[str, Path] = {}
    for f in sorted(run.iterdir()):
        if f.name.endswith(XPLANE_SUFFIX):
            hosts.setdefault(f.name[: -len(XPLANE_SUFFIX)], f)
    for f in sorted(run.iterdir()):
        if f.name.endswith(TRACE_VIEWER_SUFFIX):
            hosts[f.name[: -len(TRACE_VIEWER_SUFFIX)]] = f  # the converted JSON wins over its XPlane
    return [hosts[k] for k in sorted(hosts)]


def xplane_to_trace_json(xplane: Path, out_dir: Path) -> Path:
    """Convert one XPlane with jaxlib's converter; returns the trace-viewer JSON written under ``out_dir``."""
    try:
        from jax._src.lib import _profiler
    except ImportError:
        raise TraceError(f"{xplane}: reading an XPlane needs JAX's converter — pip install 'stepscope[jax]' "
                         "(or open the profile in TensorBoard / XProf)") from None
    try:
        data = xplane.read_bytes()
        session = _profiler.ProfilerSession()  # an empty session: its export() converts any XSpace
        session.stop()
        session.export(data, str(out_dir))
    except Exception as exc:  # the converter's own errors (a damaged protobuf)
        raise TraceError(f"{xplane}: not a readable XPlane ({str(exc).splitlines()[0][:120]})") from None
    found = sorted(out_dir.rglob(f"*{TRACE_VIEWER_SUFFIX}"))
    if not found:
        raise TraceError(f"{xplane}: the XPlane converted to no trace-viewer JSON — the profile is empty")
    return found[-1]


def load_trace_viewer(path: Path) -> dict[str, Any]:
    """The JSON object of a trace-viewer file (gzip or plain); XPlanes are converted first."""
    if path.name.endswith(XPLANE_SUFFIX):
        import tempfile  # (with shutil, bz2, lzma: only for an XPlane)

        with tempfile.TemporaryDirectory(prefix="stepscope-xplane-") as tmp:
            return load_trace_viewer(xplane_to_trace_json(path, Path(tmp)))
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        obj = orjson.loads(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise TraceError(f"{path}: truncated or unreadable ({exc}) — re-copy or re-record the profile") from None
    except orjson.JSONDecodeError as exc:
        raise TraceError(f"{path}: invalid JSON ({str(exc).splitlines()[0]}) — the file is damaged") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("traceEvents"), list):
        raise TraceError(f"{path}: not a trace-viewer JSON — expected {{\"traceEvents\": [...]}}")
    return obj


def kineto_events(events: Sequence[Any]) -> list[dict[str, Any]]:
    """Map trace-viewer events to Kineto-shaped complete events (``cat`` and device args), by the rules in the
    module docstring. Pure."""
    procs: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    complete: list[dict[str, Any]] = []
    for e in events:
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        if ph == "M":
            name = (e.get("args") or {}).get("name")
            if e.get("name") == "process_name" and isinstance(name, str):
                procs[e.get("pid")] = name
            elif e.get("name") == "thread_name" and isinstance(name, str):
                threads[(e.get("pid"), e.get("tid"))] = name
        elif ph == "X":
            complete.append(e)
    devices = {pid: int(m.group(2)) for pid, name in procs.items() if (m := _DEVICE_PLANE.match(name))}
    with_streams = {pid for (pid, _), name in threads.items() if pid in devices and _STREAM_LINE.match(name)}
    ours = any(e.get("name") == STEP_ANNOTATION for e in complete)
    out: list[dict[str, Any]] = []
    host_ops: list[dict[str, Any]] = []
    for e in complete:
        name = str(e.get("name", ""))
        if name.startswith("ThreadpoolListener::"):
            continue
        raw_args = e.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        pid, tid = e.get("pid"), e.get("tid")
        ev = {"ph": "X", "ts": e.get("ts"), "dur": e.get("dur", 0), "pid": pid, "tid": tid, "name": name,
              "args": {}}
        if pid in devices:
            line = threads.get((pid, tid), "")
            if _STREAM_LINE.match(line) or (pid not in with_streams and line == _OPS_LINE):
                ev["cat"] = _device_cat(name)
                ev["args"] = {"device": devices[pid], "stream": _int(tid)}
            else:
                ev["cat"] = "gpu_user_annotation"
                ev["args"] = {"device": devices[pid], "stream": _int(tid)}
        elif "step_num" in args and (name == STEP_ANNOTATION or not ours) and _int(args["step_num"]) >= 0:
            ev["name"] = f"ProfilerStep#{_int(args['step_num'])}"
            ev["cat"] = "user_annotation"
        elif name.startswith("$"):
            ev["cat"] = "python_function"
        elif not devices and ("hlo_op" in args or "long_name" in args) and not name.startswith(_INPUT_PIPELINE):
            ev["cat"] = "kernel"
            ev["args"] = {"device": 0, "stream": _int(tid)}
            host_ops.append(ev)
        else:
            ev["cat"] = "cpu_op"
        out.append(ev)
    _demote_containers(host_ops)
    return out


def _device_cat(name: str) -> str:
    low = name.lower()
    if low.startswith("memcpy"):
        return "gpu_memcpy"
    if low.startswith("memset"):
        return "gpu_memset"
    return "kernel"


def _demote_containers(ops: list[dict[str, Any]]) -> None:
    """CPU-executed ops that contain another op on their thread become host operators (a function-call op
    around the ops of its body): only the innermost ops are device work, so none counts twice."""
    by_thread: dict[Any, list[dict[str, Any]]] = {}
    for ev in ops:
        by_thread.setdefault(ev["tid"], []).append(ev)
    for evs in by_thread.values():
        evs.sort(key=lambda ev: (_float(ev["ts"]), -_float(ev["dur"])))
        stack: list[dict[str, Any]] = []
        for ev in evs:
            start = _float(ev["ts"])
            while stack and _float(stack[-1]["ts"]) + _float(stack[-1]["dur"]) <= start:
                stack.pop()
            if stack:
                outer = stack[-1]
                outer["cat"], outer["args"] = "cpu_op", {}
            stack.append(ev)


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


def _float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def _chunks(events: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for i in range(0, len(events), _CHUNK):
        yield events[i:i + _CHUNK]


def read_xla_trace(path: str | Path, *, rank: int | None = None) -> EventTable:
    """Read one TensorFlow/JAX host profile (XPlane or trace-viewer JSON) as the trace engine's EventTable.

    Raises:
        TraceError: unreadable, not a profile, or (XPlane) no converter installed.
    """
    from stepscope.traces.columns import ChunkColumns, NotTraceEvents

    p = Path(path)
    if not p.is_file():
        raise TraceError(f"{p}: no such profile file — give a .xplane.pb, a .trace.json.gz or their folder")
    obj = load_trace_viewer(p)
    builder = ChunkColumns()
    try:
        for chunk in _chunks(kineto_events(obj["traceEvents"])):
            builder.add(chunk)
    except NotTraceEvents as exc:
        raise TraceError(f"{p}: not a trace-viewer profile ({exc})") from None
    m = _RANK_IN_NAME.search(p.name)
    r, source = (int(m.group(1)), "file name") if m else ((rank, "given") if rank is not None else (0, "default"))
    meta = TraceMeta(path=str(p), rank=r, rank_source=source, dropped_events=builder.dropped,
                     wrong_type_values=builder.wrong_types, cut_strings=builder.cut_strings)
    try:
        return builder.finish(meta)
    except ValueError as exc:
        raise TraceError(f"{p}: {exc}") from None


__all__ = ["STEP_ANNOTATION", "is_xla_trace", "kineto_events", "profile_files", "read_xla_trace",
           "xplane_to_trace_json"]
