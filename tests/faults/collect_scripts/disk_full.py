"""Trains under a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored): every record write past LIMIT bytes
is short or fails, as on a full disk. argv: LIMIT STEPS STEP_SLEEP [--sigterm-at N]"""

import os
import resource
import signal
import sys
import time

import torch


def main() -> None:
    limit, steps, sleep = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    term_at = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--sigterm-at" else -1
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        if step == term_at:
            print("SIGTERM now", flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
        opt.zero_grad()
        model(torch.randn(8, 16)).sum().backward()
        opt.step()
        time.sleep(sleep)
    print(f"trained {steps} steps", flush=True)


if __name__ == "__main__":
    main()
