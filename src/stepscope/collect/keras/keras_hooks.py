"""Keras 3 hooks: ``Model.fit`` gets a stepscope callback, a Keras optimizer's ``apply`` marks the steps of
custom loops, models are summarised.

* ``fit``: one training batch (one ``train_function`` call: ``steps_per_execution`` batches) is one step,
  from its ``on_train_batch_begin`` to the next one (or to validation, the epoch's end); one validation
  batch is one validation step; the epoch is fit's epoch. The callback has no ``*_batch_end`` method, so
  Keras keeps dispatching batch-end callbacks asynchronously where it would without stepscope.
  Samples come from fit's data adapter (arrays: the batch size, the partial last batch of an epoch; a
  ``tf.data`` dataset: its static batch dimension where it has one). Validation time is kept out of the
  training step around it. Keras fetches fit's batches inside its compiled train function; on the
  TensorFlow backend the dataset fit iterates gets a stamping stage (collect/keras/keras_datawait.py) that
  measures how long each fetch blocked: that is the step's data wait (on the JAX and PyTorch backends the
  trainer's Python ``next`` is timed). The callback reads those per-batch waits every FILL_EVERY training
  steps (and at validation, the epoch's end, the training's end, as fit unwinds) and writes each step's wait
  as a ``step_device`` record that the reader merges into the step row (written earlier with NaN).
* custom loops: the outermost ``optimizer.apply`` / ``apply_gradients`` of the first Keras optimizer that
  runs marks a step (source ``keras_optimizer``); inside a ``tf.function`` the function's return marks it
  (tensorflow_hooks.py). Data wait, samples and epochs come from the ``tf.data`` iterator.
* the model summary (layers, own parameters, output shapes where built) of fit's model, or of the Keras
  model whose variables the marking optimizer updates; a ``framework`` record (Keras backend and version,
  TensorFlow's ``tf.config`` thread pools and devices, JAX's devices).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from stepscope.collect.core.pystate import StepState
from stepscope.collect.core.session import Session
from stepscope.collect.core.undo import UNDO
from stepscope.collect.keras.keras_datawait import RING, ready_wait
from stepscope.collect.keras.kerasinfo import _MODELS, describe_once
from stepscope.model.tables import Phase

FIT_SOURCE = "keras"
FAULT_ENV = "STEPSCOPE_DEBUG_FAULT"
"""Test switch: ``keras`` in this comma list makes every method of the fit callback raise on purpose, to
prove that a failing hook never breaks training (as ``optimizer`` does for the torch hook)."""
DATA_WAIT_ENV = "STEPSCOPE_KERAS_DATA_WAIT"
"""``off`` (or 0, no, false) leaves fit's input unmetered: data wait in fit is then NaN and the hooks cost
less (docs/frameworks.md, "Overhead")."""
OPT_SOURCE = "keras_optimizer"
_perf = time.perf_counter_ns
_wall = time.time_ns
NOT_MEASURED: Any = float("nan")
"""A step's data wait where the fetch was not metered (the session writes it as is)."""
_ITERATORS = threading.local()
"""Per thread: the Keras epoch iterators created while ``fit`` runs (the first one is fit's training data)."""


SUPPORTED_MAJOR = 3
"""Keras 3 only: Keras 2 (``tf.keras`` of TensorFlow < 2.16, or ``tf_keras``) has other internals."""


def install_keras_hooks(session: Session) -> None:
    keras = sys.modules.get("keras")
    version = str(getattr(keras, "__version__", "?"))
    known = None if version == "?" else version
    if version.split(".")[0] != str(SUPPORTED_MAJOR):
        why = f"Keras {version} is not observed (stepscope knows Keras {SUPPORTED_MAJOR})"
        session.warn_once("keras-version", f"{why}: steps come from tf.data and the stepscope API only")
        session.note_hooks("keras", known, [], {"keras": why})
        return
    installed: list[str] = []
    refused: dict[str, str] = {}
    for name, install in (("fit", _install_fit), ("optimizer", _install_optimizer),
                          ("models", _install_model_registry)):
        try:
            install(session)
            installed.append(name)
        except Exception as e:
            refused[name] = f"{type(e).__name__}: {e}"
            session.warn_once(f"install:keras.{name}", f"could not install the keras.{name} hook ({e})")
    session.note_hooks("keras", known, installed, refused)


def _patch(cls: Any, name: str, make: Callable[[Any], Any]) -> None:
    orig = cls.__dict__[name]
    new = make(orig)
    new.__wrapped__ = orig
    setattr(cls, name, new)
    UNDO.append(lambda: setattr(cls, name, orig))


# -- fit -------------------------------------------------------------------------------------------------
def _install_fit(session: Session) -> None:
    from keras.src.models.model import Model
    from keras.src.trainers.epoch_iterator import EpochIterator

    fit_owner = next(c for c in Model.__mro__ if "fit" in c.__dict__)

    def make_fit(orig: Any) -> Any:
        def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
            if session.disabled:
                return orig(self, *args, **kwargs)
            callback = None
            try:
                callback = StepscopeKerasCallback(session)
                args, kwargs = _with_callback(args, kwargs, callback)
            except Exception as e:
                session.warn_once("keras.fit", f"could not observe Model.fit ({e})")
            created: list[Any] = []
            outer = getattr(_ITERATORS, "created", None)
            _ITERATORS.created = created
            if callback is not None:
                callback.iterators = created
            try:
                return orig(self, *args, **kwargs)
            finally:
                _ITERATORS.created = outer
                if callback is not None:  # fit ended, or raised: the last steps' data waits are written
                    callback.fill_waits(final=True)

        return fit

    def make_init(orig: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            created = getattr(_ITERATORS, "created", None)
            if created is not None:
                if not created:
                    setattr(self, TRAIN_ATTR, True)
                created.append(self)
                self._stepscope_fit = True

        return __init__

    _patch(fit_owner, "fit", make_fit)
    _patch(EpochIterator, "__init__", make_init)
    backend = _backend()
    if os.environ.get(DATA_WAIT_ENV, "").lower() in ("0", "off", "no", "false"):
        # a note as warn_once leaves one (no log line: the user asked for it), without activating the session
        session.buffers.add_other({"kind": "note", "text": f"data wait in Model.fit is not measured: "
                                   f"{DATA_WAIT_ENV} turned it off"})
    elif backend == "tensorflow":
        from keras.src.backend.tensorflow.trainer import TFEpochIterator

        _install_input_meter(session, TFEpochIterator, "tensorflow")
    elif backend == "jax":
        from keras.src.backend.jax.trainer import JAXEpochIterator

        _install_input_meter(session, JAXEpochIterator, "python")
    elif backend == "torch":
        from keras.src.backend.torch.trainer import TorchEpochIterator

        _install_input_meter(session, TorchEpochIterator, "python")


def _backend() -> str | None:
    try:
        return str(sys.modules["keras"].backend.backend())
    except Exception:
        return None


METER_ATTR = "_stepscope_meter"
"""On a Keras ``TFEpochIterator`` created by an observed ``fit``: its InputWaitMeter (None: not metered)."""
TRAIN_ATTR = "_stepscope_train"
"""True on the first epoch iterator an observed ``fit`` creates: its training data."""


def _install_input_meter(session: Session, epoch_iterator: type, kind: str) -> None:
    """The backend's ``EpochIterator._get_iterator`` hands out the metered data (collect/keras/keras_datawait.py:
    a stamped ``tf.data`` dataset, or a Python iterable whose ``next`` is timed) of the iterators an observed
    ``fit`` created (training and validation data)."""

    def make_get_iterator(orig: Any) -> Any:
        def _get_iterator(self: Any) -> Any:
            dataset = orig(self)
            if not self.__dict__.get("_stepscope_fit") or session.disabled:
                return dataset
            if METER_ATTR not in self.__dict__:
                setattr(self, METER_ATTR, None)
                try:
                    from stepscope.collect.keras.keras_datawait import PythonWaitMeter, meter_for, unmetered_reason

                    if kind == "python":
                        iterable = hasattr(dataset, "__iter__")
                        setattr(self, METER_ATTR, PythonWaitMeter() if iterable else None)
                        why = f"fit iterates a {type(dataset).__name__}, which is not iterable"
                    else:
                        # training data stepped one batch a step: stamped when each batch is ready
                        ready = bool(self.__dict__.get(TRAIN_ATTR)) and _int(getattr(self, "steps_per_execution",
                                                                                     1)) == 1
                        setattr(self, METER_ATTR, meter_for(dataset, ready=ready))
                        why = unmetered_reason(dataset)
                except Exception as e:
                    why = f"its input pipeline could not be metered ({e})"
                if self.__dict__[METER_ATTR] is None:
                    session.warn_once("keras.data-wait", f"data wait in Model.fit is not measured: {why}")
            meter = self.__dict__[METER_ATTR]
            return dataset if meter is None else meter.wrap(dataset)  # JAX: a new generator every epoch

        return _get_iterator

    _patch(epoch_iterator, "_get_iterator", make_get_iterator)


FIT_CALLBACKS_POSITION = 5
"""``callbacks`` is fit's sixth parameter (after x, y, batch_size, epochs, verbose)."""


def _with_callback(args: tuple[Any, ...], kwargs: dict[str, Any], callback: Any) -> tuple[tuple[Any, ...],
                                                                                          dict[str, Any]]:
    from keras.src.callbacks.callback_list import CallbackList

    if len(args) > FIT_CALLBACKS_POSITION:
        given = args[FIT_CALLBACKS_POSITION]
        args = (*args[:FIT_CALLBACKS_POSITION], _add(given, callback, CallbackList),
                *args[FIT_CALLBACKS_POSITION + 1:])
    else:
        kwargs = {**kwargs, "callbacks": _add(kwargs.get("callbacks"), callback, CallbackList)}
    return args, kwargs


def _add(given: Any, callback: Any, callback_list: Any) -> Any:
    if given is None:
        return [callback]
    if isinstance(given, callback_list):
        given.append(callback)
        return given
    return [*list(given), callback]


def _callback_base() -> Any:
    from keras.src.callbacks.callback import Callback

    return Callback


class _Samples:
    """Samples per batch of one Keras data adapter."""

    def __init__(self, iterator: Any) -> None:
        adapter = _attr(iterator, "data_adapter")
        self.batch = _int(_attr(adapter, "batch_size"))
        self.num_batches = _int(_attr(adapter, "num_batches"))
        self.partial = _int(_attr(adapter, "partial_batch_size")) if _attr(adapter, "has_partial_batch") else None
        if self.batch is None:  # a tf.data dataset batched without drop_remainder: read its batch op
            self.batch, self.partial = _tf_data_batch(_attr(adapter, "_dataset"))
        steps = _int(_attr(iterator, "steps_per_epoch"))
        if steps is not None and (self.num_batches is None or steps < self.num_batches):
            self.num_batches, self.partial = steps, None  # an epoch cut short: every batch is full

    def of(self, first: int, last: int) -> float:
        """Samples in batches ``first..last`` of an epoch (NaN where the batch size is unknown)."""
        if self.batch is None:
            return float("nan")
        total = 0
        for i in range(first, last + 1):
            is_last = self.num_batches is not None and i == self.num_batches - 1
            total += self.partial if (is_last and self.partial) else self.batch
        return float(total)


def _attr(obj: Any, name: str) -> Any:
    """``obj.name``, or None where it is missing or its property raises (a generator's adapter raises
    NotImplementedError for ``has_partial_batch``)."""
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _tf_data_batch(dataset: Any, depth: int = 0) -> tuple[int | None, int | None]:
    """(batch size, size of the partial last batch) of a ``tf.data`` pipeline from its last ``batch`` op and
    the cardinality of what that op batches; (None, None) where unknown (a filter, an unknown cardinality)."""
    if dataset is None or depth > 32:
        return None, None
    size: Any = getattr(dataset, "_batch_size", None)
    if size is None:
        return _tf_data_batch(getattr(dataset, "_input_dataset", None), depth + 1)
    try:
        b = int(size.numpy() if hasattr(size, "numpy") else size)
        n = int(dataset._input_dataset.cardinality())
    except Exception:
        return None, None
    if b <= 0:
        return None, None
    drop: Any = getattr(dataset, "_drop_remainder", None)
    try:
        drop_value = bool(drop.numpy()) if hasattr(drop, "numpy") else bool(drop)
    except Exception:
        drop_value = False
    return b, (n % b or None) if n >= 0 and not drop_value else None


def _int(v: Any) -> int | None:
    try:
        return None if v is None else int(v)
    except (TypeError, ValueError):
        return None


def _meter(iterator: Any) -> Any:
    return None if iterator is None else iterator.__dict__.get(METER_ATTR)


def _take_wait(iterator: Any) -> Any:
    """The input wait (int ns) of the steps since the last call, from the iterator's meter; NaN where fit's
    data is not metered (Keras on the JAX or PyTorch backend, a distribution strategy's dataset)."""
    meter = _meter(iterator)
    return NOT_MEASURED if meter is None else round(meter.take_ns())


FILL_EVERY = 64
"""Training steps whose data waits the callback reads from the stage's ring at once
(collect/keras/keras_datawait.py)."""


def StepscopeKerasCallback(session: Session) -> Any:
    """A ``keras.callbacks.Callback`` (the class is made at run time, on Keras' own base class)."""
    return _callback_class()(session)


_CLASS: list[type] = []


def _callback_class() -> type:
    if _CLASS:
        return _CLASS[0]
    base = _callback_base()

    class _StepscopeCallback(base):  # type: ignore[misc, valid-type]
        """Marks fit's steps in the process's session (see the module docstring)."""

        def __init__(self, session: Session) -> None:
            super().__init__()
            self.session = session
            self.iterators: list[Any] = []
            self.train: _Samples | None = None
            self.val: _Samples | None = None
            self.epoch = 0
            self.saved: StepState | None = None
            self.fault = "keras" in os.environ.get(FAULT_ENV, "").split(",")
            self.pending: int | None = None
            """First batch index of the training step in progress (None: none)."""
            self.val_pending: int | None = None
            self.val_iterator: Any = None
            self.unfilled: list[tuple[int, int, int, int]] = []
            """(step index, batches, begin in wall-clock ns, duration ns) of the training steps whose data wait
            is not read yet."""
            self.begun = (0, 0)
            """(wall-clock ns, perf_counter ns) at the begin of the last training batch (the pending step's)."""
            self.unfilled_batches = 0
            self.next_plain = -1
            """The batch whose begin ends the pending step on the plain path (``_plain_begin``); -1: none."""
            self.plain: tuple[float, int, bool] | None = None
            """Where the training steps can take the plain path: (samples of a full batch, index of the partial
            last batch or -1, whether the data wait is metered in batches); set where a step takes the general
            path (an epoch's first)."""

        def fill_waits(self, *, final: bool = False, at_end: bool = False) -> None:
            """Read the training meter's per-batch waits and write each unfilled step's sum as a
            ``step_device`` record (the reader fills the step's ``data_wait_ns`` from it). The batches read
            must be those of the unfilled steps, in order, but for the last step: as fit unwinds (``final``:
            it may have raised in a step that was never ended) that step's batches are left over and dropped;
            at an epoch's end (``at_end``) the last step may have fetched nothing (a dataset of unknown
            length: Keras begins a step whose fetch finds the end), and keeps NaN."""
            if not self.unfilled:
                return
            steps, self.unfilled, self.unfilled_batches = self.unfilled, [], 0
            try:
                meter = _meter(self.iterators[0])
                stepped = sum(step[1] for step in steps)
                # ready times: a step's batches are the next ones stamped (a prefetch may have stamped more)
                ready = meter.stamps_ready
                waits = meter.take_ready(stepped) if ready else meter.take_batches()
                short = stepped - len(waits) if waits is not None else 0
                if waits is None or (short < 0 and not final) or (short > 0 and not (
                        (at_end or final) and short <= steps[-1][1])):
                    why = "more batches than the ring holds" if waits is None else (
                        f"{len(waits)} batches fetched for {stepped} batches stepped")
                    self.session.warn_once("keras.data-wait-fill", f"data wait of {len(steps)} fit steps is not "
                                           f"known ({why})")
                    return
                add, at = self.session.buffers.add_other, 0
                for index, n, begin, duration in steps:
                    if at + n > len(waits):
                        break
                    # ready times: the step waited until its last batch was ready
                    wait = ready_wait(waits[at + n - 1], begin, duration) if ready else round(sum(waits[at:at + n]))
                    add({"kind": "step_device", "index": index, "data_wait_ns": wait})
                    at += n
            except Exception as e:
                self.session.warn_once("keras.data-wait-fill", f"data wait of fit steps could not be read ({e})")

        def _guard(self, where: str, fn: Callable[[], None]) -> None:
            if self.session.disabled:
                return
            try:
                if self.fault:
                    raise RuntimeError("injected fault (STEPSCOPE_DEBUG_FAULT=keras)")
                fn()
            except Exception as e:
                self.session.warn_once(f"keras:{where}", f"the Keras callback failed in {where} ({e})")

        def on_train_begin(self, logs: Any = None) -> None:
            def go() -> None:
                s = self.session
                s.set_step_source(FIT_SOURCE)
                s.activate()
                self.train = _Samples(self.iterators[0]) if self.iterators else None
                meter = _meter(self.iterators[0] if self.iterators else None)
                if meter is not None:
                    meter.reset()
                s.step = StepState(None, s.epoch)
                describe_once(s, self.model)
            self._guard("train-begin", go)

        def _plain_setup(self, meter: Any) -> tuple[float, int, bool] | None:
            """``plain`` (see ``__init__``) where the training steps are one batch each (``steps_per_execution``
            1), of a known size, and the data wait is not read per step (metered in batches, or not metered);
            None otherwise."""
            samples = self.train
            if (self.fault or samples is None or samples.batch is None or (meter is not None and not meter.deferred)
                    or _int(getattr(self.model, "steps_per_execution", 1)) != 1):
                return None
            partial = samples.num_batches - 1 if samples.partial and samples.num_batches is not None else -1
            return float(samples.batch), partial, meter is not None

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            def go() -> None:
                self.epoch = epoch
                self.session.epoch = epoch
                self.session.step.epoch = epoch
                self.session.step.start = None
            self._guard("epoch-begin", go)

        # Steps end when the next batch begins (or validation, the epoch's end, the training's end): the
        # callback defines no *_batch_end method, so Keras keeps dispatching those asynchronously where it
        # did (a callback with one makes Keras convert every step's logs synchronously).
        def _span(self, begin: int, last: int | None, samples: _Samples | None) -> int:
            if last is not None:
                return last
            spe = max(_int(getattr(self.model, "steps_per_execution", 1)) or 1, 1)
            end = begin + spe - 1
            if samples is not None and samples.num_batches is not None:
                end = min(end, samples.num_batches - 1)
            return end

        def _end_train(self, t: int, next_begin: int | None) -> None:
            if self.pending is None:
                return
            begin, self.pending, self.next_plain = self.pending, None, -1
            s = self.session
            st = s.step
            st.epoch = self.epoch
            if self.train is not None:
                last = self._span(begin, None if next_begin is None else next_begin - 1, self.train)
                st.samples, st.fetched = self.train.of(begin, last), True
                meter = _meter(self.iterators[0] if self.iterators else None)
                if meter is not None and meter.deferred:  # read every FILL_EVERY steps (fill_waits)
                    st.data_wait = NOT_MEASURED
                    index = s.step_index
                    s.mark_step(t, source=FIT_SOURCE)
                    if s.step_index == index + 1:
                        self.unfilled.append((index, last - begin + 1, self.begun[0], t - self.begun[1]))
                        self.unfilled_batches += last - begin + 1
                        if len(self.unfilled) >= FILL_EVERY or self.unfilled_batches >= RING // 2:
                            self.fill_waits()
                    return
                st.data_wait = NOT_MEASURED if meter is None else round(meter.take_ns())
            s.mark_step(t, source=FIT_SOURCE)

        def _end_val(self, t: int, next_begin: int | None) -> None:
            if self.val_pending is None:
                return
            begin, self.val_pending = self.val_pending, None
            s = self.session
            s.step.epoch = self.epoch
            if self.val is not None:
                last = self._span(begin, None if next_begin is None else next_begin - 1, self.val)
                s.step.samples, s.step.fetched = self.val.of(begin, last), True
                s.step.data_wait = _take_wait(self.val_iterator)
            s.mark_step(t, source=FIT_SOURCE, phase=Phase.VALIDATION)

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            t = _perf()
            w = _wall()
            s = self.session
            if batch == self.next_plain and s.step_source == FIT_SOURCE and s.active and not (s.extras or s.disabled):
                self._plain_begin(t, w, batch, s)
                return

            def go() -> None:
                self._end_train(t, batch)
                self.pending = batch
                self.begun = (w, t)
                s.touch(t)
                # the meter is made when fit first iterates its data: looked up here, at each epoch's first batch
                plain = self.plain = self._plain_setup(_meter(self.iterators[0] if self.iterators else None))
                if plain is not None and batch != plain[1] and s.step_source == FIT_SOURCE:
                    self.next_plain = batch + 1
            self._guard("train-batch-begin", go)

        def _plain_begin(self, t: int, w: int, batch: int, s: Session) -> None:
            """``on_train_batch_begin`` in the common case: the pending step is the previous batch, a full one,
            and nothing else runs at step ends (no per-step collector). The step is ended by ``Session.mark_step``
            as ``_end_train`` ends it, without ``_end_train``'s lookups, closures and helper calls: this runs right
            after a TensorFlow step, when caches are cold and every line touched costs (docs/frameworks.md,
            "Overhead")."""
            try:
                samples, partial, metered = self.plain  # type: ignore[misc]
                st, index = s.step, s.step_index
                st.samples, st.fetched, st.data_wait, st.epoch = samples, True, NOT_MEASURED, self.epoch
                s.mark_step(t, source=FIT_SOURCE)
                self.pending = batch
                self.next_plain = batch + 1 if batch != partial else -1
                if metered:
                    begun, self.begun = self.begun, (w, t)
                    self.unfilled.append((index, 1, begun[0], t - begun[1]))
                    self.unfilled_batches += 1
                    if len(self.unfilled) >= FILL_EVERY or self.unfilled_batches >= RING // 2:
                        self.fill_waits()
            except Exception as e:
                self.next_plain = -1
                s.warn_once("keras:train-batch-begin", f"the Keras callback failed in train-batch-begin ({e})")

        def on_test_begin(self, logs: Any = None) -> None:
            t = _perf()

            def go() -> None:
                self._end_train(t, None)
                self.fill_waits(at_end=True)
                s = self.session
                it = getattr(self.model, "_eval_epoch_iterator", None) or (self.iterators[-1] if len(
                    self.iterators) > 1 else None)
                self.val = _Samples(it) if it is not None else None
                self.val_iterator = it
                meter = _meter(it)
                if meter is not None:
                    meter.reset()
                self.saved, s.step = s.step, StepState(t, s.epoch)
            self._guard("test-begin", go)

        def on_test_batch_begin(self, batch: int, logs: Any = None) -> None:
            t = _perf()

            def go() -> None:
                self._end_val(t, batch)
                self.val_pending = batch
            self._guard("test-batch-begin", go)

        def on_test_end(self, logs: Any = None) -> None:
            t = _perf()

            def go() -> None:
                self._end_val(t, None)
                saved, self.saved = self.saved, None
                if saved is not None:
                    saved.start = None
                    self.session.step = saved
            self._guard("test-end", go)

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            t = _perf()

            def go() -> None:
                self._end_train(t, None)
                self.fill_waits(at_end=True)
                s = self.session
                for name, value in dict(logs or {}).items():
                    try:
                        s.log_metric(f"epoch/{name}", float(value), max(s.step_index - 1, 0))
                    except (TypeError, ValueError):
                        pass
            self._guard("epoch-end", go)

        def on_train_end(self, logs: Any = None) -> None:
            t = _perf()

            def go() -> None:
                self._end_train(t, None)
                self.fill_waits(at_end=True)
                self.session.flush()
            self._guard("train-end", go)

    _CLASS.append(_StepscopeCallback)
    return _StepscopeCallback


# -- custom loops: the optimizer --------------------------------------------------------------------------
def _install_optimizer(session: Session) -> None:
    from keras.src.optimizers.base_optimizer import BaseOptimizer

    state: dict[str, Any] = {"depth": 0, "marker": None, "t0": 0}

    def make_apply(orig: Any) -> Any:
        def apply(self: Any, grads: Any, trainable_variables: Any = None) -> Any:
            if state["depth"] == 0:
                state["t0"] = _perf()
            state["depth"] += 1
            try:
                return orig(self, grads, trainable_variables)
            finally:
                state["depth"] -= 1
                if not state["depth"]:
                    _after_apply(session, state, self, trainable_variables)

        return apply

    _patch(BaseOptimizer, "apply", make_apply)


def _after_apply(session: Session, state: dict[str, Any], opt: Any, variables: Any) -> None:
    t1 = _perf()
    if session.disabled or session.step_source == FIT_SOURCE:
        return
    try:
        if state["marker"] is None:
            state["marker"] = weakref.ref(opt)
        if state["marker"]() is not opt:
            return
        if "tensorflow" in sys.modules:
            from stepscope.collect.keras.tensorflow_hooks import flag_traced_step

            if flag_traced_step():
                return  # traced: the tf.function's return marks each step
        if _tracing_elsewhere(variables):
            return
        session.step.optimizer += t1 - state["t0"]
        session.mark_step(t1, source=OPT_SOURCE)
        describe_once(session, None, variables)
    except Exception as e:
        session.warn_once("keras.optimizer", f"Keras step marking failed ({e})")


def _tracing_elsewhere(variables: Any) -> bool:
    """A JAX trace (the JAX backend's jitted step): nothing runs now, the callback or API marks steps."""
    jax_core = sys.modules.get("jax.core")
    if jax_core is None:
        return False
    try:
        return not jax_core.trace_state_clean()
    except Exception:
        return False


# -- models, summary, framework record --------------------------------------------------------------------
def _install_model_registry(session: Session) -> None:
    from keras.src.models.model import Model

    def make_init(orig: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            try:
                _MODELS.add(self)
            except TypeError:
                pass

        return __init__

    _patch(Model, "__init__", make_init)
