"""The between-run noise floor of a comparison with one run on a side, from what was measured.

Two runs cannot measure their own between-run noise, but each run measures two of its causes: how irregular its
own steps were (robust step-time CV) and whether other processes saturated the host's CPU (analyze/run/quality.py).
Each source of spread is counted once:

- the floor's sigma is the largest of: the spread learned from repeats of the command in the store (when there
  are any; else ``QUIET_SIGMA``, what a quiet host's runs are assumed to spread by), ``CV_SIGMA`` times the
  larger step-time CV of the two runs, and ``SATURATED_SIGMA`` when either run met a saturated host;
- never a product: a learned floor is not doubled for a noisy host (its repeats may already hold that noise).

Calibration (docs/diff.md, "One run a side"): 34 A/A runs of one script on the shared 2-core machine at load
11-19, every one flagged noisy, step CV up to 130%, spread between runs by sigma = 0.24 (CV_SIGMA); their A/A
pairs reached x1.46 and x0.68 without a hog (SATURATED_SIGMA keeps those inconclusive); A/A pairs on a quiet host
stay within the 5% assumed for it. A difference in CPU contention between the two runs then widens the floor
further (contention.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from stepscope.analyze.run.quality import OTHERS_CORES, SATURATED_PCT, Quality
from stepscope.analyze.stats import NoiseFloor

QUIET_SIGMA = 0.05
"""Between-run spread (sd of log step time) assumed for runs with no repeats in the store and no sign of noise."""
CV_SIGMA = 0.2
"""Between-run spread per unit of the runs' own step-time CV (130% CV beside sigma 0.24 measured under load)."""
SATURATED_SIGMA = 0.15
"""Between-run spread of runs on a host saturated by other processes, before their own step CV is counted: the 34
A/A runs at load 11-19 spread by 0.24 with step CVs up to 130% (which ``CV_SIGMA`` turns into 0.26); a saturated
host with regular steps gets this (a pair then needs x1.73 at 99%; the issue's A/A pairs reached x1.46)."""


def saturated(q: Quality | None) -> bool:
    """Other processes held the host's CPU during the run (quality.py's rule)."""
    return q is not None and q.system_cpu_pct is not None and q.others_cores is not None \
        and q.system_cpu_pct >= SATURATED_PCT and q.others_cores >= OTHERS_CORES


def measured_floor(learned: NoiseFloor | None, runs: Sequence[tuple[str, Quality | None]]) -> NoiseFloor:
    """The floor for one run a side: the largest of the learned (or assumed quiet) spread, the runs' step-time
    dispersion and their host's saturation, each counted once; ``source`` says which decided."""
    base = learned or NoiseFloor(QUIET_SIGMA, float("inf"), f"no repeats of this command in the store: "
                                 f"{QUIET_SIGMA:.0%} between-run spread assumed for a quiet host")
    cvs = [(q.step_cv, rid) for rid, q in runs if q is not None and q.step_cv is not None]
    cv, cv_run = max(cvs) if cvs else (0.0, "")
    hot = [rid for rid, q in runs if saturated(q)]
    candidates = [(base.sigma_log, "")]
    if cv * CV_SIGMA > base.sigma_log:
        candidates.append((cv * CV_SIGMA, f"run {cv_run}'s own step-time CV {cv:.0%} (x{CV_SIGMA:g})"))
    if hot and base.sigma_log < SATURATED_SIGMA:
        candidates.append((SATURATED_SIGMA, f"run(s) {', '.join(hot)} on a host saturated by other processes "
                                            f"(spread {SATURATED_SIGMA:.0%} measured there)"))
    sigma, why = max(candidates)
    if not why:
        return base
    # the measured spread decides: known as well as its calibration, i.e. as a stated value
    return NoiseFloor(sigma, float("inf"), f"{base.source}; raised to {sigma:.0%} between-run spread by {why}",
                      base.load_shift_log, base.load_factor, base.load_reason)
