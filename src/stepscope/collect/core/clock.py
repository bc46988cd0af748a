"""One monotonic clock for durations, mapped to wall-clock epoch ns for storage."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(slots=True)
class Clock:
    """``now()`` is monotonic (perf_counter_ns); ``wall(t)`` maps it to Unix-epoch ns."""

    wall0_ns: int = field(default_factory=time.time_ns)
    perf0_ns: int = field(default_factory=time.perf_counter_ns)

    @staticmethod
    def now() -> int:
        return time.perf_counter_ns()

    def wall(self, perf_ns: int) -> int:
        return self.wall0_ns + (perf_ns - self.perf0_ns)

    @property
    def offset_ns(self) -> int:
        """wall(t) - t: what turns a perf-counter time into epoch ns."""
        return self.wall0_ns - self.perf0_ns
