"""A LightningModule trained without stepscope's callback: Lightning's automatic optimisation runs
forward and backward inside ``optimizer.step(closure)``. 16 steps (2 epochs of 8), CPU, no validation."""

import lightning.pytorch as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(64, 16)
    data = DataLoader(TensorDataset(x, x[:, :4].argmax(1)), batch_size=8)
    trainer = L.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0)
    trainer.fit(Tiny(), data)
    print("lightning done")


if __name__ == "__main__":
    main()
