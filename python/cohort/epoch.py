"""Epoch order: the indices each rank visits in an epoch, as torch's
DistributedSampler pads and splits them, from a permutation that is the same
on every machine."""

from ctypes import POINTER, byref, c_size_t, c_uint64

from . import _lib, _util
from .errors import BufferTooSmall, InvalidArgument

SHUFFLE = 1
DROP_LAST = 2


def epoch_order(n, seed=0, epoch=0, rank=0, world_size=1, shuffle=True, drop_last=False,
                as_numpy=False):
    """The indices rank `rank` of `world_size` visits in `epoch` of a dataset
    of `n` samples: a list of int, or a numpy uint64 array with as_numpy=True."""
    n = _util.u64("n", n)
    seed = _util.u64("seed", seed)
    epoch = _util.u64("epoch", epoch)
    rank = _util.rank("rank", rank)
    world_size = _util.rank("world_size", world_size)
    flags = (SHUFFLE if shuffle else 0) | (DROP_LAST if drop_last else 0)
    lib = _lib.load()
    # The exact count when the arguments are valid; otherwise the C call says why.
    capacity = (n // world_size if drop_last else -(-n // world_size)) if world_size else 0
    count = c_size_t()
    while True:
        if as_numpy:
            try:
                import numpy
            except ImportError:
                raise InvalidArgument("as_numpy=True needs numpy, which is not installed") \
                    from None
            out = numpy.empty(capacity, dtype=numpy.uint64)
            buf = out.ctypes.data_as(POINTER(c_uint64))
        else:
            out = buf = (c_uint64 * capacity)()
        try:
            lib.cohort_epoch_order(n, seed, epoch, rank, world_size, flags, buf, capacity,
                                   byref(count))
        except BufferTooSmall:
            capacity = max(count.value, 2 * capacity + 1)
            continue
        return out[:count.value]
