"""Trains while the disk is full for a while, really: either a file-size limit (RLIMIT_FSIZE, SIGXFSZ
ignored: every write past LIMIT bytes is short, then fails) or a filler file that fills the file system
of --fill (a small tmpfs). The disk is full from step --full-from to step --full-until (-1: to the end)."""

import argparse
import os
import resource
import signal
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--sleep", type=float, default=0.05)
    p.add_argument("--limit", type=int, default=0, help="RLIMIT_FSIZE soft limit in bytes while full")
    p.add_argument("--fill", default="", help="fill this folder's file system while full")
    p.add_argument("--full-from", type=int, default=0)
    p.add_argument("--full-until", type=int, default=-1)
    p.add_argument("--sigterm-at", type=int, default=-1)
    a = p.parse_args()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    filler = os.path.join(a.fill, "filler") if a.fill else ""

    def full(on: bool) -> None:
        if a.limit:
            resource.setrlimit(resource.RLIMIT_FSIZE, (a.limit if on else soft, hard))
        elif filler and on:
            with open(filler, "wb", buffering=0) as f:
                try:
                    while True:
                        f.write(b"\0" * 4096)
                except OSError:
                    pass
                try:
                    while True:
                        f.write(b"\0")
                except OSError:
                    pass
        elif filler:
            os.unlink(filler)

    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(a.steps):
        if step == a.full_from:
            full(True)
        if step == a.full_until:
            full(False)
        if step == a.sigterm_at:
            print("SIGTERM now", flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
        opt.zero_grad()
        model(torch.randn(8, 16)).sum().backward()
        opt.step()
        time.sleep(a.sleep)
    print(f"trained {a.steps} steps", flush=True)


if __name__ == "__main__":
    main()
