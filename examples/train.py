"""The main job: plain PyTorch training code on torch.device("tpu").

A small transformer language model learns a synthetic sequence rule
(each token is 3 * previous + 1 mod the vocabulary, from a random start).
Nothing in the model or the loop knows about EagerTPU: `import torch` loads
the tpu device (the torch.backends entry point). At the end it prints the
metrics report and, as its last line, a JSON summary.

    EAGERTPU_MODE=debug|strict|fused (default fused)  .venv/bin/python examples/train.py [--steps N]
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, SEQ, BATCH, WIDTH = 64, 32, 16, 64


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Parameter(torch.zeros(SEQ, WIDTH))
        layer = nn.TransformerEncoderLayer(WIDTH, nhead=4, dim_feedforward=4 * WIDTH, dropout=0.1,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)
        mask = torch.triu(torch.full((SEQ, SEQ), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask)

    def forward(self, tokens):
        h = self.embed(tokens) + self.pos
        h = self.encoder(h, mask=self.mask, is_causal=True)
        return self.head(self.norm(h))


def batch(generator):
    start = torch.randint(0, VOCAB, (BATCH, 1), generator=generator)
    tokens = start.clone()
    for _ in range(SEQ):
        tokens = torch.cat([tokens, (tokens[:, -1:] * 3 + 1) % VOCAB], dim=1)
    return tokens[:, :-1], tokens[:, 1:]


def progress(step, steps, loss, started):
    width = 30
    done = int(width * step / steps)
    rate = step / max(time.perf_counter() - started, 1e-9)
    bar = "#" * done + "-" * (width - done)
    end = "\n" if step == steps or not sys.stdout.isatty() else ""
    if sys.stdout.isatty() or step % 10 == 0 or step == steps:
        print(f"\r[{bar}] {step:4d}/{steps}  loss {loss:.4f}  {rate:5.1f} steps/s", end=end, flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--device", default="tpu")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    model = TinyLM().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    data = torch.Generator().manual_seed(1)

    mode = os.environ.get("EAGERTPU_MODE", "fused")
    print(f"training a {sum(p.numel() for p in model.parameters())}-parameter transformer on {device} ({mode} mode)")
    losses = []
    started = time.perf_counter()
    for step in range(1, args.steps + 1):
        x, y = batch(data)
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        progress(step, args.steps, losses[-1], started)
    assert all(math.isfinite(v) for v in losses), losses

    summary = {"first_loss": round(losses[0], 6), "last_loss": round(losses[-1], 6), "steps": args.steps, "mode": mode}
    if device.type == "tpu":
        import eagertpu

        print(eagertpu.metrics_report(), end="")
        m = eagertpu.metrics()
        summary.update(compiles=m["compiles"], cache_hits=m["cache_hits"], fallbacks=sum(m["fallbacks"].values()))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
