"""A tiny LightningModule with training and validation (CPU, seconds) for the integration tests.

    python lightning_train.py [--standalone STORE] [--devices N] [--profiler] [--val-work N]

``--val-work N``: each validation batch also runs a pure-Python loop of N iterations (CPU time in validation).
"""

import argparse

import lightning.pytorch as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from stepscope.integrations.lightning import StepscopeCallback, StepscopeProfiler


class Tiny(L.LightningModule):
    def __init__(self, hidden: int = 32, val_work: int = 0) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["val_work"])
        self.val_work = val_work
        self.net = nn.Sequential(nn.Linear(16, hidden), nn.ReLU(), nn.Linear(hidden, 4))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        acc = 0
        for i in range(self.val_work):
            acc += i % 7
        self.log("val_loss", nn.functional.cross_entropy(self(x), y) + acc * 0)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def loader(n: int, batch: int) -> DataLoader:
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, 16, generator=g)
    return DataLoader(TensorDataset(x, (x[:, :4]).argmax(1)), batch_size=batch)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--standalone", metavar="STORE")
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--profiler", action="store_true")
    p.add_argument("--val-work", type=int, default=0)
    args = p.parse_args()
    torch.manual_seed(0)
    cb = StepscopeCallback(name="tiny-lightning", tags={"suite": "test"}, store=args.standalone)
    trainer = L.Trainer(max_epochs=args.epochs, accelerator="cpu", devices=args.devices,
                        strategy="ddp" if args.devices > 1 else "auto", callbacks=[cb],
                        profiler=StepscopeProfiler() if args.profiler else None, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=2, log_every_n_steps=1)
    # 80 train samples / batch 8 = 10 steps per epoch; 24 validation samples / batch 6 = 4 steps
    trainer.fit(Tiny(val_work=args.val_work), loader(80, 8), loader(24, 6))


if __name__ == "__main__":
    main()
