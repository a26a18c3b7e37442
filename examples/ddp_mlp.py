"""Data-parallel training on `tpu` with PyTorch's DistributedDataParallel.

    python examples/ddp_mlp.py --ranks 4 [--model transformer] [--steps 5] [--parallel fsdp]
    torchrun --nproc-per-node 2 examples/ddp_mlp.py

Each rank is a thread driving its own device (`EAGERTPU_DEVICE_COUNT` gives
the CPU plugin that many; this script asks for one per rank), or, under
torchrun, a process (its collectives then run on gloo over host copies: the
CPU plugin has no collectives across processes). Every rank
trains a copy of one model on its shard of a global batch; DDP all-reduces the
gradients through the `eagertpu` backend (or, with `--parallel fsdp`, FSDP2's
`fully_shard` shards the parameters and all-gathers them for each layer). Rank 0 does work of its own between
steps (it reads the loss every other step and builds tensors the others do
not), so the ranks run different op streams between collectives (MPMD).

Ends with one JSON line: the largest difference between any rank's
parameters and those of one process trained on the whole batch,
{"ranks": N, "max_param_diff_vs_single": x, "mpmd": true, "steps": n}.
"""

import argparse
import copy
import json
import os
import sys


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--model", choices=["mlp", "transformer"], default="mlp")
    p.add_argument("--parallel", choices=["ddp", "fsdp"], default="ddp")
    p.add_argument("--batch-per-rank", type=int, default=8)
    return p.parse_args()


ARGS = parse()
# torchrun starts one process per rank and says which in the environment.
TORCHRUN = "RANK" in os.environ and "WORLD_SIZE" in os.environ
if TORCHRUN:
    ARGS.ranks = int(os.environ["WORLD_SIZE"])
# Devices are fixed when the runtime starts: one per rank in this process.
os.environ.setdefault("EAGERTPU_DEVICE_COUNT", "1" if TORCHRUN else str(ARGS.ranks))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import eagertpu  # noqa: E402
from eagertpu.distributed import spawn_threads  # noqa: E402

FEATURES, CLASSES, SEQ = 16, 4, 6


class TinyTransformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(FEATURES, 32)
        self.block = torch.nn.TransformerEncoderLayer(32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(32, CLASSES)

    def forward(self, x):
        return self.head(self.block(self.embed(x)).mean(dim=1))


def make_model():
    torch.manual_seed(0)
    if ARGS.model == "mlp":
        return torch.nn.Sequential(
            torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
            torch.nn.Linear(64, CLASSES),
        )
    return TinyTransformer()


def make_data(global_batch):
    g = torch.Generator().manual_seed(1)
    shape = (ARGS.steps, global_batch, FEATURES) if ARGS.model == "mlp" else (ARGS.steps, global_batch, SEQ, FEATURES)
    return torch.randn(shape, generator=g), torch.randint(0, CLASSES, (ARGS.steps, global_batch), generator=g)


def train_single(model, xs, ys):
    """The reference: one process, the whole batch, on the CPU."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in zip(xs, ys):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


def parallel(base, device):
    """`base` on `device`, data-parallel: DDP, or FSDP2 with each layer sharded."""
    if ARGS.parallel == "ddp":
        return DDP(copy.deepcopy(base).to(device))
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("tpu", (ARGS.ranks,))
    model = copy.deepcopy(base).to(device)
    for layer in model.children():
        if any(p.requires_grad for p in layer.parameters()):
            fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def full_parameters(model):
    """Each parameter whole, on the host (FSDP2's are DTensor shards)."""
    params = model.module.parameters() if isinstance(model, DDP) else model.parameters()
    return [(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().cpu() for p in params]


def train_rank(rank, base, xs, ys):
    device = torch.device("tpu", rank % torch.tpu.device_count())
    model = parallel(base, device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    shard = slice(rank * ARGS.batch_per_rank, (rank + 1) * ARGS.batch_per_rank)
    for step, (x, y) in enumerate(zip(xs, ys)):
        opt.zero_grad()
        # DDP averages gradients over ranks: the mean loss of a shard, averaged,
        # is the mean loss of the whole batch.
        loss = F.cross_entropy(model(x[shard].to(device)), y[shard].to(device))
        loss.backward()
        opt.step()
        if rank == 0:
            # Work only rank 0 does: other ops, host reads.
            norm = torch.stack([p.detach().to_local().norm() if hasattr(p, "to_local") else p.detach().norm()
                                for p in model.parameters()]).sum()
            if step % 2 == 0:
                print(f"step {step}: loss {loss.item():.4f}, parameter norm {norm.item():.3f}", file=sys.stderr)
    return full_parameters(model)


def largest_difference(per_rank, expected):
    return max(
        ((p - e).abs().max() / e.abs().max().clamp_min(1e-12)).item()
        for params in per_rank
        for p, e in zip(params, expected)
    )


def main():
    base = make_model()
    xs, ys = make_data(ARGS.ranks * ARGS.batch_per_rank)
    expected = train_single(copy.deepcopy(base), xs, ys)
    if TORCHRUN:
        dist.init_process_group("cpu:gloo,tpu:eagertpu")
        rank = dist.get_rank()
        # A tpu tensor: eagertpu's backend runs gloo on a host copy made in
        # C++. Not a CPU tensor straight to gloo: gloo's worker thread drops
        # its reference to the tensor after the wait returns, and when the
        # process is exiting by then, taking the GIL to release the tensor's
        # Python object aborts it (PyTorch's race, seen 1 run in 10).
        diff = torch.tensor([largest_difference([train_rank(rank, base, xs, ys)], expected)], device="tpu")
        dist.all_reduce(diff, op=dist.ReduceOp.MAX)
        dist.destroy_process_group()
        if rank != 0:
            return
        diff = diff.item()
    else:
        diff = largest_difference(spawn_threads(train_rank, ARGS.ranks, args=(base, xs, ys)), expected)
    fallbacks = eagertpu.fallbacks()
    if fallbacks:
        print(f"ops that ran on the CPU: {fallbacks}", file=sys.stderr)
    print(json.dumps({"ranks": ARGS.ranks, "max_param_diff_vs_single": diff, "mpmd": True, "steps": ARGS.steps}))


if __name__ == "__main__":
    main()
