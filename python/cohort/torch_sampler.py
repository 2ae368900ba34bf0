"""ElasticSampler: torch's DistributedSampler on cohort's epoch order, with
a state_dict so that a checkpoint carries the position in the epoch.
Imported only when used (through ``cohort.torch``), so ``import cohort``
never needs torch.

Every rank draws from the same permutation (``cohort.epoch_order``, the
same on every machine for a seed and an epoch), split as DistributedSampler
splits it: rank r takes positions r, r + W, r + 2W, ... of the permutation,
padded by repeating its start (or cut, with drop_last) to a multiple of W.

Resume. ``position`` counts the indices this rank drew in the epoch. With
the same world size, load_state_dict() continues at that position: the
indices before plus the indices after equal an uninterrupted pass. With
another world size (an elastic restart), the ranks drew in lockstep, so the
first ``position * world_size`` indices of the epoch's split are consumed;
the rest of the permutation is split afresh over the new ranks (padded or
cut as before) and the epoch goes on from there. Every index not yet
consumed is still visited once, none consumed is visited again.
"""

import math

import torch.utils.data

from .epoch import epoch_order
from .errors import InvalidArgument
from .launch_env import read_launch_env

__all__ = ["ElasticSampler"]

STATE_VERSION = 1


def _count(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{name} must be an int >= 0, not {value!r}")
    return value


def split(remaining, rank, world_size, drop_last):
    """rank's share of `remaining`, as DistributedSampler splits a permutation."""
    m = len(remaining)
    per = m // world_size if drop_last else -(-m // world_size)
    total = per * world_size
    if total > m:  # pad with the start, repeated as often as needed
        remaining = remaining + (remaining * math.ceil((total - m) / m))[:total - m]
    return remaining[rank:total:world_size]


class ElasticSampler(torch.utils.data.Sampler):
    """This rank's indices of a dataset of `data` samples (a length, or
    anything with len()). rank and world_size None: from the launch
    environment (cohort.read_launch_env()). Call set_epoch(e) before each
    epoch, as with DistributedSampler."""

    def __init__(self, data, rank=None, world_size=None, shuffle=True, seed=0,
                 drop_last=False):
        super().__init__(None)
        n = data if isinstance(data, int) and not isinstance(data, bool) else len(data)
        self.num_samples = _count("the dataset length", n)
        if rank is None or world_size is None:
            env = read_launch_env()
            rank = env.rank if rank is None else rank
            world_size = env.world_size if world_size is None else world_size
        self.world_size = _count("world_size", world_size)
        if self.world_size == 0:
            raise InvalidArgument("world_size must be at least 1")
        self.rank = _count("rank", rank)
        if self.rank >= self.world_size:
            raise InvalidArgument(f"rank {rank} is not below world_size {world_size}")
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.seed = _count("seed", seed)
        self.epoch = 0
        self._start = 0      # where in the epoch's permutation this split begins (elastic)
        self._position = 0   # indices of this split drawn
        self._resume = False  # the next pass continues a loaded position, even at the end
        self._began = 0      # the position the current pass began at

    def set_epoch(self, epoch):
        """Another epoch starts from its beginning; the epoch the sampler is
        in (a loaded one, say) keeps its position."""
        epoch = _count("epoch", epoch)
        if epoch != self.epoch:
            self.epoch, self._start, self._position, self._resume = epoch, 0, 0, False
            self._began = 0

    def _indices(self):
        if self._start == 0:  # the whole epoch: cohort's own split
            return epoch_order(self.num_samples, self.seed, self.epoch, self.rank,
                               self.world_size, self.shuffle, self.drop_last)
        perm = epoch_order(self.num_samples, self.seed, self.epoch, 0, 1, self.shuffle)
        return split(perm[self._start:], self.rank, self.world_size, self.drop_last)

    def _pass_start(self, total):
        # A pass after a finished one goes over the epoch again, as torch's does.
        return self._position if self._resume or self._position < total else 0

    def __iter__(self):
        indices = self._indices()
        self._position = self._began = self._pass_start(len(indices))
        self._resume = False
        for i in range(self._position, len(indices)):
            self._position = i + 1  # counted when handed out
            yield int(indices[i])

    def __len__(self):
        """How many indices the next pass yields (fewer when resuming)."""
        total = len(self._indices())
        return total - self._pass_start(total)

    def state_dict(self, consumed=None):
        """The position in the epoch. consumed: how many of this rank's
        indices the training used in this pass, when it is fewer than the
        sampler handed out (a DataLoader with workers draws ahead)."""
        position = self._position
        if consumed is not None:
            if _count("consumed", consumed) > self._position - self._began:
                raise InvalidArgument(f"consumed={consumed}, but this pass handed out only "
                                      f"{self._position - self._began} indices")
            position = self._began + consumed
        return {"version": STATE_VERSION, "epoch": self.epoch, "seed": self.seed,
                "position": position, "start": self._start, "world_size": self.world_size,
                "num_samples": self.num_samples, "shuffle": self.shuffle,
                "drop_last": self.drop_last}

    def load_state_dict(self, state):
        """Continues where `state` was taken; another world size re-splits
        what is left of the epoch (see the module's docstring)."""
        for key in ("epoch", "seed", "position", "start", "world_size", "num_samples"):
            if key not in state:
                raise InvalidArgument(f"a sampler state needs {key!r}")
        if state["num_samples"] != self.num_samples:
            raise InvalidArgument(f"the state is of a dataset of {state['num_samples']} samples, "
                                  f"this sampler's has {self.num_samples}")
        for key in ("shuffle", "drop_last"):
            if key in state and bool(state[key]) != getattr(self, key):
                raise InvalidArgument(f"the state was taken with {key}={state[key]}, this "
                                      f"sampler has {key}={getattr(self, key)}")
        self.epoch = _count("epoch", state["epoch"])
        self.seed = _count("seed", state["seed"])
        start, position = _count("start", state["start"]), _count("position", state["position"])
        old_world = _count("world_size", state["world_size"])
        if old_world == self.world_size:
            self._start, self._position = start, position
        else:  # lockstep ranks consumed the first position * old_world of the split
            self._start, self._position = min(start + position * old_world, self.num_samples), 0
        self._began = self._position
        self._resume = True
