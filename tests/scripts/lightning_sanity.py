"""A LightningModule trained without stepscope's callback (the zero-code path) with a validation loader, so
Lightning's sanity check runs 2 validation batches of 50 samples before the first training batch of 32.
128 train samples / batch 32 = 4 steps per epoch, 2 epochs; 100 validation samples / batch 50 = 2 steps.

    lightning_sanity.py [--callback]
"""

import sys

import lightning.pytorch as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def loader(n: int, batch: int) -> DataLoader:
    x = torch.randn(n, 16, generator=torch.Generator().manual_seed(n))
    return DataLoader(TensorDataset(x, x[:, :4].argmax(1)), batch_size=batch)


def main() -> None:
    torch.manual_seed(0)
    callbacks = []
    if "--callback" in sys.argv:
        from stepscope.integrations.lightning import StepscopeCallback

        callbacks.append(StepscopeCallback())
    trainer = L.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=2,
                        callbacks=callbacks)
    trainer.fit(Tiny(), loader(128, 32), loader(100, 50))
    print("lightning done")


if __name__ == "__main__":
    main()
