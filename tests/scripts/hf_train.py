"""A real transformers.Trainer on a tiny randomly initialised GPT-2 (no download), for the tests.

    python hf_train.py OUTPUT_DIR [--standalone STORE]
"""

import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from stepscope.integrations.huggingface import StepscopeCallback

SEQ = 16


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 64, (n, SEQ), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("output_dir")
    p.add_argument("--standalone", metavar="STORE")
    args = p.parse_args()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2))
    targs = TrainingArguments(output_dir=args.output_dir, max_steps=8, per_device_train_batch_size=4,
                              per_device_eval_batch_size=4, eval_strategy="steps", eval_steps=4, logging_steps=2,
                              learning_rate=1e-3, report_to="none", save_strategy="no", use_cpu=True,
                              disable_tqdm=True, dataloader_num_workers=0)
    cb = StepscopeCallback(name="tiny-gpt2", store=args.standalone)
    trainer = Trainer(model=model, args=targs, train_dataset=Tokens(64, 1), eval_dataset=Tokens(8, 2), callbacks=[cb])
    trainer.train()


if __name__ == "__main__":
    main()
