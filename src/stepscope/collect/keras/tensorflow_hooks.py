"""TensorFlow hooks: ``tf.data`` iterator wait as data wait, ``tf.function`` calls that apply a Keras
optimizer as steps, and the ``tf.config`` settings of the run.

* Data wait: the time a Python ``next()`` on a ``tf.data`` iterator blocks (``for x, y in dataset`` in a
  custom loop), with the samples of the batch it returns (first dimension of its first tensor) and the
  epoch (the how-many-th iteration over that dataset). Iterators consumed inside a compiled function
  (Keras ``fit`` fetches its batches inside its train function) are not seen here.
* Steps of compiled loops: a Keras optimizer applied while a ``tf.function`` is being traced flags the
  outermost function being called; every later return of that function is one step (source
  ``keras_optimizer``, as an eager ``apply_gradients`` is: see keras_hooks.py).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from stepscope.collect.core.batch import batch_size
from stepscope.collect.core.session import Session
from stepscope.collect.core.undo import UNDO

STEP_SOURCE = "keras_optimizer"
MIN_MINOR = 16
"""TensorFlow 2.16 and later (Keras 3 by default); older versions are tried, with a warning."""
_perf = time.perf_counter_ns
_calls = threading.local()
"""Per thread: the stack of ``tf.function`` objects being called."""


def install_tensorflow_hooks(session: Session) -> None:
    import sys

    version = str(getattr(sys.modules.get("tensorflow"), "__version__", "?"))
    parts = version.split(".")
    if not (len(parts) > 1 and parts[0] == "2" and parts[1].isdigit() and int(parts[1]) >= MIN_MINOR):
        session.warn_once("tensorflow-version", f"TensorFlow {version} is not one stepscope knows (2.{MIN_MINOR} or "
                          "later); it observes what it can")
    installed: list[str] = []
    refused: dict[str, str] = {}
    for name, install in (("tf.data", _install_data_hooks), ("tf.function", _install_function_hook)):
        try:
            install(session)
            installed.append(name)
        except Exception as e:
            refused[name] = f"{type(e).__name__}: {e}"
            session.warn_once(f"install:{name}", f"could not install the {name} hook ({e})")
    session.note_hooks("tensorflow", None if version == "?" else version, installed, refused)


# -- tf.data ------------------------------------------------------------------------------------------
def _install_data_hooks(session: Session) -> None:
    from tensorflow.python.data.ops import dataset_ops, iterator_ops

    it_cls = iterator_ops.OwnedIterator
    ds_cls = dataset_ops.DatasetV2
    orig_next = it_cls.__next__
    orig_iter = ds_cls.__iter__
    epochs: dict[int, int] = {}

    def __next__(self: Any) -> Any:
        t0 = _perf()
        batch = orig_next(self)
        t1 = _perf()
        try:
            if session.disabled or session.api_fetch or session.step_source == "keras":
                return batch
            session.touch(t0)
            session.activate()
            epoch = getattr(self, "_stepscope_epoch", None)
            if epoch is not None and session.step_source != "api":
                session.step.epoch = epoch
            session.add_fetch(t0, t1, batch_size(batch), None)
        except Exception as e:
            session.warn_once("tf.data", f"tf.data timing failed ({e})")
        return batch

    def __iter__(self: Any) -> Any:
        it = orig_iter(self)
        try:
            if isinstance(it, it_cls):
                key = id(self)
                epochs[key] = epochs.get(key, -1) + 1
                it._stepscope_epoch = epochs[key]
        except Exception as e:
            session.warn_once("tf.data-iter", f"tf.data epoch tracking failed ({e})")
        return it

    it_cls.__next__ = __next__
    ds_cls.__iter__ = __iter__

    def restore() -> None:
        it_cls.__next__ = orig_next
        ds_cls.__iter__ = orig_iter

    UNDO.append(restore)


# -- tf.function ---------------------------------------------------------------------------------------
def _install_function_hook(session: Session) -> None:
    from tensorflow.python.eager.polymorphic_function import polymorphic_function as pf

    cls = pf.Function
    orig_call = cls.__call__

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        stack: list[Any] | None = getattr(_calls, "stack", None)
        if stack is None:
            stack = _calls.stack = []
        stack.append(self)
        try:
            return orig_call(self, *args, **kwargs)
        finally:
            stack.pop()
            if not stack and getattr(self, "_stepscope_step", False):
                t = _perf()
                try:
                    if not session.disabled:
                        from stepscope.collect.keras.kerasinfo import describe_once

                        session.mark_step(t, source=STEP_SOURCE)
                        describe_once(session, None)
                except Exception as e:
                    session.warn_once("tf.function", f"tf.function step marking failed ({e})")

    __call__.__wrapped__ = orig_call  # type: ignore[attr-defined]  # benchmarks time the wrapper against it
    cls.__call__ = __call__

    def restore() -> None:
        cls.__call__ = orig_call

    UNDO.append(restore)


def flag_traced_step() -> bool:
    """Called by the optimizer hook: True when the optimizer runs inside a ``tf.function`` being traced (the
    outermost function called is flagged as a step function then)."""
    import tensorflow as tf

    if tf.executing_eagerly():
        return False
    stack = getattr(_calls, "stack", None)
    if stack:
        try:
            stack[0]._stepscope_step = True
        except Exception:
            return True
    return True
