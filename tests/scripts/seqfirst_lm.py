"""A small LSTM language model fed sequence-first, as pytorch/examples' word_language_model does: each step's
input is ``[bptt, batch]`` (35 x 20 by default) of token ids, the LSTM has ``batch_first=False``; no DataLoader.
``--batch-first`` feeds ``[batch, bptt]`` to a ``batch_first=True`` LSTM instead (the control)."""

import argparse

import torch
from torch import nn


class LM(nn.Module):
    def __init__(self, vocab: int, batch_first: bool) -> None:
        super().__init__()
        self.encoder = nn.Embedding(vocab, 16)
        self.rnn = nn.LSTM(16, 24, num_layers=1, batch_first=batch_first)
        self.decoder = nn.Linear(24, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.encoder(x))
        return self.decoder(out)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--bptt", type=int, default=35)
    p.add_argument("--batch", type=int, default=20)
    p.add_argument("--vocab", type=int, default=50)
    p.add_argument("--batch-first", action="store_true")
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = LM(args.vocab, args.batch_first)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    shape = (args.batch, args.bptt + 1) if args.batch_first else (args.bptt + 1, args.batch)
    data = torch.randint(0, args.vocab, shape)
    loss = torch.zeros(())
    for _ in range(args.steps):
        x, y = (data[:, :-1], data[:, 1:]) if args.batch_first else (data[:-1], data[1:])
        opt.zero_grad()
        out = model(x)
        loss = nn.functional.cross_entropy(out.reshape(-1, args.vocab), y.reshape(-1))
        loss.backward()
        opt.step()
    print(f"loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
