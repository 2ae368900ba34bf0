"""PyTorch glue, imported only when used (``import cohort.torch``), so that
``import cohort`` never needs torch.

Communicator calls take contiguous CPU tensors directly (float32, float64,
float16, bfloat16, int32, int64, uint8), in place or out of place, with no
copy: cohort works on the tensor's own memory. This module adds what a
training program needs on top:

- ``allreduce_hook``: a DistributedDataParallel communication hook that
  averages each gradient bucket through a cohort Communicator, asynchronously,
  so DDP overlaps the all-reduce with the rest of backward as it does with
  its own backends::

      model = DistributedDataParallel(net)
      model.register_comm_hook(comm, cohort.torch.allreduce_hook)

  A failure (a dead peer, an aborted world) fails the bucket's future with
  the named cohort error; DDP raises it from backward() as a RuntimeError
  whose message starts with the cohort exception's name and message
  ("... PeerFailed: allreduce #3 (shm, ...) on rank 0: rank 1 ... died").
- ``broadcast_parameters(module, comm, root=0)`` and
  ``allreduce_gradients(module, comm)`` for programs without DDP.
- ``ElasticSampler`` (torch_sampler.py), a resumable DistributedSampler on
  cohort's epoch order, and ``ShardDataset`` (torch_shards.py), an
  IterableDataset over the coordinator's shard leases; both have a
  state_dict() so that a checkpoint carries the data position.
"""

import threading
import weakref

import torch

from .errors import InvalidArgument
from .torch_sampler import ElasticSampler
from .torch_shards import ShardDataset

__all__ = ["allreduce_hook", "broadcast_parameters", "allreduce_gradients", "ElasticSampler",
           "ShardDataset"]


class _Pending:
    """One communicator's all-reduces issued by the hook in this backward
    pass, with their futures. DDP calls the hook bucket by bucket in index
    order and waits on the futures only after the last one, so the last
    bucket's hook completes them all, in issue order, on DDP's own thread:
    no thread of ours to hand each result over (on a machine whose cores
    the ranks already fill, such a thread cost a quarter of the step)."""

    def __init__(self):
        self.items = []

    def complete(self):
        items, self.items = self.items, []
        for work, future, result in items:
            try:
                work.wait()
            except BaseException as e:  # the named cohort error, for whoever waits on the future
                future.set_exception(e)
            else:
                future.set_result(result)


_pending = weakref.WeakKeyDictionary()
_pending_lock = threading.Lock()


def _pending_of(comm):
    with _pending_lock:
        p = _pending.get(comm)
        if p is None:
            p = _pending[comm] = _Pending()
        return p


def allreduce_hook(comm, bucket):
    """DDP communication hook: averages `bucket`'s gradients over `comm`'s
    ranks. Register with ``model.register_comm_hook(comm, allreduce_hook)``;
    every rank of the communicator must run the same model. Each bucket's
    all-reduce starts as soon as DDP hands it over and runs while backward
    goes on; the futures complete when the last bucket arrives."""
    tensor = bucket.buffer()
    future = torch.futures.Future()
    pending = _pending_of(comm)
    try:
        work = comm.allreduce_async(tensor, op="avg")
    except BaseException as e:
        future.set_exception(e)
    else:
        pending.items.append((work, future, tensor))
    if bucket.is_last():
        pending.complete()
    # DDP's reducer reads the future from C++, where an exception stored
    # with set_exception is only an object it cannot cast to a tensor. A
    # callback that re-raises it makes the chained future fail for real,
    # with the cohort error's name and message in DDP's RuntimeError.
    return future.then(_unwrap)


def _unwrap(future):
    return future.value()


def _check_module(where, module):
    if not isinstance(module, torch.nn.Module):
        raise InvalidArgument(f"{where}: module must be a torch.nn.Module, not {type(module).__name__}")


def broadcast_parameters(module, comm, root=0):
    """Makes every rank's parameters and buffers equal to rank `root`'s, in
    place (in name order, so every rank sends the same sequence)."""
    _check_module("broadcast_parameters", module)
    with torch.no_grad():
        for _, tensor in sorted(list(module.named_parameters()) + list(module.named_buffers()),
                                key=lambda item: item[0]):
            comm.broadcast(tensor.detach(), root=root)


def allreduce_gradients(module, comm, op="avg"):
    """Reduces every parameter's gradient over the ranks (average by
    default), packed into few messages; a parameter without a gradient on
    this rank takes part with zeros, so ranks never disagree on the set."""
    _check_module("allreduce_gradients", module)
    grads = {}
    for name, p in module.named_parameters():
        if not p.requires_grad:
            continue
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        grads[name] = p.grad.detach()
    comm.allreduce_named(grads, op=op)
