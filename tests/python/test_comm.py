"""Collectives from Python: a communicator of one rank, then two and three
ranks as threads of this process (ctypes releases the GIL during calls)
meeting in a file:// store in a temporary folder. Results are checked
against references computed here, for every dtype and op on array.array,
bytearray, memoryview and (if installed) numpy buffers."""

import array
import gc
import os
import struct
import subprocess
import tempfile
import threading
import time
import unittest

import _support  # noqa: F401  (puts cohort on sys.path)
import cohort

try:
    import numpy
except ImportError:  # pragma: no cover - depends on the environment
    numpy = None

DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8")
OPS = ("sum", "prod", "min", "max", "avg")
KINDS = ("array", "bytearray", "memoryview", "numpy")
# struct codes of the dtypes; bfloat16 travels as the upper half of a float32
PACK = {"float32": "f", "float64": "d", "float16": "e", "bfloat16": "H", "int32": "i",
        "int64": "q", "uint8": "B"}
ARRAY_CODES = {"float32": "f", "float64": "d", "int32": "i", "int64": "q", "uint8": "B"}
NUMPY_TYPES = {"float32": "float32", "float64": "float64", "float16": "float16",
               "bfloat16": "uint16", "int32": "int32", "int64": "int64", "uint8": "uint8"}
INTEGER = {"int32", "int64", "uint8"}
WAIT = 20.0  # seconds: connect and operation timeouts of the test communicators


def value_of(rank, i):
    """What rank `rank` contributes at index i: small, positive, exact in every dtype."""
    return rank + 1 + i % 5


def reference(dtype, op, size, count, first=0):
    """The reduction over ranks 0..size-1 of value_of, computed in Python."""
    out = []
    for i in range(first, first + count):
        values = [value_of(r, i) for r in range(size)]
        if op == "sum":
            acc = sum(values)
        elif op == "prod":
            acc = 1
            for v in values:
                acc *= v
        elif op == "min":
            acc = min(values)
        elif op == "max":
            acc = max(values)
        else:
            acc = sum(values) // size if dtype in INTEGER else sum(values) / size
        out.append(acc)
    return out


def _bf16(value):
    return struct.unpack("<I", struct.pack("<f", value))[0] >> 16


def _from_bf16(bits):
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def encode(dtype, values):
    if dtype == "bfloat16":
        values = [_bf16(v) for v in values]
    elif dtype not in ("float32", "float64", "float16"):
        values = [int(v) for v in values]
    return struct.pack(f"<{len(values)}{PACK[dtype]}", *values)


def decode(dtype, data):
    data = bytes(data)
    n = len(data) // struct.calcsize(PACK[dtype])
    values = list(struct.unpack(f"<{n}{PACK[dtype]}", data))
    if dtype == "bfloat16":
        values = [_from_bf16(v) for v in values]
    return values


def make(kind, dtype, values):
    """(buffer, dtype argument) holding `values` as `dtype` in a buffer of
    `kind`; the dtype argument is None where the buffer's format says it."""
    raw = encode(dtype, values)
    if kind == "array":
        if dtype in ARRAY_CODES:
            return array.array(ARRAY_CODES[dtype], raw), None
        return array.array("H", raw), dtype
    if kind == "bytearray":
        return bytearray(raw), None if dtype == "uint8" else dtype
    if kind == "memoryview":
        if dtype in ARRAY_CODES:
            return memoryview(bytearray(raw)).cast(ARRAY_CODES[dtype]), None
        return memoryview(bytearray(raw)).cast("H"), dtype
    array_ = numpy.frombuffer(bytearray(raw), dtype=NUMPY_TYPES[dtype])
    return array_, "bfloat16" if dtype == "bfloat16" else None


def read(dtype, buf):
    return decode(dtype, memoryview(buf).cast("B"))


def kinds():
    return KINDS if numpy is not None else KINDS[:-1]


def run_ranks(size, body, **options):
    """Runs body(comm) on `size` ranks, each a thread with its own
    Communicator; returns their results in rank order and re-raises the
    first rank's failure."""
    results = [None] * size
    errors = [None] * size
    with tempfile.TemporaryDirectory(prefix="cohort-comm-") as folder:
        store = "file://" + folder
        options.setdefault("timeout", WAIT)
        options.setdefault("connect_timeout", WAIT)

        def rank_main(rank):
            try:
                with cohort.Communicator(rank, size, store, address="127.0.0.1",
                                         **options) as comm:
                    results[rank] = body(comm)
            except BaseException as exc:  # reported from the main thread
                errors[rank] = exc

        threads = [threading.Thread(target=rank_main, args=(r,), name=f"rank-{r}")
                   for r in range(size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            if t.is_alive():
                raise AssertionError(f"{t.name} hung")
    for rank, exc in enumerate(errors):
        if exc is not None:
            raise AssertionError(f"rank {rank} failed: {exc!r}") from exc
    return results


class Names(unittest.TestCase):
    def test_constants(self):
        self.assertEqual(cohort.DTYPES, DTYPES)
        self.assertEqual(cohort.REDUCE_OPS, OPS)
        self.assertEqual(cohort.ALGORITHMS, ("auto", "star", "ring", "doubling", "hierarchical", "shm"))
        self.assertEqual(cohort.TRANSPORTS, ("self", "shm", "direct", "tcp"))
        lib = cohort._lib.load()
        for i, name in enumerate(DTYPES):
            self.assertEqual(lib.cohort_dtype_name(i).decode(), name)
        self.assertEqual(lib.cohort_dtype_size(3), 2)
        self.assertEqual(lib.cohort_reduce_op_name(4), b"avg")
        self.assertEqual(lib.cohort_algorithm_name(3), b"doubling")

    def test_tables_come_from_the_library(self):
        # The binding hard-codes no dtype name or size: both come from the C ABI.
        lib = cohort._lib.load()
        self.assertEqual(cohort.comm._table("sizes"),
                         tuple(lib.cohort_dtype_size(i) for i in range(len(DTYPES))))
        self.assertEqual(cohort.comm._table("sizes"), (4, 8, 2, 2, 4, 8, 1))

    def test_a_dropped_communicator_and_work_are_destroyed(self):
        # Communicator and Work are handles of the shared class, released by
        # weakref.finalize when collected without close().
        comm = cohort.Communicator(0, 1)
        work = comm.barrier_async()
        work.wait()
        comm_finalizer, work_finalizer = comm._finalizer, work._finalizer
        self.assertTrue(comm_finalizer.alive and work_finalizer.alive)
        del comm, work
        gc.collect()
        self.assertFalse(comm_finalizer.alive)
        self.assertFalse(work_finalizer.alive)

    def test_errors_are_exported(self):
        for name, code in (("PeerFailed", 13), ("Mismatch", 14), ("Closed", 15),
                           ("PermissionDenied", 16)):
            self.assertEqual(getattr(cohort, name).code, code)
            self.assertIn(name, cohort.__all__)
            self.assertTrue(issubclass(getattr(cohort, name), cohort.Error))


class SingleRank(unittest.TestCase):
    """A communicator of one rank: needs no store; every result is the input."""

    def setUp(self):
        self.comm = cohort.Communicator(0, 1, host="solo")

    def tearDown(self):
        self.comm.close()

    def test_queries(self):
        comm = self.comm
        self.assertEqual((comm.rank, comm.size), (0, 1))
        self.assertEqual(comm.hosts, ["solo"])
        self.assertFalse(comm.broken)
        self.assertEqual(comm.broken_reason, "")
        self.assertEqual(comm.dead_ranks, [])
        self.assertIn(comm.choose(100), cohort.ALGORITHMS[1:])
        self.assertIn(comm.choose(64 << 20), cohort.ALGORITHMS[1:])
        self.assertIn("rank 0 of 1", repr(comm))
        with cohort.Communicator(0, 1) as plain:  # host defaults to the machine's name
            self.assertTrue(plain.hosts[0])

    def test_every_dtype_op_and_kind(self):
        for kind in kinds():
            for dtype in DTYPES:
                for op in OPS:
                    with self.subTest(kind=kind, dtype=dtype, op=op):
                        buf, given = make(kind, dtype, [value_of(0, i) for i in range(11)])
                        result = self.comm.allreduce(buf, op, dtype=given)
                        self.assertIs(result, buf)
                        self.assertEqual(read(dtype, buf), reference(dtype, op, 1, 11))

    def test_out_and_read_only_input(self):
        data = struct.pack("<4f", 1, 2, 3, 4)
        out = array.array("f", bytes(16))
        self.assertIs(self.comm.allreduce(data, out=out, dtype="float32"), out)
        self.assertEqual(list(out), [1, 2, 3, 4])
        self.assertEqual(list(self.comm.allreduce(array.array("i", [5, 6]), "max",
                                                  algorithm="star")), [5, 6])

    def test_other_operations(self):
        comm = self.comm
        data = bytearray(b"hello")
        self.assertIs(comm.broadcast(data), data)
        self.assertEqual(data, b"hello")
        comm.barrier()
        comm.barrier(timeout=1.5)
        gathered = comm.allgather(b"abc")
        self.assertEqual((type(gathered), gathered), (bytearray, bytearray(b"abc")))
        self.assertEqual(comm.allgather(array.array("q", [7, 8])), array.array("q", [7, 8]))
        self.assertEqual(list(comm.reduce_scatter(array.array("d", [1.5, 2.5]))), [1.5, 2.5])
        tensors = {"w": array.array("f", [1, 2]), "b": bytearray(b"\x03")}
        self.assertIs(comm.allreduce_named(tensors, "sum"), tensors)
        self.assertEqual(list(tensors["w"]), [1, 2])
        self.assertEqual(comm.allreduce_named({}), {})

    @unittest.skipIf(numpy is None, "numpy is not installed")
    def test_numpy_shapes(self):
        comm = self.comm
        x = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
        gathered = comm.allgather(x)
        self.assertEqual((gathered.shape, gathered.dtype), ((1, 2, 3), numpy.float32))
        numpy.testing.assert_array_equal(gathered[0], x)
        scattered = comm.reduce_scatter(x.reshape(1, 2, 3))
        self.assertEqual(scattered.shape, (2, 3))
        y = comm.allreduce(x, out=numpy.empty_like(x))
        numpy.testing.assert_array_equal(y, x)
        comm.allreduce(x, dtype=numpy.float32)  # numpy dtypes are accepted too

    def test_async(self):
        comm = self.comm
        a = array.array("i", [1, 2, 3])
        works = [comm.allreduce_async(a, "sum"),
                 comm.broadcast_async(bytearray(4), root=0),
                 comm.barrier_async(),
                 comm.allgather_async(b"xy"),
                 comm.reduce_scatter_async(array.array("f", [2.0]))]
        self.assertIs(works[0].wait(), a)
        self.assertEqual(works[3].wait(timeout=5), bytearray(b"xy"))
        self.assertEqual(list(works[4].wait()), [2.0])
        self.assertIsNone(works[2].wait())
        for w in works:
            self.assertTrue(w.done)
            self.assertTrue(w.test())
            w.wait()  # again: the same outcome
            w.close()
            w.close()
        with self.assertRaisesRegex(cohort.InvalidArgument, "closed"):
            works[0].wait()
        # A Work dropped at once still keeps its buffers until the operation ends.
        comm.allreduce_async(array.array("d", [1.0] * 1000))
        gc.collect()
        comm.barrier()

    def test_closed(self):
        comm = cohort.Communicator(0, 1)
        comm.close()
        comm.close()
        with self.assertRaisesRegex(cohort.Closed, "closed"):
            comm.barrier()
        with self.assertRaises(cohort.Closed):
            comm.allreduce_async(bytearray(1)).wait()
        self.assertEqual(comm.rank, 0)

    def test_bad_buffers(self):
        comm = self.comm
        with self.assertRaisesRegex(cohort.InvalidArgument,
                                    r"allreduce: buf is read-only \(bytes\)"):
            comm.allreduce(b"\x01\x02")
        with self.assertRaisesRegex(cohort.InvalidArgument, "broadcast: buf is read-only"):
            comm.broadcast(b"\x01")
        with self.assertRaisesRegex(cohort.InvalidArgument, "allgather: out is read-only"):
            comm.allgather(b"\x01", out=b"\x00")
        with self.assertRaisesRegex(cohort.InvalidArgument, r"tensors\['w'\] is read-only"):
            comm.allreduce_named({"w": b"\x01"})
        with self.assertRaisesRegex(cohort.InvalidArgument, "buffer protocol"):
            comm.allreduce([1.0, 2.0])
        with self.assertRaisesRegex(cohort.InvalidArgument, "'b' elements"):
            comm.allreduce(array.array("b", [1]))
        with self.assertRaisesRegex(cohort.InvalidArgument,
                                    "3 bytes, not a whole number of bfloat16"):
            comm.allreduce(bytearray(3), dtype="bfloat16")
        with self.assertRaisesRegex(cohort.InvalidArgument, "out has 4 bytes but buf has 8"):
            comm.allreduce(array.array("f", [1, 2]), out=bytearray(4))
        with self.assertRaisesRegex(cohort.InvalidArgument, "allgather: out has 3 bytes but needs"):
            comm.allgather(b"ab", out=bytearray(3))
        with self.assertRaisesRegex(cohort.InvalidArgument, r"did you mean 'max'"):
            comm.allreduce(bytearray(1), "maxx")
        with self.assertRaisesRegex(cohort.InvalidArgument, "unknown algorithm 'rnig'"):
            comm.allreduce(bytearray(1), algorithm="rnig")
        with self.assertRaisesRegex(cohort.InvalidArgument, "did you mean 'float32'"):
            comm.allreduce(bytearray(4), dtype="flaot32")
        with self.assertRaisesRegex(cohort.InvalidArgument, "timeout must be a positive"):
            comm.barrier(timeout=-1)
        with self.assertRaisesRegex(cohort.InvalidArgument, r"root 1 is outside 0\.\.0"):
            comm.broadcast(bytearray(1), root=1)
        with self.assertRaisesRegex(cohort.InvalidArgument, "names must be str"):
            comm.allreduce_named({1: bytearray(1)})
        # The buffer is released after a failed call: a bytearray may grow again.
        grow = bytearray(2)
        with self.assertRaises(cohort.InvalidArgument):
            comm.allreduce(grow, "nope")
        grow.extend(b"ok")

    @unittest.skipIf(numpy is None, "numpy is not installed")
    def test_bad_numpy(self):
        comm = self.comm
        x = numpy.arange(12, dtype=numpy.float32).reshape(3, 4)
        with self.assertRaisesRegex(cohort.InvalidArgument, "allreduce: buf is not C-contiguous"):
            comm.allreduce(x[:, ::2])
        with self.assertRaisesRegex(cohort.InvalidArgument, "not C-contiguous"):
            comm.allreduce(x.T)
        frozen = numpy.ones(3)
        frozen.flags.writeable = False
        with self.assertRaisesRegex(cohort.InvalidArgument, "buf is read-only"):
            comm.allreduce(frozen)
        numpy.testing.assert_array_equal(comm.allreduce(frozen, out=numpy.zeros(3)), frozen)
        with self.assertRaisesRegex(cohort.InvalidArgument, "big-endian"):
            comm.allreduce(numpy.ones(2, dtype=">f4"))
        with self.assertRaisesRegex(cohort.InvalidArgument, "'\\?' elements"):
            comm.allreduce(numpy.ones(2, dtype=bool))

    def test_bad_constructor(self):
        with self.assertRaisesRegex(cohort.InvalidArgument, "no store"):
            cohort.Communicator(0, 2)
        with self.assertRaisesRegex(cohort.InvalidArgument, r"rank 2 is outside 0\.\.1"):
            cohort.Communicator(2, 2, "file:///tmp/x")
        with self.assertRaisesRegex(cohort.InvalidArgument, "timeout must be a positive"):
            cohort.Communicator(0, 1, timeout=0)
        with self.assertRaisesRegex(cohort.InvalidArgument, "unknown scheme"):
            cohort.Communicator(0, 2, "ftp://x", connect_timeout=1)
        with self.assertRaisesRegex(cohort.InvalidArgument, "fusion_threshold must be at least 1 byte"):
            cohort.Communicator(0, 1, fusion_threshold=0)


class MultiRank(unittest.TestCase):
    """Two and three ranks as threads."""

    def check_every_dtype_and_op(self, size):
        count = 13

        def body(comm):
            mine = [value_of(comm.rank, i) for i in range(count)]
            for dtype in DTYPES:
                for op in OPS:
                    want = reference(dtype, op, size, count)
                    for kind in kinds():  # in place
                        buf, given = make(kind, dtype, mine)
                        comm.allreduce(buf, op, dtype=given)
                        self.assertEqual(read(dtype, buf), want,
                                         f"{kind} {dtype} {op} on rank {comm.rank}")
                    # out of place, from read-only bytes
                    out = bytearray(len(encode(dtype, mine)))
                    comm.allreduce(encode(dtype, mine), op, out=out, dtype=dtype)
                    self.assertEqual(read(dtype, out), want, f"bytes {dtype} {op}")
            return True

        self.assertEqual(run_ranks(size, body), [True] * size)

    def test_two_ranks_every_dtype_and_op(self):
        self.check_every_dtype_and_op(2)

    def test_three_ranks_every_dtype_and_op(self):
        self.check_every_dtype_and_op(3)

    def test_algorithms_and_sizes(self):
        def body(comm):
            for algorithm in cohort.ALGORITHMS:
                for count in (1, 7, 40001):
                    buf = array.array("f", [value_of(comm.rank, i) for i in range(count)])
                    comm.allreduce(buf, "sum", algorithm)
                    self.assertEqual(list(buf), reference("float32", "sum", comm.size, count),
                                     f"{algorithm} {count}")
            return comm.hosts

        for size in (2, 3):
            self.assertEqual(run_ranks(size, body, host="py-host"), [["py-host"] * size] * size)

    def test_data_movement(self):
        def body(comm):
            rank, size = comm.rank, comm.size
            # broadcast from the last rank
            data = bytearray(bytes(range(200)) if rank == size - 1 else bytes(200))
            comm.broadcast(data, root=size - 1)
            self.assertEqual(data, bytes(range(200)))
            # allgather: rank order
            mine = array.array("i", [rank * 10 + j for j in range(3)])
            everyone = comm.allgather(mine)
            self.assertEqual(list(everyone), [r * 10 + j for r in range(size) for j in range(3)])
            self.assertEqual(comm.allgather(bytes([rank])), bytearray(range(size)))
            # reduce_scatter: block r to rank r
            blocks = array.array("q", [value_of(rank, i) for i in range(size * 4)])
            got = comm.reduce_scatter(blocks, op="max")
            self.assertEqual(list(got), reference("int64", "max", size, 4, first=rank * 4))
            comm.barrier()
            # named: the dicts list the tensors in different orders
            w = array.array("f", [value_of(rank, i) for i in range(10)])
            b = array.array("q", [value_of(rank, i) for i in range(3)])
            h = array.array("H", encode("bfloat16", [value_of(rank, i) for i in range(5)]))
            tensors = {"weights": w, "bias": b, "half": (h, "bfloat16")}
            if rank % 2:
                tensors = dict(reversed(list(tensors.items())))
            comm.allreduce_named(tensors, "sum")
            self.assertEqual(list(w), reference("float32", "sum", size, 10))
            self.assertEqual(list(b), reference("int64", "sum", size, 3))
            self.assertEqual(read("bfloat16", h), reference("bfloat16", "sum", size, 5))
            return True

        for size in (2, 3):
            run_ranks(size, body, fusion_threshold=16)

    @unittest.skipIf(numpy is None, "numpy is not installed")
    def test_numpy(self):
        def body(comm):
            rank, size = comm.rank, comm.size
            x = numpy.full((2, 3), rank + 1, dtype=numpy.float64)
            comm.allreduce(x, "sum")
            numpy.testing.assert_array_equal(x, numpy.full((2, 3), size * (size + 1) / 2))
            gathered = comm.allgather(numpy.array([rank, rank], dtype=numpy.int32))
            self.assertEqual(gathered.shape, (size, 2))
            numpy.testing.assert_array_equal(gathered[:, 0], numpy.arange(size))
            blocks = numpy.arange(size * 4, dtype=numpy.int64).reshape(size, 4)
            mine = comm.reduce_scatter(blocks)
            numpy.testing.assert_array_equal(mine, blocks[rank] * size)
            # bfloat16 through a uint16 array
            bf = numpy.array([_bf16(1.5 + rank)] * 4, dtype=numpy.uint16)
            comm.allreduce(bf, "max", dtype="bfloat16")
            self.assertEqual(_from_bf16(int(bf[0])), 1.5 + size - 1)
            return True

        run_ranks(3, body)

    def test_async(self):
        def body(comm):
            rank, size = comm.rank, comm.size
            a = array.array("d", [value_of(rank, i) for i in range(100)])
            data = bytearray(b"from-zero" if rank == 0 else bytes(9))
            blocks = array.array("i", [value_of(rank, i) for i in range(size * 2)])
            works = [comm.allreduce_async(a, "avg"),
                     comm.broadcast_async(data, root=0),
                     comm.allgather_async(bytes([rank]) * 2),
                     comm.reduce_scatter_async(blocks, op="min"),
                     comm.barrier_async()]
            self.assertEqual(list(works[0].wait()), reference("float64", "avg", size, 100))
            self.assertEqual(works[1].wait(), b"from-zero")
            self.assertEqual(works[2].wait(), bytearray(r for r in range(size) for _ in range(2)))
            self.assertEqual(list(works[3].wait()),
                             reference("int32", "min", size, 2, first=rank * 2))
            works[4].wait()
            self.assertTrue(all(w.done for w in works))
            return True

        run_ranks(2, body)

    def test_async_pins_buffers(self):
        """While an operation is pending its bytearray cannot be resized, a
        wait with a limit gives up, and everything is released after."""
        go = threading.Event()

        def body(comm):
            buf = bytearray(struct.pack("<2i", comm.rank, comm.rank))
            if comm.rank == 0:
                work = comm.allreduce_async(buf, "sum", dtype="int32")
                with self.assertRaises(BufferError):
                    buf.extend(b"x")
                with self.assertRaisesRegex(cohort.Timeout, "not finished after"):
                    work.wait(timeout=0.05)
                self.assertFalse(work.done)
                go.set()
                work.wait()
                buf.extend(b"x")  # released
                return bytes(buf)
            go.wait(WAIT)
            comm.allreduce(buf, "sum", dtype="int32")
            return bytes(buf)

        results = run_ranks(2, body)
        self.assertEqual(results, [struct.pack("<2i", 1, 1) + b"x", struct.pack("<2i", 1, 1)])


class Tls(unittest.TestCase):
    """tls=(ca, cert, key): the links run over TLS; certificates are made
    here with the openssl command."""

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory(prefix="cohort-tls-")
        d = cls.folder.name
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        run = lambda *args: subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)
        run("req", "-x509", *ec, "-days", "1", "-subj", "/CN=ca", "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem")
        run("req", *ec, "-subj", "/CN=rank", "-keyout", f"{d}/rank.key", "-out", f"{d}/rank.csr")
        run("x509", "-req", "-days", "1", "-in", f"{d}/rank.csr", "-CA", f"{d}/ca.pem", "-CAkey",
            f"{d}/ca.key", "-CAcreateserial", "-out", f"{d}/rank.pem")
        cls.files = (f"{d}/ca.pem", f"{d}/rank.pem", f"{d}/rank.key")

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def test_allreduce_over_tls(self):
        def body(comm):
            buf = array.array("f", [comm.rank + 1.0] * 1000)
            comm.allreduce(buf)
            return list(buf[:3]), comm.describe()["tls"]
        for values, tls in run_ranks(3, body, tls=self.files, shm_size=0):
            self.assertEqual(values, [6.0, 6.0, 6.0])
            self.assertTrue(tls.startswith("TLSv1."), tls)

    def test_bad_tls_arguments(self):
        with self.assertRaisesRegex(cohort.InvalidArgument, r"tls must be \(ca_file, cert_file, key_file\)"):
            cohort.Communicator(0, 1, tls=self.files[:2])
        with self.assertRaisesRegex(cohort.InvalidArgument, "cannot read the private key '/nonexistent.key'"):
            cohort.Communicator(0, 1, tls=(self.files[0], self.files[1], "/nonexistent.key"))


class Failures(unittest.TestCase):
    def test_mismatched_count(self):
        def body(comm):
            buf = array.array("i", [1] * (4 if comm.rank == 0 else 8))
            try:
                comm.allreduce(buf)
            except cohort.Mismatch as exc:
                caught = exc
            else:
                self.fail(f"rank {comm.rank}: no Mismatch")
            self.assertTrue(comm.broken)
            self.assertTrue(comm.broken_reason)
            with self.assertRaises(cohort.Closed):
                comm.barrier()
            return str(caught)

        for message in run_ranks(2, body):
            self.assertIn("rank", message)

    def test_rank_that_never_came(self):
        with tempfile.TemporaryDirectory() as folder:
            with self.assertRaisesRegex(cohort.Timeout,
                                        r"rank\(s\) 1 of 2 never registered") as caught:
                cohort.Communicator(0, 2, "file://" + folder, address="127.0.0.1",
                                    connect_timeout=0.3)
            self.assertIn(folder, str(caught.exception))

    def test_rank_that_never_calls(self):
        gave_up = threading.Event()

        def body(comm):
            if comm.rank == 0:
                with self.assertRaisesRegex(cohort.Timeout, "rank 1") as caught:
                    comm.allreduce(array.array("f", [1.0]), timeout=0.3)
                gave_up.set()
                self.assertTrue(comm.broken)
                return str(caught.exception)
            gave_up.wait(WAIT)
            return None

        message = run_ranks(2, body)[0]
        self.assertIn("timed out on rank 0", message)

    def test_abort_from_a_watchdog_thread(self):
        gave_up = threading.Event()

        def body(comm):
            if comm.rank == 0:
                watchdog = threading.Timer(0.2, comm.abort, args=("the world is over",))
                watchdog.start()
                started = time.monotonic()
                with self.assertRaisesRegex(cohort.Closed, "aborted: the world is over") as caught:
                    comm.allreduce(array.array("f", [1.0]), timeout=30)
                watchdog.join()
                took = time.monotonic() - started
                gave_up.set()
                self.assertLess(took, 10, "the abort did not end the 30 s wait")
                self.assertTrue(comm.broken)
                comm.abort("again")  # a no-op once broken
                return str(caught.exception)
            gave_up.wait(WAIT)
            return None

        message = run_ranks(2, body)[0]
        self.assertIn("on rank 0", message)

    def test_store_as_path(self):
        with tempfile.TemporaryDirectory() as folder:
            import pathlib
            comm = cohort.Communicator(0, 1, pathlib.Path(folder))
            comm.close()
            self.assertTrue(os.path.isdir(folder))


if __name__ == "__main__":
    unittest.main()
