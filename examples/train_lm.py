"""A tiny transformer language model on synthetic tokens, with stepscope regions and logged loss.

    stepscope run -- python examples/train_lm.py --steps 60
"""

import argparse

import torch
from torch import nn

import stepscope


class TinyLM(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, heads: int, context: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, context, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, dim * 4, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(context), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) + self.pos[:, : ids.shape[1]]
        return self.head(self.blocks(x, mask=self.mask[: ids.shape[1], : ids.shape[1]], is_causal=True))


def batches(steps: int, batch: int, context: int, vocab: int):
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        # a learnable pattern: each sequence counts up from a random start
        start = torch.randint(0, vocab, (batch, 1), generator=g)
        ids = (start + torch.arange(context + 1)) % vocab
        yield {"input_ids": ids[:, :-1], "labels": ids[:, 1:]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    args = p.parse_args()

    torch.manual_seed(0)
    model = TinyLM(args.vocab, args.dim, args.layers, heads=4, context=args.context)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    for batch in stepscope.steps(batches(args.steps, args.batch_size, args.context, args.vocab)):
        with stepscope.region("forward"):
            logits = model(batch["input_ids"])
            loss = loss_fn(logits.reshape(-1, args.vocab), batch["labels"].reshape(-1))
        with stepscope.region("backward"):
            opt.zero_grad()
            loss.backward()
        with stepscope.region("optimizer"):
            opt.step()
        stepscope.log(loss=loss.item())
    print(f"final loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
