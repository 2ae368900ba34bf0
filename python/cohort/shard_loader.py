"""ShardLoader: the shards the coordinator leases to this member, read ahead
of the training loop (docs/data.md, "ShardReader and ShardLoader"), over the
C ShardReader: a thread of the library leases shards of the job's dataset
plan and reads each one's byte ranges of the dataset's files on I/O threads,
keeping as many shards ahead as the prefetch depth allows.

    shards = cohort.split_shards(dataset, shard_count=64)
    client.register_dataset(job, cohort.data.ShardLoader.plan(shards, epochs=3))
    with cohort.data.ShardLoader(member, shards, root="/data") as loader:
        for shard in loader:             # shard.data: the shard's bytes
            train_on(shard.data)
            member.record_step(step, step_time=dt)   # data_wait: the loader's

Iterating reports each shard done when the next one is asked for (and the
last when the iteration ends), so a shard counts once the loop is through
with it. The waits of a loader over a Membership reach the member's
heartbeats by themselves: each becomes part of the next recorded step's
data_wait when record_step leaves it None. At close(), shards leased ahead
and never handed out, or handed out and not done, are given back to the
coordinator (release_on_close), so the next member that asks gets them;
otherwise they go back to its queue when their lease expires, or at once
when the member leaves.
"""

import ctypes
import json
import os
from ctypes import POINTER, byref, c_char_p, c_int32, c_uint8, c_uint32, c_uint64
from dataclasses import dataclass
from typing import Union

from . import _lib, _util
from .coordinator import SHARD_OUTCOMES, CoordinatorClient
from .dataset import Shards
from .errors import FileError, InvalidArgument
from .membership import Membership

__all__ = ["LoadedShard", "ShardLoader"]

# Stats fields, as cohort_reader_stats names them.
STATS = ("data_wait_seconds", "shards", "bytes", "prefetch_hits", "prefetch_misses", "failed",
         "reported", "ahead", "max_ahead", "depth", "finished")


@dataclass(frozen=True)
class LoadedShard:
    lease: int
    shard: int      # its index in the plan and in the Shards
    shard_id: str
    epoch: int
    data: Union[bytes, memoryview]  # a memoryview (copy=False) is valid until the shard is done
    wait: float     # seconds the call waited for it


class ShardLoader(_util.Handle):
    """Shards of `shards` (a cohort.Shards, whose shard i is shard i of the
    job's plan: register ShardLoader.plan(shards)) leased through `source`,
    a cohort.Membership or a cohort.CoordinatorClient with job= and member=.
    root: the directory relative file paths are read under (None: the
    working directory). scheduler: a cohort.data.TransferScheduler to read
    through (its policy's reduce_prefetch then reads fewer shards ahead;
    workload= names one of its registry's workloads, priority= the reads'),
    or None: the loader's own, with `workers` I/O threads and up to
    `prefetch_depth` shards ahead. max_ahead: a cap on the shards ahead
    whatever the depth (None: none). release_on_close: at close(), give
    the shards leased and not done back to the coordinator, so the next
    member that asks gets them now rather than when their leases expire
    (the first give-back that fails stops the rest). timeout: seconds one shard may take
    (None: no limit; cohort.Timeout after it). copy=False yields memoryviews
    of the reader's buffers instead of bytes, valid until the shard is done."""

    _kind = "shard loader"
    _destroy_name = "cohort_shard_reader_destroy"

    def __init__(self, source, shards, *, job=None, member=None, root=None, scheduler=None,
                 workload=None, priority=0, workers=2, prefetch_depth=8, max_ahead=None,
                 release_on_close=True, timeout=None, copy=True):
        from .transfers import TransferScheduler

        if not isinstance(shards, Shards):
            raise InvalidArgument(f"shards must be a cohort.Shards (cohort.split_shards), not {shards!r}")
        lib = _lib.load()
        options = {"priority": _util.index("priority", priority)}
        if root is not None:
            options["data_dir"] = os.fsdecode(root)
        if workload is not None:
            options["workload"] = str(workload)
        if max_ahead is not None:
            options["max_ahead"] = _util.u32("max_ahead", max_ahead)
        if not isinstance(release_on_close, bool):
            raise InvalidArgument(f"release_on_close must be True or False, not {release_on_close!r}")
        options["release_on_close"] = release_on_close
        if scheduler is None:
            options["workers"] = _util.u32("workers", workers)
            options["prefetch_depth"] = _util.u32("prefetch_depth", prefetch_depth)
            if options["workers"] == 0 or options["prefetch_depth"] == 0:
                raise InvalidArgument("workers and prefetch_depth must be at least 1")
        elif not isinstance(scheduler, TransferScheduler):
            raise InvalidArgument(f"scheduler must be a cohort.data.TransferScheduler, not {scheduler!r}")
        sched = None if scheduler is None else scheduler._h()
        text = json.dumps(options).encode("utf-8")
        if isinstance(source, Membership):
            if job is not None or member is not None:
                raise InvalidArgument("job= and member= go with a CoordinatorClient source only")
            ptr = _util.create(lib.cohort_shard_reader_from_membership, _lib.shard_reader_p,
                               source._h(), shards._h(), sched, text)
        elif isinstance(source, CoordinatorClient):
            if job is None or member is None:
                raise InvalidArgument("a CoordinatorClient source needs job= and member=")
            ptr = _util.create(lib.cohort_shard_reader_create, _lib.shard_reader_p, source._h(),
                               _util.text("job", job), _util.text("member", member), shards._h(),
                               sched, text)
        else:
            raise InvalidArgument(f"the source must be a Membership or a CoordinatorClient, not {source!r}")
        super().__init__(ptr)
        self._lib = lib
        # Kept alive as long as the reader, which uses them.
        self._source, self._shards, self._scheduler = source, shards, scheduler
        self._job, self._member = job, member
        self._root = root
        self.timeout = _util.seconds("timeout", timeout, 300 * 24 * 3600.0)  # the C limit is a year
        self.copy = bool(copy)
        self._handed = set()   # leases handed out, not yet done
        self._last = None      # the lease the iteration reports done next

    @staticmethod
    def plan(shards, epochs=1):
        """The dataset plan (a dict for CoordinatorClient.register_dataset)
        whose shard i is shard i of `shards`."""
        lib = _lib.load()
        return json.loads(_util.owned_bytes(lib.cohort_shards_plan_json, shards._h(),
                                            _util.u32("epochs", epochs)))

    # -- reading

    def next_shard(self):
        """The next shard once its bytes are read: a LoadedShard, or None
        once every epoch is done. A read that failed raises (cohort.FileError
        for a file shorter than the layout) naming the shard, the file and
        the offset; the next call goes on with the next shard."""
        finished, lease, shard, epoch = c_int32(), c_uint64(), c_uint64(), c_uint32()
        shard_id, data, length = c_char_p(), POINTER(c_uint8)(), c_uint64()
        before = self.stats()["data_wait_seconds"]
        self._lib.cohort_shard_reader_next(self._h(), self.timeout, byref(finished), byref(lease),
                                           byref(shard), byref(epoch), byref(shard_id), byref(data),
                                           byref(length))
        wait = self.stats()["data_wait_seconds"] - before
        if finished.value:
            return None
        if length.value == 0:
            view = b""
        else:
            raw = (ctypes.c_char * length.value).from_address(ctypes.addressof(data.contents))
            view = bytes(raw) if self.copy else memoryview(raw).cast("B")
        self._handed.add(lease.value)
        return LoadedShard(lease.value, shard.value, _util.decode(shard_id.value), epoch.value, view, wait)

    def done(self, lease):
        """Reports a shard next_shard handed out done; returns {"outcome",
        "counted"} as Membership.shard_done. Its memoryview is invalid after."""
        if isinstance(lease, LoadedShard):
            lease = lease.lease
        outcome = c_int32()
        self._lib.cohort_shard_reader_done(self._h(), _util.u64("lease", lease), byref(outcome))
        self._handed.discard(lease)
        name = SHARD_OUTCOMES[outcome.value]
        return {"outcome": name, "counted": name != "already_done"}

    def __iter__(self):
        return self

    def __next__(self):
        self._report_last()
        shard = self.next_shard()
        if shard is None:
            raise StopIteration
        self._last = shard.lease
        return shard

    def _report_last(self):
        if self._last is not None:
            lease, self._last = self._last, None
            self.done(lease)

    # -- what cohort.torch's ShardDataset asks of a source

    def next_shard_lease(self):
        """A lease dict as Membership.next_shard answers it, with "data", the
        shard's bytes: what ShardDataset(loader, ...) reads."""
        shard = self.next_shard()
        if shard is None:
            return {"granted": False, "finished": True}
        return {"granted": True, "finished": False, "lease": shard.lease, "shard": shard.shard,
                "shard_id": shard.shard_id, "epoch": shard.epoch,
                "bytes": len(shard.data), "data": shard.data}

    def shard_done(self, lease):
        """done(lease) for a shard this loader handed out; for another lease
        (one from a saved state), the source's own report."""
        if lease in self._handed:
            return self.done(lease)
        if isinstance(self._source, Membership):
            return self._source.shard_done(lease)
        counted = self._source.shard_done(self._job, self._member, lease)
        return {"counted": counted}

    def read_shard(self, index):
        """Shard `index`'s bytes read now, on this thread (a shard resumed
        from a saved state, which no lease of this loader holds)."""
        shard = self._shards[index]
        out = bytearray()
        for path, begin, end in shard.segments:
            if self._root is not None and not os.path.isabs(path):
                path = os.path.join(self._root, path)
            with open(path, "rb") as f:
                f.seek(begin)
                chunk = f.read(end - begin)
            if len(chunk) != end - begin:
                raise FileError(f"shard {index}: {path} at offset {begin}: the file ends after "
                                      f"{len(chunk)} of the {end - begin} bytes asked for")
            out += chunk
        return bytes(out)

    # -- figures

    def stats(self):
        """{"data_wait_seconds", "shards", "bytes", "prefetch_hits",
        "prefetch_misses", "failed", "reported", "ahead", "max_ahead",
        "depth", "finished"}."""
        out = _lib.reader_stats()
        self._lib.cohort_shard_reader_stats(self._h(), byref(out))
        stats = {name: getattr(out, name) for name in STATS}
        stats["finished"] = bool(stats["finished"])
        return stats

    @property
    def data_wait(self):
        """Seconds the loop has waited for shards, in all."""
        return self.stats()["data_wait_seconds"]

    def close(self):
        """Reports the shard the iteration holds done, then stops leasing and
        reading. Shards leased ahead go back to the queue at their lease's expiry."""
        if not self.closed:
            try:
                self._report_last()
            finally:
                self._destroy_handle()

    def __repr__(self):
        return "ShardLoader(closed)" if self.closed else f"ShardLoader({len(self._shards)} shards)"
