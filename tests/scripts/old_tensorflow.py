"""Imports a TensorFlow whose version stepscope does not know (tests/scripts/fake_tf_old on PYTHONPATH), then
marks two steps with the API; prints "trained"."""

import tensorflow

import stepscope

assert tensorflow.__version__ == "2.10.0"
for _ in stepscope.steps(range(2)):
    pass
print("trained")
