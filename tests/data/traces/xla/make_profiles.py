"""Writes the TensorFlow and JAX profile fixtures of tests/traces/test_xla.py (run by hand; outputs committed).

Each profiles 3 steps annotated with step_num 0..2; every step sleeps SLEEP_S on the host after a small
matmul, so each step annotation lasts at least SLEEP_S.
    python tests/data/traces/xla/make_profiles.py jax|tf
"""

import shutil
import sys
import time
from pathlib import Path

SLEEP_S = 0.02
HERE = Path(__file__).parent


def jax_profile() -> None:
    import jax
    import jax.numpy as jnp

    out = HERE / "jax_profile"
    shutil.rmtree(out, ignore_errors=True)
    f = jax.jit(lambda a, b: jnp.tanh(a @ b).sum())
    a = jnp.ones((64, 64))
    f(a, a).block_until_ready()
    jax.profiler.start_trace(str(out))
    for i in range(3):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            f(a, a).block_until_ready()
            time.sleep(SLEEP_S)
    jax.profiler.stop_trace()


def tf_profile() -> None:
    import tensorflow as tf

    out = HERE / "tf_profile"
    shutil.rmtree(out, ignore_errors=True)
    w = tf.Variable(tf.ones((64, 64)))

    @tf.function
    def f(x: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(tf.nn.relu(tf.matmul(x, w)))

    x = tf.ones((64, 64))
    f(x)
    tf.profiler.experimental.start(str(out))
    for i in range(3):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            f(x)
            time.sleep(SLEEP_S)
    tf.profiler.experimental.stop()


if __name__ == "__main__":
    jax_profile() if sys.argv[1] == "jax" else tf_profile()
