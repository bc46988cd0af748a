"""stepscope: performance assessment for deep-learning training.

The public API only. `stepscope run -- python train.py` needs none of it; these refine what the
zero-code hooks measure::

    import stepscope
    with stepscope.session(name="ppo", role="learner"):
        for batch in stepscope.steps(loader):
            with stepscope.region("forward"):
                ...
            stepscope.log(loss=loss.item())
"""

from stepscope.collect.api import log, session, step, steps, watch
from stepscope.collect.regions import region, timed

__version__ = "0.1.0"
__all__ = ["log", "region", "session", "step", "steps", "timed", "watch"]
