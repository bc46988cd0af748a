"""The training check_gpu.py observes: an MLP of three square Linear layers on one device, synthetic batches
already on the device, Adam. It measures itself with torch's own instruments and writes them to REFERENCE (JSON),
the figures stepscope's are checked against:

- ``event_ms``: per step, the CUDA-event time between the ends of two consecutive optimizer steps (an event
  recorded right after each ``opt.step()``): the same boundaries as stepscope's CUDA step timer;
- ``peak_allocated``: with ``--reset-peaks`` (the bare run: stepscope resets the peak counters at each step
  boundary itself, so only a run without it can read them), per step ``torch.cuda.max_memory_allocated()`` read
  and reset after each optimizer step;
- ``reserved_end``: ``torch.cuda.memory_reserved()`` after the last step;
- ``device_name``, ``total_memory`` and ``tf32`` as torch reports them.

    gpu_train.py --steps 600 --batch 512 --width 4096 --reference out.json [--reset-peaks] [--device cpu]
"""

import argparse
import itertools
import json

import torch
from torch import nn


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--width", type=int, required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--reset-peaks", action="store_true")
    p.add_argument("--device", default="cuda")
    args = p.parse_args()

    torch.manual_seed(0)
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    w = args.width
    model = nn.Sequential(nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    batches = [(torch.randn(args.batch, w, device=dev), torch.randn(args.batch, w, device=dev)) for _ in range(4)]
    events: list[torch.cuda.Event] = []
    peaks: list[int] = []
    for i in range(args.steps):
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        if cuda:
            ev = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            ev.record()
            events.append(ev)
            if args.reset_peaks:
                peaks.append(int(torch.cuda.max_memory_allocated()))
                torch.cuda.reset_peak_memory_stats()
    if cuda:
        torch.cuda.synchronize()
    ref = {
        "steps": args.steps, "batch": args.batch, "width": w,
        "event_ms": [a.elapsed_time(b) for a, b in itertools.pairwise(events)],  # step i+1's time
        "peak_allocated": peaks,
        "reserved_end": int(torch.cuda.memory_reserved()) if cuda else None,
        "device_name": torch.cuda.get_device_name(dev) if cuda else None,
        "total_memory": int(torch.cuda.get_device_properties(dev).total_memory) if cuda else None,
        "tf32": bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest",
        "loss": float(loss.detach()),
    }
    with open(args.reference, "w") as f:
        json.dump(ref, f)


if __name__ == "__main__":
    main()
