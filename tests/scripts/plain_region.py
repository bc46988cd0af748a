"""One process, no torch: a stepscope region is enough to make a (single-rank) run."""

import time

import stepscope

with stepscope.region("work"):
    time.sleep(0.05)
