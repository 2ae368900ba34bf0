"""One rank of test_torch's DDP cases: trains the same small MLP twice on
the same data, with DistributedDataParallel over torch's gloo (the
reference) and over cohort's comm hook, and prints the final parameters of
both as JSON, plus what a failing hook reported.

    torch_ddp_worker.py RANK SIZE GLOO_PORT COHORT_STORE MODE
MODE: "train"; "abort" (the cohort communicator is aborted before the
backward pass, which must raise the named error); or "kill" (rank 1 dies
before its backward pass: rank 0's must raise an error naming it)."""

import os

import json
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import _support  # noqa: F401  (puts cohort on sys.path)
import cohort
import cohort.torch

rank, size, port, store, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size)
comm = cohort.Communicator(rank, size, store, timeout=30, connect_timeout=30)


def model():
    torch.manual_seed(7)  # the same start on every rank and in both runs
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def batches():
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    return [(torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)) for _ in range(5)]


def train(hook):
    net = DistributedDataParallel(model(), bucket_cap_mb=0.001)  # several buckets
    if hook:
        net.register_comm_hook(comm, cohort.torch.allreduce_hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in batches():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return [p.detach().flatten().tolist() for p in net.module.parameters()]


if mode == "train":
    out = {"gloo": train(False), "cohort": train(True)}
else:
    net = DistributedDataParallel(model())
    net.register_comm_hook(comm, cohort.torch.allreduce_hook)
    x, y = batches()[0]
    loss = torch.nn.functional.cross_entropy(net(x), y)
    if mode == "abort":
        comm.abort("the test aborted the world")
    elif rank == 1:
        os._exit(9)  # dies without a word, as a SIGKILLed worker would
    try:
        loss.backward()
        out = {"error": None}
    except Exception as e:  # DDP re-raises what the hook's future carried
        out = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(out), flush=True)
comm.close()
dist.destroy_process_group()
