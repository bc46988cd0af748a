"""What the step hooks touch on a plain step, where it costs most.

On a realistic step a hook runs cold (after milliseconds of torch work its code and data are out of the caches):
every Python call and lookup it makes costs about a microsecond there, several times its cost in a loop
(benchmarks/step_phases.py). So the common step skips the calls whose answer is known without them: the
optimizer hooks' caller frame is torch's step wrapper, the forward's samples come from the fetched batch, a tuple
batch carries no tokens, and a batch's shape is read once.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from benchmarks._hotpath import measure

from stepscope.collect.core.batch import batch_size


@pytest.fixture(scope="module")
def by_function() -> dict[str, float]:
    return dict(measure(steps=40)["step"].by_function)


@pytest.mark.parametrize("fn", ["collect/torch/hooks.py:_caller", "collect/torch/modules.py:_sample_input",
                                "collect/core/batch.py:batch_tokens"])
def test_plain_step_skips_known_answers(by_function: dict[str, float], fn: str) -> None:
    # the hooks ran (each body once a step) and made no call of ``fn``
    assert by_function.get("collect/torch/hooks.py:post") == 1.0
    assert by_function.get("collect/torch/loader.py:fetched", 0.0) >= 1.0
    assert by_function.get(fn, 0.0) == 0.0, sorted(by_function.items())


class Shaped:
    """A batch whose shape is computed at each read (as a tensor's is), counting the reads."""

    dtype = "float32"

    def __init__(self, shape: tuple[int, ...]) -> None:
        self._shape = shape
        self.reads = 0

    @property
    def shape(self) -> tuple[int, ...]:
        self.reads += 1
        return self._shape


def test_batch_size_reads_the_shape_once() -> None:
    import torch

    x = Shaped((32, 3))
    assert batch_size((x, Shaped((32,)))) == 32.0
    assert x.reads == 1
    assert batch_size(Shaped(())) is None  # a scalar: no batch dimension
    assert batch_size(torch.zeros(7, 2)) == 7.0
    assert batch_size({"input_ids": torch.zeros(5, 9)}) == 5.0
    assert batch_size(("no tensor", 3)) is None
