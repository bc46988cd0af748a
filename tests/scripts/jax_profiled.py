"""JAX steps through the stepscope API, each a small jitted matmul and a 20 ms host sleep (profiler window tests)."""

import sys
import time

import jax
import jax.numpy as jnp

import stepscope

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 12
SLEEP_S = 0.02

f = jax.jit(lambda a: jnp.tanh(a @ a).sum())
a = jnp.ones((64, 64))
for _ in stepscope.steps(range(STEPS)):
    with stepscope.region("train_step"):
        f(a).block_until_ready()
        time.sleep(SLEEP_S)
