"""Collectives among ranks over TCP: all-reduce, broadcast, barrier,
allgather and reduce-scatter (capi/cohort.h, "collectives").

    with cohort.Communicator(rank, size, "file:///shared/rdzv") as comm:
        comm.allreduce(grads)                  # in place, sum
        comm.allreduce(loss, op="avg")
        comm.broadcast(weights, root=0)
        everyone = comm.allgather(stats)       # numpy: shape (size, *stats.shape)
        work = comm.allreduce_async(bucket)    # overlaps with Python work
        ...
        work.wait()

Buffers are anything that exports the buffer protocol, C-contiguous:
numpy arrays, bytearray, array.array, memoryview (and bytes, read-only, as
an input only). A torch CPU tensor works through ``tensor.numpy()``, which
shares its memory. The element type comes from the buffer's format (float32,
float64, float16, int32, int64, uint8) or from ``dtype=``, which also allows
"bfloat16" (pass a uint16 buffer). Every rank must call the same operations
with the same sizes, types and arguments in the same order, from one thread
at a time; otherwise each rank raises cohort.Mismatch. A peer that dies or
never comes raises cohort.PeerFailed or cohort.Timeout naming it, within
the timeout; the communicator is then broken (``broken``, ``broken_reason``)
and every later operation raises cohort.Closed.

Calls release the GIL while they wait, so ranks may be threads of one
process (as the tests do).
"""

import array
import ctypes
import json
import math
import numbers
import os
from ctypes import byref, c_char_p, c_int32, c_uint64, c_void_p

from . import _lib, _util
from .errors import InvalidArgument

__all__ = ["Communicator", "Work", "DTYPES", "REDUCE_OPS", "ALGORITHMS", "TRANSPORTS"]

try:  # optional: shapes for allgather/reduce_scatter results, read-only inputs without a copy
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the environment
    _np = None


# ------------------------------------------------------------------- names

# DTYPES, REDUCE_OPS and ALGORITHMS (names by COHORT_* value) and the size of
# each dtype come from the C ABI (cohort_dtype_name, cohort_dtype_size, ...),
# read when first asked for, so that importing needs no library.
_tables = None


def _names(name_of):
    """The names of the constants 0, 1, ... up to the first "unknown"."""
    names = []
    while len(names) < 256:
        name = name_of(len(names)).decode()
        if name == "unknown":
            break
        names.append(name)
    return tuple(names)


def _table(key):
    global _tables
    if _tables is None:
        lib = _lib.load()
        dtypes = _names(lib.cohort_dtype_name)
        _tables = {"DTYPES": dtypes,
                   "REDUCE_OPS": _names(lib.cohort_reduce_op_name),
                   "ALGORITHMS": _names(lib.cohort_algorithm_name),
                   "TRANSPORTS": _names(lib.cohort_transport_name),
                   "sizes": tuple(lib.cohort_dtype_size(i) for i in range(len(dtypes)))}
    return _tables[key]


def __getattr__(name):
    if name in ("DTYPES", "REDUCE_OPS", "ALGORITHMS", "TRANSPORTS"):
        return _table(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _dtype_size(dtype):
    return _table("sizes")[dtype]


def _dtype_name(dtype):
    return _table("DTYPES")[dtype]

def _parse(kind, names, parse_name, value):
    """A COHORT_* constant from a name (aliases and "did you mean" from the
    library) or an in-range int."""
    if isinstance(value, str):
        key = value.strip().lower()
        if key in names:
            return names.index(key)
        out = c_int32()
        try:
            getattr(_lib.load(), parse_name)(_util.text(kind, key), byref(out))
        except InvalidArgument as e:
            raise InvalidArgument(str(e).replace(parse_name + ": ", "", 1)) from None
        return out.value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) \
            and 0 <= value < len(names):
        return int(value)
    raise InvalidArgument(f"unknown {kind} {value!r}; expected one of: {', '.join(names)}")


def _dtype(value):
    if _np is not None and not isinstance(value, (str, numbers.Integral)):
        try:
            value = _np.dtype(value).name  # numpy.float32, numpy.dtype("f4"), ...
        except TypeError:
            pass
    return _parse("dtype", _table("DTYPES"), "cohort_dtype_parse", value)


def _op(value):
    return _parse("reduce op", _table("REDUCE_OPS"), "cohort_reduce_op_parse", value)


def _algorithm(value):
    if value == "automatic":
        value = "auto"
    return _parse("algorithm", _table("ALGORITHMS"), "cohort_algorithm_parse", value)


def _timeout(name, value, default_zero=True):
    """Seconds for the C ABI (None: 0, the communicator's default)."""
    if value is None and default_zero:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgument(f"{name} must be a number of seconds, not {type(value).__name__}")
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise InvalidArgument(f"{name} must be a positive number of seconds, got {value}")
    return value


# ----------------------------------------------------------------- buffers

# Buffer formats (struct syntax, byte order stripped) -> dtype name; the
# integer formats are resolved by item size.
_FORMATS = {"f": "float32", "d": "float64", "e": "float16", "B": "uint8", "c": "uint8"}
_INT_FORMATS = "ilqn"


class _Buffer:
    """One argument's memory: its address, size and element type, and the
    references that keep it alive and unmoved while C uses it."""

    __slots__ = ("obj", "view", "address", "nbytes", "dtype", "count", "_keep")

    def __init__(self, where, name, obj, writable, dtype=None):
        self.obj = obj
        if _is_torch_tensor(obj):
            self._setup_tensor(where, name, obj, dtype)
            return
        try:
            view = memoryview(obj)
        except TypeError:
            raise InvalidArgument(
                f"{where}: {name} must support the buffer protocol (numpy array, bytearray, "
                f"array.array, memoryview), not {type(obj).__name__}") from None
        try:
            self._setup(where, name, view, writable, dtype)
        except BaseException:
            view.release()  # a traceback must not keep the caller's buffer exported
            raise

    def _setup(self, where, name, view, writable, dtype):
        if not view.c_contiguous:
            raise InvalidArgument(
                f"{where}: {name} is not C-contiguous (shape {view.shape}, strides "
                f"{view.strides}); pass a contiguous copy (numpy.ascontiguousarray)")
        if writable and view.readonly:
            raise InvalidArgument(
                f"{where}: {name} is read-only ({type(self.obj).__name__}) but the operation "
                "writes into it; pass a writable buffer (bytearray, a writable numpy array)")
        self.view = view
        self.nbytes = view.nbytes
        if dtype is None:
            self.dtype = self._format_dtype(where, name, view)
        else:
            self.dtype = _dtype(dtype)
        self._count_elements(where, name)
        self._keep = None
        self.address = None
        if self.nbytes == 0:
            return
        # ctypes and numpy ask for a plain byte buffer, which a C-contiguous
        # view of any format gives.
        if not view.readonly:
            self._keep = (ctypes.c_char * self.nbytes).from_buffer(view)
            self.address = ctypes.addressof(self._keep)
        elif _np is not None:
            self._keep = _np.frombuffer(view, dtype=_np.uint8)
            self.address = self._keep.ctypes.data
        else:  # read-only and no numpy: a copy (inputs only, never written)
            self._keep = (ctypes.c_char * self.nbytes).from_buffer_copy(view)
            self.address = ctypes.addressof(self._keep)

    def _count_elements(self, where, name):
        """Sets count from nbytes and dtype, which must divide evenly."""
        size = _dtype_size(self.dtype)
        if self.nbytes % size:
            raise InvalidArgument(
                f"{where}: {name} has {self.nbytes} bytes, not a whole number of "
                f"{_dtype_name(self.dtype)} elements ({size} bytes each)")
        self.count = self.nbytes // size

    def _setup_tensor(self, where, name, t, dtype):
        """A torch tensor, zero copy: its own memory, through data_ptr()."""
        if t.device.type != "cpu":
            raise InvalidArgument(
                f"{where}: {name} is a {t.device} tensor, and cohort has no GPU data path yet; "
                f"pass a CPU tensor ({name}.cpu())")
        if t.requires_grad:
            raise InvalidArgument(
                f"{where}: {name} requires grad, and cohort would change it behind autograd's "
                f"back; pass {name}.detach() (the same memory) or call it under torch.no_grad()")
        if not t.is_contiguous():
            raise InvalidArgument(
                f"{where}: {name} is not contiguous (shape {tuple(t.shape)}, stride "
                f"{tuple(t.stride())}); pass {name}.contiguous()")
        self.view = None
        self.nbytes = t.numel() * t.element_size()
        if dtype is None:
            kind = str(t.dtype).replace("torch.", "")
            if kind not in _TORCH_DTYPES:
                raise InvalidArgument(
                    f"{where}: {name} holds {t.dtype} elements, which cohort cannot reduce "
                    f"({', '.join('torch.' + k for k in _TORCH_DTYPES)}); give dtype= to read "
                    f"its bytes as one of {', '.join(_table('DTYPES'))}")
            self.dtype = _dtype(kind)
        else:
            self.dtype = _dtype(dtype)
        self._count_elements(where, name)
        self._keep = t  # holds the storage alive while C uses it
        self.address = t.data_ptr() if self.nbytes else None

    @staticmethod
    def _format_dtype(where, name, view):
        fmt = view.format
        if fmt[:1] in "@=<":
            fmt = fmt[1:]
        elif fmt[:1] in ">!":
            raise InvalidArgument(f"{where}: {name} is big-endian ({view.format!r}); "
                                  "cohort reduces little-endian data")
        if fmt in _FORMATS:
            return _dtype(_FORMATS[fmt])
        if fmt in _INT_FORMATS and view.itemsize in (4, 8):
            return _dtype("int32" if view.itemsize == 4 else "int64")
        raise InvalidArgument(
            f"{where}: {name} holds {view.format!r} elements, which cohort cannot reduce "
            f"(float32, float64, float16, int32, int64, uint8); give dtype= to read its "
            f"bytes as one of {', '.join(_table('DTYPES'))}")

    def release(self):
        """Ends the export, so a bytearray may be resized again."""
        self._keep = None
        if self.view is None:  # a torch tensor: nothing exported
            return
        try:
            self.view.release()
        except BufferError:  # still exported elsewhere: the garbage collector ends it
            pass


def _is_torch_tensor(obj):
    """True for a torch.Tensor (or Parameter), without importing torch."""
    return type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "data_ptr") \
        and hasattr(obj, "is_contiguous")


# The torch dtypes cohort reduces, by the names both use.
_TORCH_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8")


def _same_kind(buf, count, shape=None):
    """A new, zeroed buffer like `buf.obj` holding `count` elements of its
    dtype: a torch tensor or numpy array keeps its dtype (and `shape` if
    given), array.array its typecode, anything else becomes a bytearray."""
    obj = buf.obj
    nbytes = count * _dtype_size(buf.dtype)
    if _is_torch_tensor(obj) and nbytes % obj.element_size() == 0:
        n = nbytes // obj.element_size()
        return obj.new_zeros(shape if shape is not None and math.prod(shape) == n else (n,))
    if _np is not None and isinstance(obj, _np.ndarray):
        if nbytes % obj.itemsize == 0:
            n = nbytes // obj.itemsize
            if shape is not None and math.prod(shape) == n:
                return _np.zeros(shape, dtype=obj.dtype)
            return _np.zeros(n, dtype=obj.dtype)
    if isinstance(obj, array.array) and nbytes % obj.itemsize == 0:
        return array.array(obj.typecode, bytes(nbytes))
    return bytearray(nbytes)


class _Pins:
    """The _Buffers an operation is building; released if building fails."""

    def __init__(self):
        self.held = []

    def add(self, buf):
        self.held.append(buf)
        return buf

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is not None:
            for b in self.held:
                b.release()


# -------------------------------------------------------------------- work

class Work(_util.Handle):
    """An asynchronous operation: ``wait()`` for it (it returns the result
    buffer or raises the operation's error), ``test()`` or ``done`` to poll.
    The Work keeps the operation's buffers referenced until it finished;
    do not touch them before. close() releases the handle (the operation
    goes on; the communicator keeps the buffers until it ends). A Work
    collected unclosed is finished: the communicator holds pending ones."""

    _kind = "work"
    _destroy_name = "cohort_work_destroy"

    def __init__(self, ptr, what, keep, result):
        super().__init__(ptr)
        self._lib = _lib.load()
        self._what = what
        self._keep = keep       # _Buffer objects: pinned until done
        self._result = result
        self._closed = False

    def __repr__(self):
        state = "closed" if self._closed else ("done" if self.test() else "pending")
        return f"<cohort.Work {self._what} {state}>"

    def _h(self):
        if self._closed or not self._ptr:
            raise InvalidArgument(f"this {self._what} work is closed")
        return self._ptr

    def test(self):
        """True once the operation finished, successfully or not. Never blocks."""
        done = c_int32()
        self._lib.cohort_work_test(self._h(), byref(done))
        return bool(done.value)

    @property
    def done(self):
        return self.test()

    def wait(self, timeout=None):
        """Blocks until the operation finishes and returns its result buffer,
        or raises its error (cohort.Timeout, PeerFailed, Mismatch, Closed).
        With `timeout` (seconds) gives up after that long with cohort.Timeout
        while the operation goes on (its own timeout still bounds it)."""
        limit = _timeout("timeout", timeout)
        try:
            self._lib.cohort_work_wait(self._h(), limit)
        finally:
            self._finished()  # unpins once the operation is over, failed or not
        return self._result

    def _unpin(self):
        keep, self._keep = self._keep, ()
        for b in keep:
            b.release()

    def _finished(self):
        """For the communicator's bookkeeping: True once the operation is
        over; frees the handle then if the user closed it already."""
        if not self._ptr:
            return True
        done = c_int32()
        self._lib.cohort_work_test(self._ptr, byref(done))
        if not done.value:
            return False
        self._unpin()
        if self._closed:
            self._destroy()
        return True

    def _destroy(self):
        self._destroy_handle()
        self._unpin()

    def close(self):
        """Releases the handle. A pending operation is not cancelled: its
        buffers stay referenced (by the communicator) until it finished."""
        if self._closed:
            return
        self._closed = True
        if self._ptr and self._finished():
            self._destroy()


# ------------------------------------------------------------ communicator

def _store_url(store):
    if store is None:
        return None
    if isinstance(store, os.PathLike):
        return "file://" + os.path.abspath(os.fspath(store))
    if isinstance(store, str):
        return store
    raise InvalidArgument(f"store must be a URL (tcp://HOST:PORT or file:///DIR) or a path, "
                          f"not {type(store).__name__}")


class Communicator(_util.Handle):
    """This process's (or thread's) membership of a group of `size` ranks.

    Communicator(rank, size, store=None, *, timeout=60.0, connect_timeout=60.0,
                 job_id="cohort", generation=0, secret=None, tls=None,
                 address=None, ifname=None, host=None, fusion_threshold=None,
                 shm_size=None)

    store: where ranks meet, "tcp://HOST:PORT" (rank 0 hosts the server),
    "file:///DIR" (or a path object for that folder) or
    "etcd://HOST:PORT[,...]/PREFIX" (docs/launch-env.md); not needed when
    size is 1. timeout: the default per-operation timeout in seconds;
    connect_timeout bounds this constructor. secret (str or bytes): every
    connection proves both sides know it (default $COHORT_SECRET). tls: the
    paths (CA file, certificate, private key) of PEM files; every
    connection is then TLS, both ends checking the other's certificate
    against the CA (default $COHORT_TLS_CA, $COHORT_TLS_CERT and
    $COHORT_TLS_KEY; docs/collectives.md). address
    ("HOST" or "HOST:PORT") or ifname: where to listen. host: this rank's
    host label, for the hierarchical algorithm. fusion_threshold: bytes of
    the buffers allreduce_named packs small tensors into. shm_size: bytes of
    the shared-memory segment the ranks of one host share (0 turns it off;
    default $COHORT_SHM_SIZE, else 8 MiB); see `transports` and describe().

    Blocks until every rank joined (cohort.Timeout names those that never
    did). Use it as a context manager, or call close().
    """

    _kind = "communicator"
    _destroy_name = "cohort_comm_destroy"  # runs the queued operations first

    def __init__(self, rank, size, store=None, *, timeout=60.0, connect_timeout=60.0,
                 job_id="cohort", generation=0, secret=None, tls=None, address=None,
                 ifname=None, host=None, fusion_threshold=None, shm_size=None, _ptr=None):
        if _ptr is not None:  # a cohort_comm* the library made: it is ours now
            self._own(_ptr)
            return
        lib = _lib.load()
        rank = _util.index("rank", rank)
        size = _util.index("size", size)
        if not -2**31 <= rank < 2**31 or not 0 < size < 2**31:
            raise InvalidArgument(f"rank {rank} and size {size} must be 32-bit, size >= 1")
        options = _util.create(lib.cohort_comm_options_create, _lib.comm_options_p)
        try:
            url = _store_url(store)
            if url is not None:
                lib.cohort_comm_options_set_store(options, _util.text("store", url))
            lib.cohort_comm_options_set_job_id(options, _util.text("job_id", job_id))
            lib.cohort_comm_options_set_generation(options, _util.u64("generation", generation))
            lib.cohort_comm_options_set_timeout(
                options, _timeout("timeout", timeout, default_zero=False))
            lib.cohort_comm_options_set_connect_timeout(
                options, _timeout("connect_timeout", connect_timeout, default_zero=False))
            if secret is not None:
                data = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
                lib.cohort_comm_options_set_secret(options, data, len(data))
            if tls is not None:
                files = tuple(tls) if isinstance(tls, (tuple, list)) else None
                if files is None or len(files) != 3:
                    raise InvalidArgument(
                        f"tls must be (ca_file, cert_file, key_file), not {tls!r}")
                lib.cohort_comm_options_set_tls(
                    options, *(_util.text(name, os.fspath(path)) for name, path
                               in zip(("tls ca_file", "tls cert_file", "tls key_file"), files)))
            for setter, name, value in (("address", "address", address),
                                        ("ifname", "ifname", ifname),
                                        ("host_label", "host", host)):
                if value is not None:
                    getattr(lib, "cohort_comm_options_set_" + setter)(
                        options, _util.text(name, value))
            if fusion_threshold is not None:
                lib.cohort_comm_options_set_fusion_threshold(
                    options, _util.u64("fusion_threshold", fusion_threshold))
            if shm_size is not None:
                lib.cohort_comm_options_set_shm_size(options, _util.u64("shm_size", shm_size))
            ptr = _util.create(lib.cohort_comm_create, _lib.comm_p, rank, size, options)
        finally:
            lib.cohort_comm_options_destroy(options)
        self._own(ptr)

    def _own(self, ptr):
        """Takes the handle (destroyed with the Communicator from now on) and
        reads its rank and size."""
        super().__init__(ptr)
        self._lib = _lib.load()
        self._pending = []
        rank, size = c_int32(), c_int32()
        self._lib.cohort_comm_rank(ptr, byref(rank))
        self._lib.cohort_comm_size(ptr, byref(size))
        self._rank = rank.value
        self._size = size.value

    def __repr__(self):
        return f"<cohort.Communicator rank {self._rank} of {self._size}>"

    def _h(self):
        if not self._ptr:
            raise InvalidArgument("this communicator is destroyed")
        self._prune()
        return self._ptr

    def _prune(self):
        if self._pending:
            self._pending = [w for w in self._pending if not w._finished()]

    # -- queries

    @property
    def rank(self):
        return self._rank

    @property
    def size(self):
        return self._size

    @property
    def broken(self):
        """True once an operation failed and broke the communicator."""
        out = c_int32()
        self._lib.cohort_comm_is_broken(self._h(), byref(out))
        return bool(out.value)

    def abort(self, reason="abort() was called"):
        """Breaks the communicator from any thread: the operation under way
        (or else the next) raises cohort.Closed with "aborted: REASON", and
        the peers are told. For a watchdog thread; a no-op once broken."""
        self._lib.cohort_comm_abort(self._h(), reason.encode("utf-8"))

    @property
    def broken_reason(self):
        """Why it broke ("" while healthy)."""
        return _util.owned_string(self._lib.cohort_comm_broken_reason, self._h())

    @property
    def dead_ranks(self):
        """The ranks (ascending) whose process exited or died while
        connected: the connection ended between frames with no goodbye and
        no abort. A rank that closed, gave up or only went silent is not
        here. What a survivor reports (Membership.report_dead)."""
        count = ctypes.c_size_t()
        capacity = self._size
        buf = (c_int32 * max(capacity, 1))()
        self._lib.cohort_comm_dead_ranks(self._h(), buf, capacity, byref(count))
        return list(buf[:count.value])

    @property
    def hosts(self):
        """The host label of each rank, in rank order."""
        out = c_char_p()
        hosts = []
        for r in range(self._size):
            self._lib.cohort_comm_host(self._h(), r, byref(out))
            hosts.append(_util.decode(out.value))
        return hosts

    @property
    def transports(self):
        """How this rank reaches each rank, in rank order: "self", "shm"
        (the host's shared memory), "direct" (process_vm_readv) or "tcp"."""
        out = c_int32()
        names = _table("TRANSPORTS")
        result = []
        for r in range(self._size):
            self._lib.cohort_comm_transport(self._h(), r, byref(out))
            result.append(names[out.value] if 0 <= out.value < len(names) else "unknown")
        return result

    def describe(self):
        """What the set-up chose, as a dict: rank, size, hosts, transports,
        shm ({"bytes", "slot_bytes", "ranks"} or None), listen ({"address",
        "port", "chosen_by"}: where this rank listens and why; None for one
        rank), shm_unavailable (why this host's ranks share no memory
        although it was wanted, or None) and direct_unavailable ({"rank":
        why} for the peers reached over TCP rather than by direct copies, or
        None), tls (the links' protocol and cipher, "TLSv1.3 ...", or None
        for plain TCP)."""
        return json.loads(_util.owned_string(self._lib.cohort_comm_describe, self._h()))

    def choose(self, nbytes):
        """The algorithm "auto" picks for an all-reduce of `nbytes` bytes
        ("ring", "doubling", ...)."""
        out = c_int32()
        self._lib.cohort_comm_choose(self._h(), _util.u64("nbytes", nbytes), byref(out))
        return _table("ALGORITHMS")[out.value]

    # -- argument checking shared by blocking and async forms

    # Each returns (C arguments after the handle, the _Buffers to pin, the
    # result). Scalars are checked before any buffer is exported, and a
    # failure releases the buffers already taken, so the caller's bytearray
    # is never left locked by a traceback.

    def _allreduce_args(self, where, buf, op, algorithm, out, dtype, timeout):
        scalars = (_op(op), _algorithm(algorithm), _timeout("timeout", timeout))
        with _Pins() as pins:
            if out is None:
                src = dst = pins.add(_Buffer(where, "buf", buf, True, dtype))
            else:
                src = pins.add(_Buffer(where, "buf", buf, False, dtype))
                dst = pins.add(_Buffer(where, "out", out, True,
                                       src.dtype if dtype is None else dtype))
                if dst.nbytes != src.nbytes:
                    raise InvalidArgument(f"{where}: out has {dst.nbytes} bytes but buf has "
                                          f"{src.nbytes}; they must be the same size")
            return (src.address, dst.address, src.count, src.dtype) + scalars, pins.held, dst.obj

    def _broadcast_args(self, where, buf, root, timeout):
        root = _util.index("root", root)
        if not 0 <= root < self._size:
            raise InvalidArgument(f"{where}: root {root} is outside 0..{self._size - 1}")
        timeout_s = _timeout("timeout", timeout)
        with _Pins() as pins:
            b = pins.add(_Buffer(where, "buf", buf, True, "uint8"))
            return (b.address, b.nbytes, root, timeout_s), pins.held, buf

    def _allgather_args(self, where, buf, out, timeout):
        timeout_s = _timeout("timeout", timeout)
        with _Pins() as pins:
            src = pins.add(_Buffer(where, "buf", buf, False, "uint8"))
            if out is None:
                shape = None
                if (_np is not None and isinstance(buf, _np.ndarray)) or _is_torch_tensor(buf):
                    shape = (self._size,) + tuple(buf.shape)
                out = _same_kind(src, src.nbytes * self._size, shape)
            dst = pins.add(_Buffer(where, "out", out, True, "uint8"))
            if dst.nbytes != src.nbytes * self._size:
                raise InvalidArgument(f"{where}: out has {dst.nbytes} bytes but needs size x "
                                      f"{src.nbytes} = {src.nbytes * self._size}")
            return (src.address, dst.address, src.nbytes, timeout_s), pins.held, out

    def _reduce_scatter_args(self, where, buf, out, op, dtype, timeout):
        scalars = (_op(op), _timeout("timeout", timeout))
        with _Pins() as pins:
            src = pins.add(_Buffer(where, "buf", buf, False, dtype))
            if src.count % self._size:
                raise InvalidArgument(f"{where}: buf has {src.count} {_dtype_name(src.dtype)} "
                                      f"elements, not a multiple of the {self._size} ranks")
            count = src.count // self._size
            if out is None:
                shape = None
                if ((_np is not None and isinstance(buf, _np.ndarray)) or _is_torch_tensor(buf)) \
                        and buf.ndim > 1 and buf.shape[0] == self._size:
                    shape = tuple(buf.shape[1:])
                out = _same_kind(src, count, shape)
            dst = pins.add(_Buffer(where, "out", out, True,
                                   src.dtype if dtype is None else dtype))
            if dst.nbytes != count * _dtype_size(src.dtype):
                raise InvalidArgument(f"{where}: out has {dst.nbytes} bytes but needs "
                                      f"{count * _dtype_size(src.dtype)} ({count} elements)")
            return (src.address, dst.address, count, src.dtype) + scalars, pins.held, out

    def _release(self, keep):
        for b in keep:
            b.release()

    def _async(self, func, args, what, keep, result):
        ptr = _lib.work_p()
        try:
            func(self._h(), *args, byref(ptr))
        except BaseException:
            self._release(keep)
            raise
        work = Work(ptr, what, keep, result)
        self._pending.append(work)  # pins the buffers even if the caller drops the Work
        return work

    def _run(self, func, args, keep, result):
        try:
            func(self._h(), *args)
        finally:
            self._release(keep)
        return result

    # -- blocking operations

    def allreduce(self, buf, op="sum", algorithm="auto", *, out=None, dtype=None, timeout=None):
        """Reduces `buf` across the ranks with `op` (sum, prod, min, max,
        avg) and returns the result: written into `buf` (in place, so it must
        be writable) or into `out` (same size; buf may then be read-only).
        algorithm: auto, star, ring, doubling or hierarchical, the same on
        every rank. timeout: seconds, None for the communicator's default."""
        args, keep, result = self._allreduce_args("allreduce", buf, op, algorithm, out, dtype,
                                                  timeout)
        return self._run(self._lib.cohort_comm_allreduce, args, keep, result)

    def broadcast(self, buf, root=0, timeout=None):
        """Copies rank `root`'s `buf` into every rank's `buf` (same byte size
        everywhere) and returns it."""
        args, keep, result = self._broadcast_args("broadcast", buf, root, timeout)
        return self._run(self._lib.cohort_comm_broadcast, args, keep, result)

    def barrier(self, timeout=None):
        """Returns once every rank has called it."""
        self._lib.cohort_comm_barrier(self._h(), _timeout("timeout", timeout))

    def allgather(self, buf, out=None, timeout=None):
        """Every rank's `buf`, in rank order. Returns `out` (size x the bytes
        of buf) or a new buffer: for a numpy array one of shape
        (size, *buf.shape), for an array.array one of the same typecode,
        else a bytearray."""
        args, keep, result = self._allgather_args("allgather", buf, out, timeout)
        return self._run(self._lib.cohort_comm_allgather, args, keep, result)

    def reduce_scatter(self, buf, out=None, op="sum", dtype=None, timeout=None):
        """`buf` holds size blocks of equal length; rank r gets the reduction
        of block r, in `out` or a new buffer like buf (numpy of shape
        buf.shape[1:] when buf.shape[0] == size)."""
        args, keep, result = self._reduce_scatter_args("reduce_scatter", buf, out, op, dtype,
                                                       timeout)
        return self._run(self._lib.cohort_comm_reduce_scatter, args, keep, result)

    def allreduce_named(self, tensors, op="sum", timeout=None):
        """Reduces every buffer of the dict {name: buffer} in place, packing
        small ones together in name order. A value may also be a pair
        (buffer, dtype). Every rank must pass the same names, sizes and
        types. Returns the dict."""
        if not isinstance(tensors, dict):
            raise InvalidArgument("allreduce_named: tensors must be a dict {name: buffer}, "
                                  f"not {type(tensors).__name__}")
        reduce, timeout_s = _op(op), _timeout("timeout", timeout)
        n = len(tensors)
        names = (c_char_p * n)()
        addresses = (c_void_p * n)()
        counts = (c_uint64 * n)()
        dtypes = (c_int32 * n)()
        keep = []
        try:
            for i, (name, value) in enumerate(tensors.items()):
                if not isinstance(name, str):
                    raise InvalidArgument(f"allreduce_named: names must be str, not "
                                          f"{type(name).__name__} ({name!r})")
                dtype = None
                if isinstance(value, tuple) and len(value) == 2:
                    value, dtype = value
                b = _Buffer("allreduce_named", f"tensors[{name!r}]", value, True, dtype)
                keep.append(b)
                names[i] = _util.text("name", name)
                addresses[i] = b.address
                counts[i] = b.count
                dtypes[i] = b.dtype
            self._lib.cohort_comm_allreduce_named(self._h(), n, names, addresses, counts, dtypes,
                                                  reduce, timeout_s)
        finally:
            self._release(keep)
        return tensors

    # -- asynchronous operations

    def allreduce_async(self, buf, op="sum", algorithm="auto", *, out=None, dtype=None,
                        timeout=None):
        """allreduce() queued behind the operations issued before; returns a
        Work whose wait() returns the result. Do not touch the buffers
        until it is done."""
        args, keep, result = self._allreduce_args("allreduce_async", buf, op, algorithm, out,
                                                  dtype, timeout)
        return self._async(self._lib.cohort_comm_allreduce_async, args, "allreduce", keep,
                           result)

    def broadcast_async(self, buf, root=0, timeout=None):
        args, keep, result = self._broadcast_args("broadcast_async", buf, root, timeout)
        return self._async(self._lib.cohort_comm_broadcast_async, args, "broadcast", keep,
                           result)

    def barrier_async(self, timeout=None):
        return self._async(self._lib.cohort_comm_barrier_async,
                           (_timeout("timeout", timeout),), "barrier", (), None)

    def allgather_async(self, buf, out=None, timeout=None):
        args, keep, result = self._allgather_args("allgather_async", buf, out, timeout)
        return self._async(self._lib.cohort_comm_allgather_async, args, "allgather", keep,
                           result)

    def reduce_scatter_async(self, buf, out=None, op="sum", dtype=None, timeout=None):
        args, keep, result = self._reduce_scatter_args("reduce_scatter_async", buf, out, op,
                                                       dtype, timeout)
        return self._async(self._lib.cohort_comm_reduce_scatter_async, args, "reduce_scatter",
                           keep, result)

    # -- life cycle

    def close(self):
        """Says goodbye to the peers after the queued operations ran; later
        operations raise cohort.Closed. Closing twice does nothing."""
        if self._ptr:
            try:
                self._lib.cohort_comm_close(self._ptr)
            finally:
                self._prune()

    # Handle.__enter__/__exit__: a `with` block ends with close(); the handle
    # itself is destroyed when the Communicator is collected.
