"""PyTorch Lightning: a callback that marks steps with the Trainer's own hooks, and a profiler.

    from stepscope.integrations.lightning import StepscopeCallback, StepscopeProfiler
    trainer = L.Trainer(callbacks=[StepscopeCallback(profile_steps=5)], profiler=StepscopeProfiler())

``StepscopeCallback`` makes one training batch one step (``on_train_batch_end``; with gradient
accumulation a step is a micro-batch, as Lightning's ``batch_idx`` counts), one validation batch one
validation step, and records epochs, samples (and tokens where the batch carries ``input_ids``), the
loss returned by ``training_step``, the learning rate, the Trainer's logged metrics at the end of each
validation and training epoch, the model summary and a Lightning record (strategy, precision, ...).
Data wait comes from stepscope's DataLoader hook. The sanity check is not counted, and validation time
is kept out of the training step around it.

Under `stepscope run` the callback joins the process's session (each process Lightning starts for
DDP is a rank stream of the same run) and takes step marking over from the optimizer hook, so no step
is counted twice. Without `stepscope run` it creates a run in the store (``store``, else
``STEPSCOPE_HOME``, else ./.stepscope) at ``setup`` and ends it at ``teardown``; under a multi-process
strategy rank 0 creates it and the other ranks join it through the strategy's broadcast.

Losses are tensors: reading them each step would synchronise CUDA, so they are read in batches of
``METRIC_BATCH`` steps (long finished by then). Lightning cannot register a string profiler name, so
``profiler="stepscope"`` is not possible: pass ``profiler=StepscopeProfiler()``; it records Lightning's
own profiled actions (``[Strategy]...training_step``, ``...backward``, hooks) as stepscope regions.
Works with ``lightning.pytorch``, and with the older ``pytorch_lightning`` package when that is the
one installed.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

try:
    import lightning.pytorch as pl
    from lightning.pytorch.profilers import Profiler as _Profiler
except ImportError:  # the older package name
    try:
        import pytorch_lightning as pl  # type: ignore[no-redef]
        from pytorch_lightning.profilers import Profiler as _Profiler  # type: ignore[assignment]
    except ImportError:
        raise ImportError("stepscope.integrations.lightning needs Lightning — pip install 'stepscope[lightning]'") \
            from None

from stepscope.collect.core.batch import batch_size, batch_tokens
from stepscope.collect.core.pystate import StepState
from stepscope.collect.core.session import Session, current
from stepscope.integrations.runs import CallbackRun, open_run
from stepscope.model.tables import Phase

SOURCE = "lightning"
METRIC_BATCH = 32
"""Step losses are converted to floats this many at a time (no per-step CUDA synchronisation)."""
_perf = time.perf_counter_ns


def _scalar(v: Any) -> float | None:
    try:
        if hasattr(v, "numel") and v.numel() != 1:
            return None
        return float(v.item() if hasattr(v, "item") else v)
    except (TypeError, ValueError, RuntimeError):
        return None


class _Metrics:
    """Pending step metrics (detached tensors) and the last value logged per name (no duplicates)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.pending: list[tuple[str, Any, int]] = []
        self.last: dict[str, tuple[int, float]] = {}

    def add(self, name: str, value: Any, step: int) -> None:
        self.pending.append((name, value.detach() if hasattr(value, "detach") else value, step))
        if len(self.pending) >= METRIC_BATCH:
            self.flush()

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        for name, value, step in pending:
            self.put(name, value, step)

    def put(self, name: str, value: Any, step: int) -> None:
        v = _scalar(value)
        if v is None or self.last.get(name) == (step, v):
            return
        self.last[name] = (step, v)
        self.session.log_metric(name, v, step)


class StepscopeCallback(pl.Callback):
    """Observe a Lightning Trainer (see the module docstring).

    Args:
        profile_steps: record a torch.profiler window of this many training steps (after the
            ``--profile-skip`` / wait / warm-up steps) unless `stepscope run --profile-steps` set one.
        name, params, tags, store: the run's name, parameters, tags and store when the callback
            creates the run itself (ignored under `stepscope run`); the LightningModule's
            ``hparams`` are added to the parameters.
        log_metrics: record the loss, learning rate and the Trainer's logged metrics.
    """

    def __init__(self, profile_steps: int = 0, *, name: str | None = None, params: dict[str, Any] | None = None,
                 tags: dict[str, Any] | None = None, store: str | Path | None = None, log_metrics: bool = True) -> None:
        super().__init__()
        if profile_steps < 0:
            raise ValueError(f"profile_steps={profile_steps}: must be 0 (off) or positive")
        self.profile_steps = profile_steps
        self.name, self.params, self.tags = name, dict(params or {}), dict(tags or {})
        self.store = None if store is None else str(store)
        self.log_metrics = log_metrics
        self.session: Session | None = None
        self._run: CallbackRun | None = None
        self._metrics: _Metrics | None = None
        self._saved: StepState | None = None
        self._samples: tuple[float | None, float | None] = (None, None)

    # -- run lifecycle ------------------------------------------------------------------------------
    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self.session is not None:
            return
        try:
            s = self._join_or_create(trainer, pl_module)
            if s is None:
                return
            self.session = s
            s.set_step_source(SOURCE)
            s.activate()
            self._metrics = _Metrics(s)
            self._describe(trainer, pl_module, s)
            self._arm_window(s)
        except Exception as e:
            self._warn("setup", e)

    def _join_or_create(self, trainer: Any, pl_module: Any) -> Session | None:
        self._run = open_run(name=self.name, params={**_hparams(pl_module), **self.params}, tags=self.tags,
                             store=self.store, world_size=trainer.world_size, rank=trainer.global_rank,
                             broadcast=lambda obj: trainer.strategy.broadcast(obj, src=0))
        return self._run.session

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._end(trainer, None)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._end(trainer, exception)

    def _end(self, trainer: Any, exc: BaseException | None) -> None:
        s, self.session = self.session, None
        run, self._run = self._run, None
        if s is None or run is None:
            return
        try:
            if self._metrics is not None:
                self._metrics.flush()
                self._log_trainer_metrics(trainer, s)
            s.flush()
            if run.joined:
                run.end(exc)  # a joining rank ends its stream before rank 0 ends the run
            if (run.joined or run.owned is not None) and trainer.world_size > 1 and exc is None:
                trainer.strategy.barrier("stepscope-end")
            run.end(exc)
        except Exception as e:
            self._warn("teardown", e)

    def _describe(self, trainer: Any, pl_module: Any, s: Session) -> None:
        from stepscope.collect.torch.hooks import watch_model

        watch_model(pl_module)
        s.record("lightning", version=getattr(pl, "__version__", None), strategy=type(trainer.strategy).__name__,
                 precision=str(trainer.precision), world_size=trainer.world_size, global_rank=trainer.global_rank,
                 num_devices=trainer.num_devices, num_nodes=trainer.num_nodes,
                 accumulate_grad_batches=trainer.accumulate_grad_batches, max_epochs=trainer.max_epochs,
                 max_steps=trainer.max_steps, module=type(pl_module).__name__, hparams=_hparams(pl_module))

    def _arm_window(self, s: Session) -> None:
        if self.profile_steps <= 0 or s.options.profile_steps > 0:
            return
        from stepscope.collect.torch.window import AUTO_SKIP, install_window

        skip = s.options.profile_skip if s.options.profile_skip > 0 else AUTO_SKIP  # after the warm-up
        s.options = replace(s.options, profile_steps=self.profile_steps, profile_skip=skip)
        install_window(s)

    # -- training -----------------------------------------------------------------------------------
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        s = self.session
        if s is not None:  # step 0 starts at the first batch fetch, not at set-up or the sanity check
            s.step = StepState(None, trainer.current_epoch)

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        s = self.session
        if s is not None:
            s.epoch = trainer.current_epoch
            s.step.epoch = s.epoch

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self.session is not None:
            self._samples = (batch_size(batch), batch_tokens(batch))

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        s = self.session
        if s is None:
            return
        t = _perf()
        try:
            self._fill_step(s, trainer.current_epoch)
            s.mark_step(t, source=SOURCE)
            if self.log_metrics and self._metrics is not None:
                step = s.step_index - 1
                loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
                if loss is not None:
                    self._metrics.add("loss", loss, step)
                if trainer.optimizers:
                    self._metrics.put("lr", trainer.optimizers[0].param_groups[0].get("lr"), step)
        except Exception as e:
            self._warn("train-batch", e)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        s = self.session
        if s is not None and self._metrics is not None:
            try:
                self._metrics.flush()
                self._log_trainer_metrics(trainer, s)
            except Exception as e:
                self._warn("train-epoch-end", e)

    def _fill_step(self, s: Session, epoch: int) -> None:
        st = s.step
        st.epoch = epoch
        samples, tokens = self._samples
        if samples:
            st.samples, st.fetched = samples, True
        if tokens:
            st.tokens = tokens

    # -- validation ---------------------------------------------------------------------------------
    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        s = self.session
        if s is not None and not trainer.sanity_checking:
            self._saved, s.step = s.step, StepState(_perf(), s.epoch)

    def on_validation_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                                  dataloader_idx: int = 0) -> None:
        if self.session is not None:
            self._samples = (batch_size(batch), batch_tokens(batch))

    def on_validation_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int,
                                dataloader_idx: int = 0) -> None:
        s = self.session
        if s is None or trainer.sanity_checking:
            return
        t = _perf()
        try:
            self._fill_step(s, trainer.current_epoch)
            s.mark_step(t, source=SOURCE, phase=Phase.VALIDATION)
        except Exception as e:
            self._warn("validation-batch", e)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        s = self.session
        if s is None or trainer.sanity_checking:
            return
        saved, self._saved = self._saved, None
        if saved is not None:  # the training step resumes now: validation time is not in it
            saved.start = _perf() if saved.start is not None else None
            saved.cpu0, saved.pcpu0 = time.thread_time_ns(), time.process_time_ns()  # nor its CPU time
            s.step = saved
        try:
            self._log_trainer_metrics(trainer, s)
        except Exception as e:
            self._warn("validation-end", e)

    def on_sanity_check_end(self, trainer: Any, pl_module: Any) -> None:
        s = self.session
        if s is not None:
            s.step = StepState(None, s.epoch)

    def _log_trainer_metrics(self, trainer: Any, s: Session) -> None:
        if not self.log_metrics or self._metrics is None:
            return
        step = max(s.step_index - 1, 0)
        for name, value in dict(trainer.callback_metrics).items():
            self._metrics.put(str(name), value, step)

    def _warn(self, where: str, e: Exception) -> None:
        s = self.session or current()
        if s is not None:
            s.warn_once(f"lightning:{where}", f"the Lightning callback failed in {where} ({e})")


class StepscopeProfiler(_Profiler):
    """Lightning profiler that records each profiled action (``[Strategy]...training_step``, ...) as a
    stepscope region of that name (count, total, mean, p50, p95 in the run's region table). Records only
    inside an observed process (`stepscope run`, or with ``StepscopeCallback`` in the callbacks)."""

    def __init__(self) -> None:
        super().__init__(dirpath=None, filename=None)
        self._open: dict[str, list[int]] = {}

    def start(self, action_name: str) -> None:
        self._open.setdefault(action_name, []).append(_perf())

    def stop(self, action_name: str) -> None:
        t1 = _perf()
        starts = self._open.get(action_name)
        if not starts:
            return
        t0 = starts.pop()
        s = current()
        if s is None or s.disabled or not s.active:
            return
        try:
            s.add_region(action_name.replace("/", "|"), t0, t1, 0)
        except Exception as e:
            s.warn_once("lightning:profiler", f"the Lightning profiler failed ({e})")

    def summary(self) -> str:
        return ""


def _hparams(pl_module: Any) -> dict[str, str]:
    try:
        return {str(k): str(v) for k, v in dict(pl_module.hparams).items()}
    except Exception:
        return {}
