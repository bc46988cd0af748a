"""Uses the Python API: session with a role, steps(), nested regions, timed methods, log()."""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import stepscope


class Trainer:
    def __init__(self) -> None:
        self.model = nn.Linear(8, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)

    @stepscope.timed
    def update(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.opt.zero_grad()
        with stepscope.region("forward"), stepscope.region("loss"):
            loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        self.opt.step()
        return float(loss.item())


@stepscope.timed("rollout")
def rollout() -> None:
    sum(range(1000))


def main() -> None:
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(40, 8), torch.randn(40, 1)), batch_size=4)
    trainer = Trainer()
    losses = []
    with stepscope.session(name="ppo", role="learner", params={"lr": 0.01}):
        for x, y in stepscope.steps(loader):
            rollout()
            loss = trainer.update(x, y)
            losses.append(loss)
            stepscope.log(loss=loss, reward=len(losses))
    print(f"LAST_LOSS {losses[-1]!r}", file=sys.stderr)


if __name__ == "__main__":
    main()
