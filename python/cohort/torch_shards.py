"""ShardDataset: a torch IterableDataset over the coordinator's shard queue
(docs/coordinator.md#dataset-shards). Imported only when used (through
``cohort.torch``), so ``import cohort`` never needs torch.

The coordinator decides which member reads which shard: it leases shards,
gives a failed member's leases back to the queue and counts each shard of
an epoch done once. This dataset asks for leases, yields each shard's items
through the user's load_shard(lease), and reports the shard done once its
last item was handed out.

A pass (one ``iter()``) serves one epoch, the epoch of its first lease. The
coordinator starts leasing the next epoch's shards once every shard of the
current one is leased, so a pass ends when a lease of a later epoch comes
(kept for the next pass) or the queue is finished. While every shard left
is leased to other members the pass waits, polling: one of them may fail
and its shards come back. A shard of an earlier epoch given back that way
is served in whichever pass gets it.

Resume. state_dict() holds the epoch, the shards this member finished (by
epoch), the lease in progress with how many of its items were handed out,
and a lease kept for the next pass. After load_state_dict() the next pass
first yields the rest of the shard in progress (load_shard must give the
same items in the same order again) and reports it under its old lease;
whoever reports a shard first counts it, so if the coordinator had given it
to another member meanwhile, both read it and it still counts once. A shard
the state lists as finished is never yielded again, even if a coordinator
that lost its progress hands it out again: it is reported done at once.

Leases belong to the member, so use it with DataLoader(num_workers=0) and
do the heavy loading inside load_shard (or in a map over its items).

Reading ahead. With a cohort.data.ShardLoader as the source, the shards'
bytes are read by the loader's I/O threads ahead of the loop, as many as
its prefetch depth allows, and load_shard(lease) finds them in
lease["data"] (without load_shard, each shard is one item: its bytes). The
loader's waits are the member's data_wait. A shard resumed from a saved
state, which no lease of the loader holds, is read by load_state_dict's
next pass on the calling thread (ShardLoader.read_shard).
"""

import itertools
import time

import torch.utils.data

from .coordinator import CoordinatorClient
from .errors import InvalidArgument, NotFound

__all__ = ["ShardDataset"]

STATE_VERSION = 1
LEASE_KEYS = ("lease", "shard", "shard_id", "epoch", "bytes")


class _ClientSource:
    """A CoordinatorClient with its job and member, speaking as Membership does."""

    def __init__(self, client, job, member):
        self.client, self.job, self.member = client, job, member

    def next_shard(self):
        return self.client.next_shard(self.job, self.member)

    def shard_done(self, lease):
        return {"counted": self.client.shard_done(self.job, self.member, lease)}


class _LoaderSource:
    """A ShardLoader: leases whose shards' bytes are read ahead, in "data"."""

    def __init__(self, loader):
        self.loader = loader

    def next_shard(self):
        return self.loader.next_shard_lease()

    def shard_done(self, lease):
        return self.loader.shard_done(lease)

    def data(self, lease):
        """The bytes of a lease's shard: read ahead, or now for a restored lease."""
        if lease.get("data") is not None:
            return lease["data"]
        return self.loader.read_shard(lease["shard"])


def _bytes_as_item(lease):
    return [lease["data"]]


class ShardDataset(torch.utils.data.IterableDataset):
    """The items of the shards leased to a member. source: a
    cohort.Membership, or a cohort.CoordinatorClient with job= and member=.
    load_shard(lease) -> iterable of items, where lease is a dict with
    "shard" (its index in the plan), "shard_id", "epoch", "bytes", "lease".
    With a cohort.data.ShardLoader as the source, lease["data"] holds the
    shard's bytes, read ahead, and load_shard may be None (one item per
    shard: its bytes). poll_interval: seconds between two asks while other
    members hold every shard left."""

    def __init__(self, source, load_shard=None, *, job=None, member=None, poll_interval=0.05):
        super().__init__()
        from .shard_loader import ShardLoader

        self._loader = None
        if isinstance(source, ShardLoader):
            if job is not None or member is not None:
                raise InvalidArgument("job= and member= go with a CoordinatorClient source only")
            source = self._loader = _LoaderSource(source)
            if load_shard is None:
                load_shard = _bytes_as_item
        elif isinstance(source, CoordinatorClient):
            if job is None or member is None:
                raise InvalidArgument("a CoordinatorClient source needs job= and member=")
            source = _ClientSource(source, job, member)
        elif job is not None or member is not None:
            raise InvalidArgument("job= and member= go with a CoordinatorClient source only")
        if not (hasattr(source, "next_shard") and hasattr(source, "shard_done")):
            raise InvalidArgument(f"the source must be a Membership or a CoordinatorClient, "
                                  f"not {source!r}")
        if not callable(load_shard):
            raise InvalidArgument(f"load_shard must be callable, not {load_shard!r}")
        self._source = source
        self._load_shard = load_shard
        self.poll_interval = float(poll_interval)
        self.epoch = None       # the epoch of the last pass; None before the first
        self.finished = False   # the queue said every epoch is done
        self._completed = {}    # epoch -> set of shard indices this member finished
        self._current = None    # the lease being yielded, with "position" (items handed out)
        self._pending = None    # a lease of a later epoch, for the next pass
        self.reports = []       # (epoch, shard, counted) for each shard reported, in order

    # -- leases

    def _next_lease(self):
        """A granted lease, or None once the queue is finished."""
        if self._pending is not None:
            lease, self._pending = self._pending, None
            return lease
        while True:
            answer = self._source.next_shard()
            if answer.get("granted"):
                lease = {key: answer[key] for key in LEASE_KEYS}
                if "data" in answer:
                    lease["data"] = answer["data"]
                return lease
            if answer.get("finished"):
                self.finished = True
                return None
            time.sleep(self.poll_interval)

    def _report(self, lease, restored):
        try:
            counted = bool(self._source.shard_done(lease["lease"])["counted"])
        except (InvalidArgument, NotFound):
            # A lease from a saved state that the coordinator no longer knows as
            # this member's: the shard went back to the queue and is served again.
            if not restored:
                raise
            counted = False
        self._completed.setdefault(lease["epoch"], set()).add(lease["shard"])
        self.reports.append((lease["epoch"], lease["shard"], counted))

    def _begin(self, epoch):
        self.epoch = epoch
        # The queue leases at most one epoch ahead, so older lists cannot come back.
        for old in [e for e in self._completed if e < epoch - 1]:
            del self._completed[old]

    # -- iteration

    def __iter__(self):
        first = True
        while True:
            current = self._current
            if current is None:
                lease = self._next_lease()
                if lease is None:
                    return
                if not first and lease["epoch"] > self.epoch:
                    self._pending = lease
                    return
                restored = lease.pop("restored", False)  # a pending lease from a saved state
                current = self._current = dict(lease, position=0, restored=restored)
            if first:
                self._begin(current["epoch"])
                first = False
            yield from self._serve(current)
            self._current = None

    def _serve(self, current):
        lease = {key: current[key] for key in LEASE_KEYS}
        if current["shard"] not in self._completed.get(current["epoch"], ()):
            given = dict(lease)
            if self._loader is not None:
                given["data"] = self._loader.data(current)
            items = iter(self._load_shard(given))
            for item in itertools.islice(items, current["position"], None):
                current["position"] += 1  # counted when handed out
                yield item
        self._report(lease, current["restored"])

    # -- state

    def state_dict(self):
        """{"epoch", "completed": {epoch: [shards]}, "current": the lease in
        progress with "position" or None, "pending": a lease for the next
        pass or None}; plain ints and strings, for torch.save or JSON."""
        current = None
        if self._current is not None:
            current = {key: self._current[key] for key in LEASE_KEYS + ("position",)}
        return {"version": STATE_VERSION, "epoch": self.epoch, "finished": self.finished,
                "completed": {e: sorted(s) for e, s in self._completed.items()},
                "current": current,
                "pending": None if self._pending is None else
                {key: self._pending[key] for key in LEASE_KEYS}}

    def load_state_dict(self, state):
        """Continues after `state`: the shard in progress first, from its
        position; finished shards are never yielded again."""
        for key in ("epoch", "completed", "current", "pending"):
            if key not in state:
                raise InvalidArgument(f"a shard dataset state needs {key!r}")
        self.epoch = state["epoch"]
        self.finished = bool(state.get("finished", False))
        self._completed = {int(e): set(s) for e, s in state["completed"].items()}
        current = state["current"]
        self._current = None if current is None else dict(current, restored=True)
        pending = state["pending"]
        self._pending = None if pending is None else dict(pending, restored=True)
