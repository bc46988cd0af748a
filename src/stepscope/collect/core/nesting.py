"""Own time of a phase call that may contain other phases (attributed once, never twice).

Lightning's automatic optimisation runs forward and backward inside ``optimizer.step(closure)``;
activation checkpointing runs forward inside backward; a ZeRO optimizer communicates inside its step.
Each timed phase (forward, backward, optimizer, data wait, communication) therefore keeps only its
*own* time: the wall time of the call minus the time attributed to other phases while it ran. The
phases of a step are disjoint and, with ``other``, add up to the step.
"""

from __future__ import annotations

import time
from typing import Any

Span = tuple[Any, int, int]
"""(the step in progress at entry, time attributed in it at entry, perf time at entry)"""


def attributed(st: Any) -> int:
    """Time (ns) attributed to any phase of the step state ``st`` so far."""
    return int(st.data_wait + st.forward + st.backward + st.optimizer + st.comm)


def enter(session: Any, t0: int | None = None) -> Span:
    st = session.step
    return (st, st.data_wait + st.forward + st.backward + st.optimizer + st.comm,
            time.perf_counter_ns() if t0 is None else t0)


def own_time(session: Any, span: Span, t1: int) -> int:
    """Wall time since ``span`` began minus what other phases took meanwhile (a step boundary inside
    the span included: the time attributed after entry to the old step, and all of the new one's).
    (``attributed`` written out: this runs several times a step.)"""
    st0, a0, t0 = span
    nested = st0.data_wait + st0.forward + st0.backward + st0.optimizer + st0.comm - a0
    st = session.step
    if st is not st0:
        nested += st.data_wait + st.forward + st.backward + st.optimizer + st.comm
    return max(0, int(t1 - t0 - nested))
