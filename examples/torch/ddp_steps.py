"""The PyTorch side of the elastic loop (../elastic_loop.py, shared with
train_numpy.py): a step's gradients go through DistributedDataParallel,
every bucket averaged by cohort.torch.allreduce_hook, and each world gets a
new DDP wrapper.

A step: each rank trains at most one leased shard (a rank without one runs
backward on an empty batch, as DDP needs every rank), DDP averages the
gradients through the hook, the loop adds up the loss and the samples and
all-gathers which shards the ranks trained, and every rank adds the step
alike: the averaged gradient times the world's size, the step's sum. A
killed peer fails DDP's backward with the named cohort error, and the loop
meets the others in the next world, where a new DDP wrapper goes on the
new communicator (DDP's reducer belongs to one set of ranks).
"""

import re

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import cohort.torch

# How a comm hook's cohort error reads once DDP re-raised it: "...: PeerFailed: allreduce #3 ..."
COHORT_ERROR_IN_DDP = re.compile(r"\b(PeerFailed|Closed|Timeout|Unavailable|Mismatch|InternalError): ")


def own_process_group():
    """DDP wants a torch.distributed process group, which it uses only at
    construction (to check and broadcast the parameters). The state sync does
    both through cohort, and cohort's worlds change while a torch group's
    ranks are fixed, so each worker gives DDP a group of its own, of one."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


class DDPSteps:
    """The elastic loop's steps for a model under DDP. A subclass names the
    program and gives the data: plan(), prepare(lease) (a batch (x, y); an
    empty one without a lease), epoch_line() and report(prefix). The state
    holds `model` and `params`, and add_step(grad_sum, loss, rows, shards)."""

    width = 2  # the loss sum and the samples

    def __init__(self, args, state, loss_fn):
        self.args, self.state, self.loss_fn = args, state, loss_fn
        self.ddp = None

    def enter_world(self, comm):
        own_process_group()
        self.ddp = DistributedDataParallel(self.state.model)
        self.ddp.register_comm_hook(comm, cohort.torch.allreduce_hook)

    def leave_world(self):
        self.ddp = None  # its reducer goes, and the hooks it put on the parameters

    def contribute(self, batch, out):
        x, y = batch
        self.ddp.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.ddp(x), y)
        loss.backward()  # every bucket averaged over the ranks by cohort.torch.allreduce_hook
        out[0], out[1] = float(loss), len(y)

    def rows(self, sums):
        return sums[1]

    def add_step(self, sums, shards, comm):
        # The hook averaged: times the world's size, the sum over this step's shards.
        grad = torch.cat([p.grad.reshape(-1) for p in self.state.params]).double() * comm.size
        return self.state.add_step(grad, sums[0], sums[1], shards)

    def world_failure(self, error):
        """DDP raises a failed bucket's cohort error as a RuntimeError that
        names it; any other RuntimeError is a bug, not a broken world."""
        return isinstance(error, RuntimeError) and COHORT_ERROR_IN_DDP.search(str(error)) is not None
