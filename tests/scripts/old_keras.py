"""Imports a Keras whose version stepscope does not know (tests/scripts/fake_keras2 on PYTHONPATH), then
marks two steps with the API; prints "trained"."""

import keras

import stepscope

assert keras.__version__ == "2.15.0"
for _ in stepscope.steps(range(2)):
    pass
print("trained")
