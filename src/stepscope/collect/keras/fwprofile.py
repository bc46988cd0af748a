"""The profiler window of `stepscope run --profile-steps N` for TensorFlow / Keras and JAX runs.

The same placement as the torch.profiler window (collect/torch/window.py: ``--profile-skip``, the automatic skip
past the warm-up, ``--profile-wait``, ``--profile-warmup``), driven from the same step boundaries, but with
the framework's own profiler: ``tf.profiler.experimental.start/stop`` where the run uses TensorFlow (Keras
on the TensorFlow backend, custom ``GradientTape`` loops), ``jax.profiler.start_trace/stop_trace`` where
it uses JAX (the stepscope API, Keras on the JAX backend). The profiler starts at the boundary where the
first warm-up step begins and stops at the boundary after the last kept step; each kept step is wrapped in
a step annotation named ``stepscope.step`` with its stepscope step index (``step_num``), which the trace
reader (traces/xla.py) turns into ``ProfilerStep#N``. Warm-up steps are in the profile but not marked as
steps (these profilers cannot discard them).

The profile (an XPlane, ``<host>.xplane.pb``) is written under
``artifacts/traces/rank<R>.profile/plugins/profile/<timestamp>/``; its trace-viewer JSON (JAX writes one
itself; a TensorFlow XPlane is converted with jaxlib's converter where JAX is installed) is copied to
``artifacts/traces/rank<R>.trace.json.gz``, the file `show --traces`, `report`, `advise` and `trace analyze`
read. Without JAX a TensorFlow profile stays an XPlane (a note says so) and is read where JAX is installed.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

from stepscope.collect.core.session import Session
from stepscope.collect.core.warmup import MAX_AUTO_WARMUP, auto_skip, batches_per_epoch
from stepscope.store.rundir import ARTIFACTS

STEP_ANNOTATION = "stepscope.step"
"""traces.xla.STEP_ANNOTATION (collect may not import traces; a test keeps the two equal)."""
XPLANE_SUFFIX = ".xplane.pb"
TRACE_VIEWER_SUFFIX = ".trace.json.gz"


def profile_dir(run_dir: Path, rank: int) -> Path:
    return run_dir / ARTIFACTS / "traces" / f"rank{rank}.profile"


def trace_path(run_dir: Path, rank: int) -> Path:
    return run_dir / ARTIFACTS / "traces" / f"rank{rank}{TRACE_VIEWER_SUFFIX}"


def choose_framework(step_source: str | None = None) -> str | None:
    """The framework the steps run on: ``jax`` on Keras' JAX backend, or where the stepscope API marks the
    steps and JAX has run (a JAX loop that uses tf.data imports TensorFlow too; TensorFlow imports Keras, which
    imports JAX without running it); ``tensorflow`` where
    Keras (TensorFlow backend) or TensorFlow marks them or TensorFlow is imported; ``jax`` where only JAX is;
    None on Keras' PyTorch backend or without either. Reads only already imported modules."""
    keras = sys.modules.get("keras")
    backend = None
    if keras is not None:
        try:
            backend = keras.backend.backend()
        except Exception:
            backend = None
    has_jax, has_tf = "jax" in sys.modules, "tensorflow" in sys.modules
    if backend == "jax" or (step_source == "api" and _jax_used()):
        return "jax"
    if has_tf and backend in (None, "tensorflow"):
        return "tensorflow"
    if has_jax and backend is None:
        return "jax"
    return None


def _jax_used() -> bool:
    """JAX has initialised a backend (a JAX array was made): not only imported, as Keras imports it."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    try:
        return bool(bridge is not None and bridge._backends)
    except Exception:
        return False


class _Profiler:
    """start/stop and a per-step annotation of one framework's profiler."""

    def __init__(self, framework: str) -> None:
        self.framework = framework
        if framework == "jax":
            import jax

            self.mod: Any = jax
        else:
            import tensorflow as tf

            self.mod = tf

    def start(self, logdir: Path) -> None:
        if self.framework == "jax":
            self.mod.profiler.start_trace(str(logdir))
        else:
            self.mod.profiler.experimental.start(str(logdir))

    def stop(self) -> None:
        if self.framework == "jax":
            self.mod.profiler.stop_trace()
        else:
            self.mod.profiler.experimental.stop()

    def annotation(self, step: int) -> Any:
        if self.framework == "jax":
            return self.mod.profiler.StepTraceAnnotation(STEP_ANNOTATION, step_num=step)
        return self.mod.profiler.experimental.Trace(STEP_ANNOTATION, step_num=step, _r=1)


class FrameworkWindow:
    """Drives a TensorFlow or JAX profiler from step boundaries (Session.extras)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.profiler: _Profiler | None = None
        self.running = False
        self.done = False
        self.annotation: Any = None
        o = session.options
        skip = o.profile_skip if o.profile_skip >= 0 else MAX_AUTO_WARMUP
        self._plan(skip)
        self._auto = o.profile_skip < 0
        self.started_at: float | None = None

    def _plan(self, skip: int) -> None:
        o = self.session.options
        self.traced_first = skip + o.profile_wait
        self.first = self.traced_first + o.profile_warmup
        self.last = self.first + o.profile_steps - 1

    def on_step(self) -> None:
        """After a training step boundary: ``n`` steps have ended, step ``n`` begins."""
        if self.done:
            return
        n = self.session.step_index
        if not self.running:
            if self._auto:

                self._auto = False
                self._plan(auto_skip(batches_per_epoch()))
            if n < self.traced_first:
                return
            if n > self.traced_first:  # the first boundary came after the planned start: shift the window
                self._plan(n - self.session.options.profile_wait)
            self._start()
        self._end_annotation()
        if n > self.last:
            t0 = time.perf_counter()
            self._stop_and_save(n)
            self.session.record("profile_boundary", carried_step=n, boundary_s=time.perf_counter() - t0)
            return
        if n >= self.first and self.profiler is not None:
            self.annotation = self.profiler.annotation(n)
            self.annotation.__enter__()

    def _start(self) -> None:
        framework = choose_framework(self.session.step_source)
        if framework is None or getattr(self.session, "_profile_window", None) == "torch":
            self.done = True
            return
        self.profiler = _Profiler(framework)
        logdir = profile_dir(self.session.run_dir, self._rank())
        logdir.mkdir(parents=True, exist_ok=True)
        self.profiler.start(logdir)
        self.running = True

    def _rank(self) -> int:
        stream = self.session.stream
        return stream.rank if stream else 0

    def _end_annotation(self) -> None:
        if self.annotation is not None:
            ann, self.annotation = self.annotation, None
            ann.__exit__(None, None, None)

    def _stop_and_save(self, carried: int | None) -> None:
        self.done = True
        if not self.running or self.profiler is None:
            return
        self.running = False
        t0 = time.perf_counter()
        self.profiler.stop()
        stop_s = time.perf_counter() - t0
        rank = self._rank()
        run_dir = self.session.run_dir
        trace, note = _trace_viewer(profile_dir(run_dir, rank), trace_path(run_dir, rank))
        if note:
            self.session.warn_once("profile-convert", note)
        self.session.record(
            "profile_window", first_step=self.first, last_step=min(self.last, self.session.step_index - 1),
            carried_step=carried, traced_first_step=self.traced_first, profiler_step_offset=0,
            trace=str(trace.relative_to(run_dir)) if trace is not None else None,
            profile_dir=str(profile_dir(run_dir, rank).relative_to(run_dir)),
            framework=self.profiler.framework, export_s=time.perf_counter() - t0, stop_s=stop_s, activities=[])

    def close(self) -> None:
        """At exit inside the window: stop the profiler and keep what it recorded."""
        if self.done:
            return
        n = self.session.step_index
        if self.running:
            self.session.warn_once("profile-window", f"the run ended after {n} steps, before its profiler window "
                                   f"(steps {self.first}-{self.last}) was complete: the profile covers "
                                   f"{max(0, n - self.first)} of {self.last - self.first + 1} steps; choose an "
                                   "earlier window with --profile-skip")
            # the open annotation is of a step that never ended (it began at the last boundary): not exited, so
            # not recorded; held until the profiler has stopped (its destructor would record it)
            unfinished, self.annotation = self.annotation, None
            self._stop_and_save(None)
            del unfinished
        else:
            self.session.warn_once("profile-window", f"the run ended after {n} steps, before its profiler window "
                                   f"(steps {self.first}-{self.last}) began: no profile; choose an earlier window "
                                   "with --profile-skip")
        self.done = True


def _trace_viewer(logdir: Path, dest: Path) -> tuple[Path | None, str | None]:
    """Copy (JAX) or convert (a TensorFlow XPlane, with jaxlib) the newest host profile under ``logdir`` to
    ``dest``. Returns the trace and a note where there is none."""
    runs = sorted(p for p in (logdir / "plugins" / "profile").glob("*") if p.is_dir())
    if not runs:
        return None, f"the profiler wrote nothing under {logdir}"
    run = runs[-1]
    found = sorted(run.glob(f"*{TRACE_VIEWER_SUFFIX}"))
    if found:
        shutil.copyfile(found[0], dest)
        return dest, None
    xplanes = sorted(run.glob(f"*{XPLANE_SUFFIX}"))
    if not xplanes:
        return None, f"the profiler wrote no XPlane under {run}"
    try:
        from jax._src.lib import _profiler
    except ImportError:
        return None, (f"the TensorFlow profile {xplanes[0]} is kept as an XPlane: converting it for the trace "
                      "engine needs JAX (pip install 'stepscope[jax]', then `stepscope trace analyze` its folder)")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="stepscope-xplane-") as tmp:
        session = _profiler.ProfilerSession()  # an empty session: its export() converts any XSpace
        session.stop()
        session.export(xplanes[0].read_bytes(), tmp)
        converted = sorted(Path(tmp).rglob(f"*{TRACE_VIEWER_SUFFIX}"))
        if not converted:
            return None, f"the XPlane {xplanes[0]} converted to no trace"
        shutil.copyfile(converted[0], dest)
    return dest, None


def install_framework_window(session: Session) -> None:
    """TensorFlow / Keras and JAX runs: the framework's own profiler, once per session and never beside
    torch.profiler's window (window.install_window marks the session first where torch is profiled)."""
    if session.options.profile_steps <= 0 or getattr(session, "_profile_window", None) is not None:
        return
    session._profile_window = "framework"  # type: ignore[attr-defined]
    window = FrameworkWindow(session)
    session.extras.append(window.on_step)
    session.closers.append(window.close)
