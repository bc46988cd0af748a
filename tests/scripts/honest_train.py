"""Training loops that used to mislead stepscope's figures (issue 18), one per mode:

    gan        two models, two optimizers (the discriminator's steps first, as dcgan); the generator's
               forward sleeps 20 ms so its timing is visible
    peek       the DDP tutorial's ``len(next(iter(loader))[0])`` at the start of each of 3 epochs
    api-steps  ``for batch in stepscope.steps(loader)`` over 2 epochs
    no-loader  tensors made by the script (batch 8), no DataLoader
    by-hand    parameters updated by hand (no optimizer), no stepscope call
    lstm       an LSTM language model (FLOPs of RNN layers)
    many-ops   40 steps of 2,000 tiny ops each (a profiler trace that takes long to write) and a
               5 ms sleep, from a DataLoader of 8 batches per epoch
"""

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def loader(n: int = 64, batch: int = 8) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 16, generator=g)
    return DataLoader(TensorDataset(x, x[:, :4].argmax(1)), batch_size=batch)


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


class SlowGenerator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 16))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        time.sleep(0.02)
        return self.net(z)


def gan(steps: int) -> None:
    g, d = SlowGenerator(), nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(), nn.Linear(32, 1))
    opt_d = torch.optim.Adam(d.parameters(), lr=1e-3)
    opt_g = torch.optim.Adam(g.parameters(), lr=1e-3)
    bce = nn.BCEWithLogitsLoss()
    real = torch.randn(8, 16)
    ones, zeros = torch.ones(8, 1), torch.zeros(8, 1)
    for _ in range(steps):
        fake = g(torch.randn(8, 8))
        opt_d.zero_grad()
        (bce(d(real), ones) + bce(d(fake.detach()), zeros)).backward()
        opt_d.step()
        opt_g.zero_grad()
        bce(d(fake), ones).backward()
        opt_g.step()


def supervised(epochs: int, *, peek: bool = False, api: bool = False) -> None:
    import stepscope

    data = loader()
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(epochs):
        if peek:
            b_sz = len(next(iter(data))[0])
            assert b_sz == 8
        for x, y in (stepscope.steps(data) if api else data):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()


def no_loader(steps: int) -> None:
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def by_hand(steps: int) -> None:
    model = mlp()
    for _ in range(steps):
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        model.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad


class LstmLM(nn.Module):
    def __init__(self, vocab: int = 50, emb: int = 16, hidden: int = 32, layers: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, num_layers=layers, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


def lstm(steps: int) -> None:
    model = LstmLM()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randint(0, 50, (4, 10))  # batch 4, sequence 10
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten()).backward()
        opt.step()


def many_ops(steps: int) -> None:
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = loader(64, 8)
    done = 0
    while done < steps:
        for x, y in data:
            opt.zero_grad()
            h = x
            for _ in range(1000):
                h = h * 1.0 + 0.0
            nn.functional.cross_entropy(model(h), y).backward()
            time.sleep(0.005)
            opt.step()
            done += 1
            if done == steps:
                break


def main() -> None:
    mode = sys.argv[1]
    torch.manual_seed(0)
    if mode == "gan":
        gan(12)
    elif mode == "peek":
        supervised(3, peek=True)
    elif mode == "api-steps":
        supervised(2, api=True)
    elif mode == "no-loader":
        no_loader(12)
    elif mode == "by-hand":
        by_hand(6)
    elif mode == "lstm":
        lstm(8)
    elif mode == "many-ops":
        many_ops(40)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(f"{mode} done")


if __name__ == "__main__":
    main()
