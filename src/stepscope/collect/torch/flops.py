"""FLOPs per training step, measured once with PyTorch's FLOP counter.

One training step after warm-up (step index ``MEASURE_STEP``, or the first one after the profiler
window when the two would overlap) runs under ``torch.utils.flop_counter.FlopCounterMode``: every
matmul / convolution / attention op of the step (forward, backward, and anything else in it) is
counted with PyTorch's formulas, by the dtype of its inputs (which decides the peak to compare with).
Elementwise ops and the optimizer's update are not counted (the usual convention for MFU).

Recurrent layers (``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN``) run as fused kernels that PyTorch's counter
does not know (0 FLOPs, on CPU and with cuDNN); when a recurrent module's forward added nothing to the
counter, its FLOPs are computed by formula (``rnn_flops``) and added. A layer that can be counted
neither way (``proj_size``, an unreadable input) is listed in ``uncounted``: reports then say the
figure is partial.

Cost: that one step pays a Python dispatch per op (10-50 us per op: +11 ms on a 0.5 ms tiny-MLP step;
the ``flops`` record keeps the step's index and wall time so the cost is stated, and the step is left
out of the step statistics); every other step pays one Python call at its boundary. The step is
measured again if a validation step interrupts it. Not measured when
``--flops-per-step`` is given (0 turns measuring off) or when torch.compile is in use (a dispatch
mode would force a recompile; give ``--flops-per-step``).

Record: ``{"kind": "flops", "step": k, "flops": total, "by_dtype": {dtype: flops}, "by_module":
{name: flops}, "device": "cuda:0"|"cpu", "device_name": str|None, "tf32": bool, "step_wall_ns": ns,
"rnn_flops": flops added by formula, "uncounted": [layer type, ...]}``.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from typing import Any

from stepscope.collect.core.session import DONE, Session

MEASURE_STEP = 2
"""Index of the training step measured (steps 0 and 1 are warm-up: allocation, autotuning, caches)."""


def measure_step_index(session: Session) -> int:
    """First step at or after ``MEASURE_STEP`` that is outside the profiler window."""
    o = session.options
    if o.profile_steps <= 0:
        return MEASURE_STEP
    from stepscope.collect.core.warmup import MIN_SKIP

    # an automatic skip (negative) is decided later, but is never below MIN_SKIP
    first_traced = (o.profile_skip if o.profile_skip >= 0 else MIN_SKIP) + o.profile_wait
    last = first_traced + o.profile_warmup + o.profile_steps
    return MEASURE_STEP if first_traced > MEASURE_STEP else last + 1


RNN_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
"""Gate matrices per recurrent cell: each gate is one input and one hidden matmul."""


def rnn_flops(module: Any, inp: Any, *, training: bool) -> int | None:
    """Matmul FLOPs of one call of an ``nn.RNNBase`` module (2 per multiply-add, as PyTorch counts).

    Per layer and direction, over all T x B positions (the rows of a PackedSequence): the input
    matmuls ``F_ih = 2 G H I T B`` (I: input size, or H x directions above the first layer) and the
    hidden ones ``F_hh = 2 G H H T B``. Forward ``F_ih + F_hh``; with training, backward adds the
    weight gradients (``F_ih + F_hh``), the gradient through the hidden state (``F_hh``) and the
    gradient to the layer's input (``F_ih``, for the first layer only when its input requires a
    gradient). None when it cannot be counted (``proj_size``, unknown mode, no input tensor).
    """
    gates = RNN_GATES.get(str(getattr(module, "mode", "")))
    if gates is None or int(getattr(module, "proj_size", 0) or 0):
        return None
    data = getattr(inp, "data", inp) if type(inp).__name__ == "PackedSequence" else inp
    shape = getattr(data, "shape", None)
    if shape is None:
        return None
    if type(inp).__name__ == "PackedSequence":
        positions = int(shape[0])
    elif len(shape) == 3:
        positions = int(shape[0]) * int(shape[1])
    elif len(shape) == 2:  # unbatched: (T, I)
        positions = int(shape[0])
    else:
        return None
    h = int(module.hidden_size)
    dirs = 2 if module.bidirectional else 1
    total = 0
    for layer in range(int(module.num_layers)):
        i = int(module.input_size) if layer == 0 else h * dirs
        f_ih = 2 * gates * h * i * positions * dirs
        f_hh = 2 * gates * h * h * positions * dirs
        total += f_ih + f_hh
        if training:
            input_grad = layer > 0 or bool(getattr(data, "requires_grad", False))
            total += f_ih + 2 * f_hh + (f_ih if input_grad else 0)
    return total


def _counter_class() -> Any:
    from torch.utils.flop_counter import FlopCounterMode

    class DtypeFlopCounter(FlopCounterMode):
        """FlopCounterMode that also adds up FLOPs by input dtype and remembers the device."""

        def __init__(self) -> None:
            super().__init__(display=False, depth=2)
            self.by_dtype: dict[str, int] = defaultdict(int)
            self.device: str | None = None

        def _count_flops(self, func_packet: Any, out: Any, args: Any, kwargs: Any) -> Any:
            result = super()._count_flops(func_packet, out, args, kwargs)  # type: ignore[no-untyped-call]
            fn = self.flop_registry.get(func_packet)
            if fn is None:
                return result
            try:  # inside the user's op: the by-dtype split never raises into it
                first = next((a for a in args if hasattr(a, "dtype") and hasattr(a, "device")), None)
                if first is not None:
                    n = fn(*args, **kwargs, out_val=out)
                    self.by_dtype[str(first.dtype).replace("torch.", "")] += int(n)
                    if self.device is None:
                        self.device = str(first.device)
            except Exception:  # the total (counted by the base class) stands; the split misses this op
                pass
            return result

    return DtypeFlopCounter


def _compiled_in_use() -> bool:
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        return False
    try:
        return int(dynamo.utils.counters["frames"]["ok"]) > 0
    except Exception:
        return False


class FlopMeter:
    """Counts one training step's FLOPs from step boundaries (Session.extras)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.target = measure_step_index(session)
        self.counter: Any = None
        self.started_val = 0
        self.t0 = 0
        self.done = False
        self.rnn_before: dict[int, int] = {}
        self.rnn_extra = 0
        self.uncounted: list[str] = []
        self.rnn_hooks: list[Any] = []
        self.rnn_base: Any = ()

    def _rnn_pre(self, module: Any, args: Any) -> None:
        if self.counter is not None and isinstance(module, self.rnn_base):
            self.rnn_before[id(module)] = int(self.counter.get_total_flops())

    def _rnn_post(self, module: Any, args: Any, out: Any) -> None:
        counter = self.counter
        if counter is None or not isinstance(module, self.rnn_base):
            return
        try:
            if int(counter.get_total_flops()) > self.rnn_before.pop(id(module), 0):
                return  # PyTorch counted this layer's ops itself
            import torch

            params = list(module.parameters())
            training = torch.is_grad_enabled() and any(p.requires_grad for p in params)
            n = rnn_flops(module, args[0] if args else None, training=training)
            if n is None:
                self.uncounted.append(type(module).__name__)
                return
            self.rnn_extra += n
            if params:
                counter.by_dtype[str(params[0].dtype).replace("torch.", "")] += n
        except Exception:
            self.uncounted.append(type(module).__name__)

    def on_step(self) -> None:
        s = self.session
        if self.done:
            return
        if self.counter is not None:
            if s.val_index != self.started_val:  # a validation step ran inside: measure the next one
                self._exit()
                self.target = s.step_index
            elif s.step_index == self.target + 1:
                self._finish()
                return
        if self.counter is None and s.step_index == self.target:
            if _compiled_in_use():
                self.done = True
                s.warn_once("flops", "FLOPs per step not measured: torch.compile is in use — give --flops-per-step")
                return
            import torch
            from torch.nn.modules import module as m

            self.rnn_base = torch.nn.RNNBase
            self.counter = _counter_class()()
            self.counter.__enter__()
            self.rnn_extra, self.uncounted = 0, []
            self.rnn_hooks = [m.register_module_forward_pre_hook(self._rnn_pre),
                              m.register_module_forward_hook(self._rnn_post)]
            self.started_val = s.val_index
            self.t0 = time.perf_counter_ns()
        elif self.counter is None and s.step_index > self.target:
            self.target = s.step_index

    def _exit(self) -> None:
        for h in self.rnn_hooks:
            h.remove()
        self.rnn_hooks = []
        counter, self.counter = self.counter, None
        if counter is not None:
            counter.__exit__(None, None, None)

    def _finish(self) -> None:
        wall = time.perf_counter_ns() - self.t0
        counter = self.counter
        self._exit()
        self.done = True
        total = int(counter.get_total_flops()) + self.rnn_extra
        by_module = {name: int(sum(ops.values())) for name, ops in counter.get_flop_counts().items()
                     if name != "Global" and name.count(".") < 2}
        self.session.record("flops", step=self.target, flops=total, by_dtype=dict(counter.by_dtype),
                            by_module=by_module, device=counter.device or "cpu",
                            device_name=_device_name(counter.device), tf32=_tf32_enabled(), step_wall_ns=wall,
                            rnn_flops=self.rnn_extra, uncounted=list(self.uncounted))

    def close(self) -> None:
        """At exit in the middle of the measured step: pop the mode, record nothing."""
        self.done = True
        self._exit()


def _device_name(device: str | None) -> str | None:
    if not device or not device.startswith("cuda"):
        return None
    try:
        import torch

        return str(torch.cuda.get_device_name(torch.device(device)))
    except Exception:
        return None


def _tf32_enabled() -> bool:
    try:
        import torch

        return bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"
    except Exception:
        return False


def install_flop_meter(session: Session) -> None:
    """Measure once unless --flops-per-step was given (0: off)."""
    if session.options.flops_per_step is not None:
        return
    meter = FlopMeter(session)

    def on_step() -> object:
        try:
            meter.on_step()
        except Exception as e:
            meter.close()
            session.warn_once("flops", f"FLOPs per step could not be measured ({e})")
        return DONE if meter.done else None

    session.extras.append(on_step)
    session.closers.append(meter.close)
