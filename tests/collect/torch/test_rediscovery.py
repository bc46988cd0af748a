"""A model first called after model discovery ended (a second training phase with its own optimizer) is found when
its optimizer steps: the global module hooks look for it again, for a few steps only."""

from __future__ import annotations

from typing import Any

import torch

import stepscope
from tests.conftest import load


def test_a_model_first_called_after_discovery_is_found(tmp_path: Any) -> None:
    torch.manual_seed(0)
    first = torch.nn.Linear(4, 2)
    later = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.ones(5, 4)
    with stepscope.session(name="phases", store=str(tmp_path / "s")):
        for model in (first, later):  # the second is called only once the first has trained
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            for _ in range(4):
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
        from torch.nn.modules import module as m

        assert not m._global_forward_pre_hooks  # the search ended with the model found
    rank = load(tmp_path / "s").ranks[0]
    params = [m["summary"]["total_params"] for m in rank.extra.get("model", [])]
    assert params == [4 * 2 + 2, 4 * 8 + 8 + 8 * 2 + 2]
    assert len(rank.steps) == 4  # the first optimizer's steps: the second's count as optimizer time
