"""Region statistics: the nested region tree with count, total, mean, p50, p95, std and % of step."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from stepscope.analyze.stats import Distribution, distribution
from stepscope.model.tables import RegionTable


@dataclass(frozen=True, slots=True)
class RegionStats:
    """One region path. Times in ns (CPU wall clock); ``share_of_steps``: total time of the region's
    instances that started inside measured steps / total measured step time (None without steps)."""

    path: str
    name: str
    depth: int
    time: Distribution
    share_of_steps: float | None
    per_step: float | None
    """Mean instances per measured step."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def region_stats(regions: RegionTable, *, first_step: int = 0, measured_steps: int = 0,
                 step_wall_ns: float = 0.0) -> list[RegionStats]:
    """Per-path statistics in tree order (parents before children, siblings by total time).

    ``time`` covers every instance; the share uses instances in steps ``first_step`` onward
    (warm-up excluded), over ``step_wall_ns`` (the measured steps' summed time).
    """
    if not len(regions):
        return []
    codes = regions["path_code"]
    dur = regions["duration_ns"].astype("float64")
    in_steps = regions["step"] >= first_step
    out: dict[str, RegionStats] = {}
    for code, path in enumerate(regions.names):
        mask = codes == code
        if not mask.any():
            continue
        d = distribution(dur[mask])
        assert d is not None
        steps_total = float(dur[mask & in_steps].sum())
        share = steps_total / step_wall_ns if step_wall_ns > 0 else None
        per_step = float((mask & in_steps).sum()) / measured_steps if measured_steps else None
        out[path] = RegionStats(path=path, name=path.rsplit("/", 1)[-1], depth=path.count("/"), time=d,
                                share_of_steps=share, per_step=per_step)
    return _tree_order(out)


def _tree_order(stats: dict[str, RegionStats]) -> list[RegionStats]:
    children: dict[str, list[RegionStats]] = {}
    for s in stats.values():
        parent = s.path.rsplit("/", 1)[0] if "/" in s.path else ""
        if parent and parent not in stats:
            parent = ""
        children.setdefault(parent, []).append(s)
    ordered: list[RegionStats] = []

    def walk(parent: str) -> None:
        for s in sorted(children.get(parent, []), key=lambda r: -r.time.total):
            ordered.append(s)
            walk(s.path)

    walk("")
    return ordered
