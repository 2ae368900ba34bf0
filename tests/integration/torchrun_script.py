#!/usr/bin/env python3
"""A training script written for torchrun, the way torch's elastic examples
are (the imagenet example's "train with checkpoints"): it reads its place
from LOCAL_RANK, RANK and WORLD_SIZE, forms its process group with
init_method="env://" (MASTER_ADDR, MASTER_PORT), trains a small model
wrapped in DistributedDataParallel over a DistributedSampler, and on every
start loads the checkpoint that rank 0 writes after each epoch, so that a
restarted job resumes where it left off. Nothing in it knows cohort.

    torchrun --nproc-per-node 2 torchrun_script.py --checkpoint-file /tmp/ckpt.pt
    cohort-run --standalone --nproc-per-node 2 --restart all -- python3 torchrun_script.py ...

For tests only: TORCHRUN_SCRIPT_CRASH=LOCAL_RANK@EPOCH makes that local
worker kill itself (SIGKILL) as it starts that epoch (-1: before it forms
its process group), at its first start only (TORCHELASTIC_RESTART_COUNT
0), as torch's own elastic tests steer their workers through the
environment.
"""

import argparse
import os
import signal
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint-file", required=True, help="where rank 0 saves, and every rank loads, the state")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="sleep after each step (slows the run down)")
    return parser.parse_args()


def synthetic_dataset(samples):
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(samples, 8, generator=g)
    w = torch.randn(8, 1, generator=g)
    y = x @ w + 0.01 * torch.randn(samples, 1, generator=g)
    return TensorDataset(x, y)


def load_checkpoint(path, model, optimizer):
    """The epoch to start from: 0 without a checkpoint."""
    if not os.path.isfile(path):
        return 0
    state = torch.load(path, map_location="cpu")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["epoch"]


def save_checkpoint(path, model, optimizer, epoch):
    """Written aside, then renamed over the old one: never half a file."""
    tmp = f"{path}.tmp"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, tmp)
    os.replace(tmp, path)


def crash_if_asked(local_rank, epoch):
    spec = os.environ.get("TORCHRUN_SCRIPT_CRASH", "")
    if not spec or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return
    who, at = (int(v) for v in spec.split("@"))
    if who == local_rank and at == epoch:
        print(f"local rank {local_rank}: crashing at epoch {epoch} (TORCHRUN_SCRIPT_CRASH)", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


def main():
    args = parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    crash_if_asked(local_rank, -1)
    dist.init_process_group(backend="gloo", init_method="env://")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    print(f"rank {rank} of {world_size} (local rank {local_rank}, restart {restart}, "
          f"master {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']})", flush=True)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    start_epoch = load_checkpoint(args.checkpoint_file, model, optimizer)
    if start_epoch > 0:
        print(f"rank {rank}: resumed from checkpoint {args.checkpoint_file} at epoch {start_epoch}", flush=True)
    ddp_model = DistributedDataParallel(model)

    dataset = synthetic_dataset(args.samples)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    for epoch in range(start_epoch, args.epochs):
        crash_if_asked(local_rank, epoch)
        sampler.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.mse_loss(ddp_model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
            if args.step_seconds > 0:
                time.sleep(args.step_seconds)
        if rank == 0:
            save_checkpoint(args.checkpoint_file, model, optimizer, epoch + 1)
        dist.barrier()  # the checkpoint is on disk before anyone starts the next epoch
        print(f"rank {rank}: epoch {epoch} done, mean loss {total / len(loader):.6f}", flush=True)

    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    print(f"rank {rank}: finished {args.epochs} epochs in a world of {world_size}, "
          f"parameter checksum {checksum:.12f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
