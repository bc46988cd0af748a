"""Hugging Face ``transformers.Trainer``: a TrainerCallback that marks steps with the Trainer's hooks.

    from stepscope.integrations.huggingface import StepscopeCallback
    trainer = transformers.Trainer(..., callbacks=[StepscopeCallback()])

One step is one optimizer step (``on_step_end``; with gradient accumulation it holds every micro-batch
of the update, the batches the Trainer prefetches for it included), one evaluation batch a validation
step (``on_prediction_step``). Samples and tokens are counted where the model sees them: a forward
pre-hook on the model reads the batch dimension of ``input_ids`` (or the first tensor input) and its
element count (tokens, padding included); fetch counts would be off by one batch, as accelerate's
loader prefetches one ahead. Data wait comes from stepscope's DataLoader hook. ``on_log`` records the
Trainer's logs (loss, learning_rate, grad_norm, eval_*) at the step just ended; ``on_evaluate`` the
evaluation metrics; ``on_train_begin`` the model summary and the training arguments that decide speed.

Under `stepscope run` the callback joins the process's session (one rank stream per process under
torchrun / accelerate launch) and takes step marking over from the optimizer hook, so no step is
counted twice. Without it the callback creates a run at ``on_train_begin`` (rank 0; the other ranks
join it through ``torch.distributed``) and ends it at ``on_train_end``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

try:
    from transformers import TrainerCallback
except ImportError:
    raise ImportError("stepscope.integrations.huggingface needs transformers — pip install 'stepscope[huggingface]'") \
        from None

from stepscope.collect.core.pystate import StepState
from stepscope.collect.core.session import Session, current
from stepscope.integrations.runs import CallbackRun, open_run
from stepscope.model.tables import Phase

SOURCE = "huggingface"
SPEED_ARGS = ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps",
              "learning_rate", "max_steps", "num_train_epochs", "bf16", "fp16", "tf32", "torch_compile",
              "gradient_checkpointing", "dataloader_num_workers", "dataloader_pin_memory", "optim", "seed")
"""TrainingArguments recorded with the run (they decide speed); all of them are in the ``huggingface`` record."""
_perf = time.perf_counter_ns


class StepscopeCallback(TrainerCallback):
    """Observe a transformers Trainer (see the module docstring).

    Args:
        name, params, tags, store: the run's name, parameters, tags and store when the callback creates
            the run itself (ignored under `stepscope run`); the speed-relevant training arguments are
            added to the parameters.
        log_metrics: record the Trainer's logs and evaluation metrics.
    """

    def __init__(self, *, name: str | None = None, params: dict[str, Any] | None = None,
                 tags: dict[str, Any] | None = None, store: str | Path | None = None, log_metrics: bool = True) -> None:
        self.name, self.params, self.tags = name, dict(params or {}), dict(tags or {})
        self.store = None if store is None else str(store)
        self.log_metrics = log_metrics
        self.session: Session | None = None
        self._run: CallbackRun | None = None
        self._epoch = -1
        self._last: dict[str, tuple[int, float]] = {}
        self._seen = [0.0, 0.0]
        """Samples and tokens the model's forward saw since the last step boundary."""
        self._hook: Any = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.session is not None:
            return
        try:
            speed = {k: str(getattr(args, k)) for k in SPEED_ARGS if hasattr(args, k)}
            self._run = open_run(name=self.name or getattr(args, "run_name", None), params={**speed, **self.params},
                                 tags=self.tags, store=self.store, world_size=int(getattr(args, "world_size", 1)),
                                 rank=int(getattr(args, "process_index", 0)), broadcast=_broadcast)
            s = self.session = self._run.session
            if s is None:
                return
            s.set_step_source(SOURCE)
            s.activate()
            s.step = StepState(None, s.epoch)  # step 0 starts at its first batch fetch
            model = kwargs.get("model")
            if model is not None:
                from stepscope.collect.torch.hooks import watch_model

                watch_model(model)
                self._hook = model.register_forward_pre_hook(self._count_inputs, with_kwargs=True)
            s.record("huggingface", model=type(model).__name__ if model is not None else None,
                     world_size=int(getattr(args, "world_size", 1)), args=_args_dict(args))
        except Exception as e:
            self._warn("train-begin", e)

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        s = self.session
        if s is not None:
            self._epoch += 1
            s.epoch = self._epoch
            s.step.epoch = self._epoch

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        s = self.session
        if s is None:
            return
        t = _perf()
        self._fill_step(s)
        s.mark_step(t, source=SOURCE)

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        s = self.session
        if s is None:
            return
        t = _perf()
        self._fill_step(s)
        s.mark_step(t, source=SOURCE, phase=Phase.VALIDATION)

    def _count_inputs(self, module: Any, args: Any, kwargs: Any) -> None:
        try:  # runs in the model's forward: never raises into it
            ids = x = kwargs.get("input_ids")
            if x is None:
                x = next((a for a in (*args, *kwargs.values()) if hasattr(a, "shape") and len(a.shape) > 0), None)
            if x is not None:
                self._seen[0] += float(x.shape[0])
                if ids is not None:
                    self._seen[1] += float(x.numel())
        except Exception as e:
            self._warn("forward", e)

    def _fill_step(self, s: Session) -> None:
        st = s.step
        st.epoch = max(self._epoch, 0)
        samples, tokens = self._seen
        self._seen = [0.0, 0.0]
        if samples:
            st.samples, st.fetched = samples, True
            st.tokens = tokens

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
        s = self.session
        if s is None:
            return
        self._log(s, metrics)
        s.step = StepState(_perf(), s.epoch)  # the next training step starts now, not at the last eval batch

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        s = self.session
        if s is not None:
            self._log(s, logs)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        s, self.session = self.session, None
        run, self._run = self._run, None
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if s is None or run is None:
            return
        try:
            s.flush()
            run.end()
        except Exception as e:
            self._warn("train-end", e)

    def _log(self, s: Session, values: Any) -> None:
        if not self.log_metrics or not isinstance(values, dict):
            return
        step = max(s.step_index - 1, 0)
        for name, value in values.items():
            if name == "epoch" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            v = float(value)
            if self._last.get(name) != (step, v):
                self._last[name] = (step, v)
                s.log_metric(str(name), v, step)

    def _warn(self, where: str, e: Exception) -> None:
        s = self.session or current()
        if s is not None:
            s.warn_once(f"huggingface:{where}", f"the Hugging Face callback failed in {where} ({e})")


def _args_dict(args: Any) -> dict[str, Any]:
    try:
        d = args.to_sanitized_dict()
        return {k: v for k, v in d.items() if isinstance(v, (int, float, str, bool)) or v is None}
    except Exception:
        return {}


def _broadcast(obj: Any) -> Any:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]
