#!/usr/bin/env python3
"""One rank of comm_shm.py: joins a cohort.Communicator, runs a scenario and
prints its result as one JSON line on stdout (and `progress N` lines while
it loops), so that the driver judges every rank from outside.

Every rank computes every rank's input from the seed, so it checks its own
results against a reference computed here in numpy (float64 or int64, then
cast); the driver compares the SHA-256 of each result across ranks, which
must be bit-identical. Scenarios:

  correctness   every collective: all-reduce for every dtype x op at sizes
                that cross chunk boundaries, broadcast, allgather,
                reduce-scatter, barrier; --level full or quick
  loop          one operation (--op) over and over, `progress N` after each:
                the driver SIGKILLs a rank in the middle
  mismatch      one all-reduce, one element longer on the last rank
  exit          one all-reduce, then leave in --exit-mode
"""

import argparse
import hashlib
import json
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("COHORT_PYTHONPATH")
                or os.path.normpath(os.path.join(HERE, "..", "..", "python")))

try:
    import numpy as np
except ImportError:
    # The driver checks this before starting any rank; this is for a hand run.
    sys.exit("comm_shm_worker.py needs numpy for its references; %s has none "
             "(configure with -DPython3_EXECUTABLE=/usr/bin/python3, as scripts/test.sh does)"
             % sys.executable)

import cohort  # noqa: E402

DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8")
OPS = ("sum", "prod", "min", "max", "avg")
STORAGE = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
           "bfloat16": np.uint16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8}
INTEGER = ("int32", "int64", "uint8")
MANTISSA = {"float32": 24, "float64": 53, "float16": 11, "bfloat16": 8}
MIB = 1 << 20


def counts(dtype):
    """Element counts: empty, one, a few, one past a 4 KiB page of floats,
    and one MiB plus three elements (past any power-of-two chunk)."""
    big = MIB // np.dtype(STORAGE[dtype]).itemsize + 3
    return (0, 1, 7, 4097, big)


# ------------------------------------------------------------------ data

def mix(rank, n, salt):
    """n pseudo-random 32-bit values for (rank, salt), as uint64."""
    i = np.arange(n, dtype=np.uint64)
    h = i * np.uint64(2654435761) + np.uint64(((rank + 1) * 40503 + salt * 7919) & 0xFFFFFFFF)
    h &= np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(15)
    h = (h * np.uint64(0x2C1B3C6D)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(12)
    return h


def intended(kind, dtype, rank, n, seed):
    """What rank contributes (int64 or float64) before it is stored as dtype.
    small: 0..3, whose sums are exact everywhere; prod: 1 or 2 with at most
    three 2s across 8 ranks; extreme: signed, wide (int64 past 32 bits,
    floats in eighths) for min and max; random: floats in [-1, 1)."""
    h = mix(rank, n, seed * 4 + ("small", "prod", "extreme", "random").index(kind))
    if kind == "small":
        return (h % np.uint64(4)).astype(np.int64)
    if kind == "prod":
        i = np.arange(n, dtype=np.int64)
        return np.where((i + rank) % 3 == 0, 2, 1).astype(np.int64)
    if kind == "extreme":
        if dtype == "uint8":
            return (h % np.uint64(256)).astype(np.int64)
        if dtype == "int64":
            return (h.astype(np.int64) - (1 << 31)) * 2147483659
        if dtype == "int32":
            return h.astype(np.int64) - (1 << 31)
        return ((h % np.uint64(2001)).astype(np.int64) - 1000) / 8.0
    return h.astype(np.float64) / 2.0 ** 31 - 1.0


def encode(dtype, values):
    """values (int64 or float64) stored as dtype: integers wrap, floats
    round to nearest even (bfloat16 as the upper half of a float32)."""
    if dtype in INTEGER:
        return np.asarray(values).astype(np.int64).astype(STORAGE[dtype])
    if dtype == "bfloat16":
        bits = np.asarray(values, dtype=np.float64).astype(np.float32).view(np.uint32).astype(np.uint64)
        bits = (bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
        return bits.astype(np.uint16)
    return np.asarray(values, dtype=np.float64).astype(STORAGE[dtype])


def decode(dtype, stored):
    if dtype in INTEGER:
        return stored.astype(np.int64)
    if dtype == "bfloat16":
        return (stored.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    return stored.astype(np.float64)


def kind_of(dtype, op):
    if op == "sum_random":
        return "random"
    return {"sum": "small", "avg": "small", "prod": "prod", "min": "extreme", "max": "extreme"}[op]


class Inputs:
    """Every rank's input for (kind, dtype) at the largest count, made once;
    a smaller count is a prefix."""

    def __init__(self, size, seed):
        self.size, self.seed, self.cache = size, seed, {}

    def get(self, kind, dtype, n):
        key = (kind, dtype)
        if key not in self.cache or len(self.cache[key][0][0]) < n:
            stored = [encode(dtype, intended(kind, dtype, r, n, self.seed)) for r in range(self.size)]
            self.cache[key] = (stored, np.stack([decode(dtype, s) for s in stored]))
        stored, values = self.cache[key]
        return [s[:n] for s in stored], values[:, :n]


def reference(dtype, op, values):
    """The reduction over ranks (rows of values) in int64 or float64."""
    size = values.shape[0]
    if op in ("sum", "sum_random", "avg"):
        acc = values.sum(axis=0)
        if op == "avg":
            acc = acc // size if dtype in INTEGER else acc / size
        return acc
    return {"prod": values.prod, "min": values.min, "max": values.max}[op](axis=0)


def compare(dtype, op, got, values):
    """None when got (stored as dtype) is right, else what is wrong. Exact
    for integers and for sums, products, minima and maxima of exactly
    representable values; avg of floats within one rounding; sums of
    random floats within the bound of any summation order."""
    want = reference(dtype, op, values)
    if dtype in INTEGER or op in ("sum", "prod", "min", "max"):
        expected = encode(dtype, want)
        if got.tobytes() == expected.tobytes():
            return None
        bad = np.flatnonzero(got.view(expected.dtype) != expected) if got.nbytes == expected.nbytes \
            else np.arange(max(len(got), len(expected)))
        first = int(bad[0]) if len(bad) else 0
        return "%d of %d elements differ, first at %d: got %r, want %r" % (
            len(bad), len(got), first, decode(dtype, got[first:first + 1]).tolist(),
            decode(dtype, expected[first:first + 1]).tolist())
    eps = 2.0 ** (1 - MANTISSA[dtype])
    if op == "avg":
        bound = eps * np.abs(want)
    else:
        bound = 2 * values.shape[0] * eps * np.abs(values).sum(axis=0)
    error = np.abs(decode(dtype, got) - want)
    bad = np.flatnonzero(~(error <= bound))
    if not len(bad):
        return None
    first = int(bad[0])
    return "%d of %d elements off, first at %d: got %r, want %r (bound %g)" % (
        len(bad), len(got), first, float(decode(dtype, got[first:first + 1])[0]), float(want[first]),
        float(bound[first]))


def digest(buf):
    return hashlib.sha256(memoryview(buf).tobytes()).hexdigest()[:20]


def shm_segments():
    """The /dev/shm files this process maps, for the driver's leftover check."""
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split(None, 5)[5].strip() if len(line.split(None, 5)) == 6 else ""
                if path.startswith("/dev/shm/"):
                    found.add(path.replace(" (deleted)", ""))
    except OSError:
        pass
    return sorted(found)


# ------------------------------------------------------------- scenarios

class Checker:
    def __init__(self, comm, seed):
        self.comm, self.rank, self.size = comm, comm.rank, comm.size
        self.inputs = Inputs(comm.size, seed)
        self.seed = seed
        self.checks = 0
        self.failures = []
        self.digests = {}

    def record(self, key, buf, problem, shared=True):
        """shared: the result must be bit-identical on every rank."""
        self.checks += 1
        if shared:
            self.digests[key] = digest(buf)
        if problem:
            self.failures.append("%s: %s" % (key, problem))

    def allreduce(self, algorithm, dtype, op, n, variant=""):
        kind = kind_of(dtype, op)
        stored, values = self.inputs.get(kind, dtype, n)
        mine = stored[self.rank]
        name = "bfloat16" if dtype == "bfloat16" else None
        real_op = "sum" if op == "sum_random" else op
        if variant == "unaligned":
            raw = bytearray(mine.nbytes + 1)
            buf = np.frombuffer(raw, dtype=mine.dtype, count=n, offset=1)
            buf[:] = mine
            result = self.comm.allreduce(buf, real_op, algorithm, dtype=name)
        elif variant == "out":
            src = mine.copy()
            src.flags.writeable = False
            result = self.comm.allreduce(src, real_op, algorithm, dtype=name, out=np.empty_like(src))
        else:
            result = self.comm.allreduce(mine.copy(), real_op, algorithm, dtype=name)
        key = "allreduce %s %s %s n=%d%s" % (algorithm, dtype, op, n, " " + variant if variant else "")
        self.record(key, result, compare(dtype, op, result, values))

    def allreduces(self, algorithm, ops):
        for dtype in DTYPES:
            for op in ops + (("sum_random",) if dtype not in INTEGER else ()):
                for n in counts(dtype):
                    self.allreduce(algorithm, dtype, op, n)
        self.allreduce(algorithm, "float32", "sum", 4097, "unaligned")
        self.allreduce(algorithm, "float64", "max", counts("float64")[-1], "unaligned")
        self.allreduce(algorithm, "float32", "sum", counts("float32")[-1], "out")
        self.allreduce(algorithm, "bfloat16", "sum_random", 4097, "out")

    def broadcasts(self):
        roots = sorted({0, self.size // 2, self.size - 1})
        for root in roots:
            for n in (0, 1, 7, 4097, MIB + 3):
                data = np.random.default_rng([self.seed, root, n]).integers(0, 256, n, dtype=np.uint8)
                buf = data.copy() if self.rank == root else np.full(n, 0xA5, dtype=np.uint8)
                self.comm.broadcast(buf, root=root)
                problem = None if buf.tobytes() == data.tobytes() else "differs from root %d's bytes" % root
                self.record("broadcast root=%d n=%d" % (root, n), buf, problem)

    def allgathers(self):
        for n in (0, 1, 7, 4097, MIB // 4 + 3):
            every = [np.random.default_rng([self.seed, r, n, 1]).integers(0, 256, n, dtype=np.uint8)
                     for r in range(self.size)]
            out = self.comm.allgather(every[self.rank])
            want = np.stack(every)
            problem = None if out.shape == want.shape and out.tobytes() == want.tobytes() else \
                "shape %s, or bytes differ from the ranks' inputs in rank order" % (out.shape,)
            self.record("allgather n=%d" % n, out, problem)

    def reduce_scatters(self, level):
        blocks = (0, 1, 7, 4097)
        for dtype in DTYPES:
            ops = OPS if level == "full" else ("sum", "max")
            for op in ops:
                for block in blocks:
                    self.reduce_scatter(dtype, op, block)
        self.reduce_scatter("float32", "sum", MIB // 4 + 3)
        self.reduce_scatter("float16", "sum_random", 4097)

    def reduce_scatter(self, dtype, op, block):
        stored, values = self.inputs.get(kind_of(dtype, op), dtype, block * self.size)
        name = "bfloat16" if dtype == "bfloat16" else None
        real_op = "sum" if op == "sum_random" else op
        out = self.comm.reduce_scatter(stored[self.rank].copy(), op=real_op, dtype=name)
        mine = slice(self.rank * block, (self.rank + 1) * block)
        # Each rank gets its own block: checked here, not across ranks.
        self.record("reduce_scatter %s %s block=%d" % (dtype, op, block), out,
                    compare(dtype, op, out, values[:, mine]), shared=False)

    def asyncs(self, algorithm):
        works = []
        for n in (7, 4097, MIB // 4 + 3):
            stored, values = self.inputs.get("small", "float32", n)
            works.append((n, values, self.comm.allreduce_async(stored[self.rank].copy(), "sum", algorithm)))
        for n, values, work in works:
            result = work.wait(timeout=60)
            self.record("allreduce_async %s float32 sum n=%d" % (algorithm, n), result,
                        compare("float32", "sum", result, values))

    def barriers(self):
        """Rank k % size arrives late at barrier k: nobody may leave before it came."""
        records = []
        for k in range(3):
            if self.rank == k % self.size:
                time.sleep(0.1)
            entered = time.monotonic()
            self.comm.barrier()
            records.append((entered, time.monotonic()))
            self.checks += 1
        return records


def correctness(comm, args, out):
    c = Checker(comm, args.seed)
    # Every op through "shm" itself when it is in use, and a few through
    # "auto", which must pick it.
    # With several host labels, "hierarchical" (shm within each) too.
    d = comm.describe()
    shm = d["shm"] is not None and len(d["shm"]["ranks"]) == comm.size
    several_hosts = len(set(d["hosts"])) > 1
    started = time.monotonic()
    if shm:
        c.allreduces("shm", OPS if args.level == "full" else ("sum", "max"))
    if several_hosts:
        c.allreduces("hierarchical", OPS if args.level == "full" else ("sum", "max"))
    c.allreduces("auto", ("sum", "max") if shm or several_hosts or args.level == "quick" else OPS)
    out["allreduce_s"] = round(time.monotonic() - started, 2)
    c.broadcasts()
    c.allgathers()
    c.reduce_scatters(args.level)
    c.asyncs("shm" if shm else "auto")
    out["barriers"] = c.barriers()
    out["choose"] = {str(n): comm.choose(n) for n in (4, 4096, MIB, 4 * MIB)}
    out.update(checks=c.checks, failures=c.failures[:30], failure_count=len(c.failures),
               digests=c.digests, ok=not c.failures)


def loop(comm, args, out):
    """args.op over and over; a peer's death must end it with an error."""
    n = args.count
    buf = np.ones(n, dtype=np.float32)
    for i in range(1, args.iterations + 1):
        out["op_started"] = time.time()
        if args.op == "allreduce":
            buf.fill(1.0)
            comm.allreduce(buf, "sum", args.algorithm, timeout=args.timeout)
        elif args.op == "barrier":
            comm.barrier(timeout=args.timeout)
        elif args.op == "allgather":
            comm.allgather(buf[: n // comm.size], timeout=args.timeout)
        elif args.op == "broadcast":
            comm.broadcast(buf, root=0, timeout=args.timeout)
        if i == 1:
            out["segments"] = shm_segments()
        print("progress %d" % i, flush=True)
    out["ok"] = True


def mismatch(comm, args, out):
    """The last rank all-reduces one element more than the others."""
    buf = np.ones(args.count + (comm.rank == comm.size - 1), dtype=np.float32)
    out["op_started"] = time.time()
    comm.allreduce(buf, "sum", args.algorithm, timeout=args.timeout)
    out["ok"] = True


def leave(comm, args, out):
    """One all-reduce, so that the transport is in use, then a barrier, then
    leave: right away, or with --wait-go once the driver saw every rank
    through the barrier."""
    buf = np.arange(4097, dtype=np.float32)
    comm.allreduce(buf, "sum", args.algorithm)
    comm.barrier()
    out.update(ok=True, segments=shm_segments(), describe=comm.describe())
    print(json.dumps(out), flush=True)
    if args.wait_go:
        sys.stdin.readline()  # the driver's go once every rank is here ('' if it died)
    mode = args.exit_mode
    if mode == "close":
        comm.close()
        sys.exit(0)
    if mode == "noclose":
        sys.exit(0)  # the Communicator is collected at interpreter exit
    if mode == "os_exit":
        os._exit(3)  # no destructor runs at all
    if mode == "exception":
        raise RuntimeError("a training script that crashes with the communicator open")
    if mode == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
    raise SystemExit("unknown exit mode " + mode)


SCENARIOS = {"correctness": correctness, "loop": loop, "mismatch": mismatch, "exit": leave}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--scenario", choices=SCENARIOS, required=True)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--level", choices=("full", "quick"), default="full")
    parser.add_argument("--shm-size", type=int, help="shm_size= for the Communicator (default: none given)")
    parser.add_argument("--job-id", default="cohort")
    parser.add_argument("--hosts", help="host labels of the ranks, comma-separated (default: the host's name)")
    parser.add_argument("--timeout", type=float, default=30.0, help="operation timeout, seconds")
    parser.add_argument("--connect-timeout", type=float, default=30.0, help="construction timeout, seconds")
    parser.add_argument("--op", choices=("allreduce", "barrier", "allgather", "broadcast"), default="allreduce")
    parser.add_argument("--algorithm", default="auto")
    parser.add_argument("--count", type=int, default=MIB)
    parser.add_argument("--iterations", type=int, default=100000)
    parser.add_argument("--exit-mode", default="close")
    parser.add_argument("--wait-go", action="store_true", help="exit: leave once a line comes on stdin")
    args = parser.parse_args()

    out = {"rank": args.rank, "ok": False, "pid": os.getpid()}
    options = {"timeout": args.timeout, "connect_timeout": args.connect_timeout, "job_id": args.job_id}
    if args.shm_size is not None:
        options["shm_size"] = args.shm_size
    if args.hosts:
        options["host"] = args.hosts.split(",")[args.rank]
    started = time.monotonic()
    op = "construct"
    try:
        print("constructing", flush=True)
        comm = cohort.Communicator(args.rank, args.size, args.store, **options)
        op = "scenario"
        out["describe"] = comm.describe()
        out["transports"] = comm.transports
        out["segments"] = shm_segments()
        print("ready " + json.dumps({k: out[k] for k in ("describe", "transports", "segments")}, default=str),
              flush=True)
        SCENARIOS[args.scenario](comm, args, out)
        op = "close"
        out["segments"] = sorted(set(out.get("segments", [])) | set(shm_segments()))
        comm.close()
    except cohort.Error as e:
        now = time.time()
        out.update(ok=False, op=op, error=str(e), error_type=type(e).__name__, code=e.code,
                   error_unix_ms=now * 1000,
                   failed_after_ms=(now - out["op_started"]) * 1000 if "op_started" in out else None)
    out["total_ms"] = round((time.monotonic() - started) * 1000)
    print(json.dumps(out, default=str), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
