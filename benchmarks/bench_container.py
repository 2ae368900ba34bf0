"""Question: when ranks of one machine run in separate containers (their own
PID namespaces, a shared /dev/shm, the same network), how does cohort's
all-reduce, called through its Python binding, compare with
torch.distributed's gloo backend?

Each rank is one process of this script, started by
benchmarks/run_container.sh under its own `unshare --pid --fork
--mount-proc`: a rank cannot see its peers' processes, so nothing that needs
a peer's pid (process_vm_readv, cohort's direct copy) can work between them;
what is left is TCP and shared memory. Each rank first prints what it can
see, and tries process_vm_readv on its peers' host pids when the launcher
wrote them down (--pids-file), to show that it fails.

    benchmarks/run_container.sh build [--sizes 1K,64K,1M,16M,64M] [--seconds 0.5]

For each size, gloo first then cohort, on the same float32 numpy buffer
(torch.from_numpy shares it): one all-reduce (sum, in place) checks the
result, two warm up, then as many as fill --seconds are timed. time = the
slowest rank's mean; algbw = bytes / time; busbw = algbw * 2(n-1)/n. Rank 0
prints the table; cohort's rows end with cohort's busbw over gloo's.
"""

import argparse
import ctypes
import datetime
import errno
import inspect
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("COHORT_PYTHONPATH") or os.path.join(HERE, "..", "python"))

import numpy  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import cohort  # noqa: E402

WARMUPS = 2
MIN_ITERS = 3
MAX_ITERS = 100000
SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20,
              "G": 1 << 30, "GiB": 1 << 30}


def parse_size(text):
    digits = text.rstrip("BKMGiB")
    unit = text[len(digits):]
    if not digits.isdigit() or unit not in SIZE_UNITS:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: use bytes or a K, M or G suffix (1K, 4M)")
    return int(digits) * SIZE_UNITS[unit]


def format_size(n):
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--cohort-port", type=int, required=True, help="cohort's tcp:// store (rank 0 hosts it)")
    p.add_argument("--gloo-port", type=int, required=True, help="torch.distributed's tcp:// rendezvous")
    p.add_argument("--sizes", default="1K,64K,1M,16M,64M",
                   type=lambda s: [parse_size(x) for x in s.split(",")])
    p.add_argument("--seconds", type=float, default=0.5, help="timed seconds per size and library")
    p.add_argument("--deadline", type=float, default=900,
                   help="seconds this rank may run in all; past it, no further size starts")
    p.add_argument("--shm-size", type=parse_size, default=None,
                   help="cohort's shm_size= (0 disables shared memory), where the binding has it")
    p.add_argument("--pids-file", help="lines 'RANK HOST_PID' the launcher writes once every rank started")
    p.add_argument("--shm-marker", help="a file the launcher made in /dev/shm: seeing it shows /dev/shm is shared")
    p.add_argument("--json", help="rank 0 writes the rows there")
    p.add_argument("--master", default="127.0.0.1",
                   help="rank 0's address, where both rendezvous listen (run_hosts_allreduce.py: host0's)")
    p.add_argument("--address", default="127.0.0.1",
                   help="this rank's address for cohort's connections (an emulated host's eth0)")
    args = p.parse_args()
    for n in args.sizes:
        if n <= 0 or n % 4:
            p.error(f"size {n} is not a positive multiple of 4 (float32)")
    return args


def say(rank, text):
    # One write per line, so that the ranks' lines do not interleave.
    sys.stdout.write(f"[rank {rank}] {text}\n")
    sys.stdout.flush()


# ------------------------------------------------------------- isolation

class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def try_process_vm_readv(pid):
    """Reads one byte at address 4096 of `pid`; returns the errno name (a
    visible process would answer EFAULT or EPERM, an invisible one ESRCH)."""
    libc = ctypes.CDLL(None, use_errno=True)
    byte = ctypes.create_string_buffer(1)
    local = _IoVec(ctypes.cast(byte, ctypes.c_void_p), 1)
    remote = _IoVec(4096, 1)
    n = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if n >= 0:
        return "succeeded"
    code = ctypes.get_errno()
    return f"{errno.errorcode.get(code, code)} ({os.strerror(code)})"


def read_host_pids(path, size, wait_s=15):
    """{rank: host pid} from the launcher's file, waiting for it a bounded time."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                pids = dict(tuple(int(x) for x in line.split()) for line in f if line.strip())
            if len(pids) == size:
                return pids
        except FileNotFoundError:
            pass
        time.sleep(0.1)
    return {}


def report_isolation(args):
    visible = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    say(args.rank, f"pid {os.getpid()} in {os.readlink('/proc/self/ns/pid')}, "
                   f"{len(visible)} process(es) visible: {visible[:8]}; "
                   f"net {os.readlink('/proc/self/ns/net')}")
    if args.shm_marker:
        seen = os.path.exists(args.shm_marker)
        say(args.rank, f"/dev/shm {'shared with the launcher' if seen else 'NOT shared'}: "
                       f"{args.shm_marker} {'seen' if seen else 'missing'}")
    if not args.pids_file:
        say(args.rank, "no --pids-file: peers' host pids unknown, process_vm_readv not tried")
        return
    pids = read_host_pids(args.pids_file, args.size)
    if not pids:
        say(args.rank, f"{args.pids_file} not complete in time: process_vm_readv not tried")
        return
    for peer, pid in sorted(pids.items()):
        if peer != args.rank and pid <= 0:
            say(args.rank, f"peer rank {peer}: the launcher did not find its host pid")
        elif peer != args.rank:
            say(args.rank, f"peer rank {peer} is host pid {pid}: process_vm_readv -> {try_process_vm_readv(pid)}")


def describe_cohort(rank, comm):
    """What the binding says about its transports, where it says anything."""
    if hasattr(comm, "transports"):
        say(rank, f"cohort transports: {comm.transports}")
    else:
        say(rank, "cohort transports: not exposed by this binding (no Communicator.transports)")
    if hasattr(comm, "describe"):
        say(rank, f"cohort describe: {json.dumps(comm.describe())}")


# ---------------------------------------------------------------- timing

def slowest(value):
    """The largest of every rank's `value`."""
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t[0])


def calibrate(run, seconds):
    """The iterations that fill `seconds`: batches grow until one takes a
    tenth of it, every rank agreeing on the slowest rank's time."""
    batch = 1
    while True:
        start = time.perf_counter()
        for _ in range(batch):
            run()
        elapsed = slowest(time.perf_counter() - start)
        wanted = seconds / 10
        if elapsed >= wanted or batch >= MAX_ITERS:
            return int(min(max(seconds * batch / max(elapsed, 1e-9), MIN_ITERS), MAX_ITERS))
        batch = int(min(MAX_ITERS, batch * min(max(wanted / max(elapsed, 1e-9), 2.0), 10.0)))


def measure(args, buf, library, run):
    """Checks one all-reduce, then times `run`; the slowest rank's mean
    seconds, or None when any rank's sums were wrong."""
    pattern = (numpy.arange(buf.size) % 13 + 1).astype(numpy.float32)
    buf[:] = pattern * (args.rank + 1)
    run()
    expected = pattern * (args.size * (args.size + 1) // 2)
    wrong = numpy.flatnonzero(buf != expected)
    if wrong.size:
        i = int(wrong[0])
        say(args.rank, f"FAIL: {library} {format_size(buf.nbytes)}: element {i} is {buf[i]}, "
                       f"expected {expected[i]}")
    if slowest(1.0 if wrong.size else 0.0) > 0:
        return None
    # Positive values that only grow (to +inf on long runs, which adds at
    # full speed): never a denormal, never a NaN.
    buf[:] = 1.0 + (numpy.arange(buf.size) % 7) / 8.0
    for _ in range(WARMUPS):
        run()
    iters = calibrate(run, args.seconds)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        run()
    return iters, slowest((time.perf_counter() - start) / iters)


def main():
    args = parse_args()
    started = time.monotonic()
    report_isolation(args)

    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.gloo_port}", rank=args.rank,
                            world_size=args.size, timeout=datetime.timedelta(seconds=120))
    extra = {}
    if args.shm_size is not None:
        if "shm_size" in inspect.signature(cohort.Communicator).parameters:
            extra["shm_size"] = args.shm_size
        else:
            say(args.rank, "--shm-size ignored: this binding's Communicator has no shm_size=")
    comm = cohort.Communicator(args.rank, args.size, store=f"tcp://{args.master}:{args.cohort_port}",
                               address=args.address, timeout=120, connect_timeout=60,
                               job_id="bench_container", **extra)
    describe_cohort(args.rank, comm)
    dist.barrier()

    rows = []
    if args.rank == 0:
        print(f"\nall-reduce, {args.size} ranks in separate PID namespaces, float32, sum in place; "
              f"time = slowest rank's mean; GB/s = 1e9 B/s")
        print(f"{'size':>9}  {'library':<7} {'iters':>7} {'time (us)':>12} {'algbw':>9} {'busbw':>9} "
              f"{'cohort/gloo':>12}", flush=True)
    ok = True
    try:
        for nbytes in args.sizes:
            # Every rank decides alike: the slowest rank's elapsed time.
            if slowest(time.monotonic() - started) > args.deadline:
                if args.rank == 0:
                    print(f"stopped: --deadline {args.deadline:g} s reached before {format_size(nbytes)}")
                break
            buf = numpy.empty(nbytes // 4, dtype=numpy.float32)
            tensor = torch.from_numpy(buf)  # the same memory
            gloo_busbw = None
            for library, run in (("gloo", lambda: dist.all_reduce(tensor)),
                                 ("cohort", lambda: comm.allreduce(buf))):
                result = measure(args, buf, library, run)
                if result is None:
                    ok = False
                    break
                iters, seconds = result
                algbw = nbytes / seconds / 1e9
                busbw = algbw * 2 * (args.size - 1) / args.size
                ratio = ""
                if library == "gloo":
                    gloo_busbw = busbw
                elif gloo_busbw:
                    ratio = f"{busbw / gloo_busbw:.2f}"
                rows.append({"bytes": nbytes, "library": library, "iters": iters, "time_us": seconds * 1e6,
                             "algbw_gbps": algbw, "busbw_gbps": busbw})
                if args.rank == 0:
                    print(f"{format_size(nbytes):>9}  {library:<7} {iters:>7} {seconds * 1e6:>12.1f} "
                          f"{algbw:>9.3f} {busbw:>9.3f} {ratio:>12}", flush=True)
            if not ok:
                break
    finally:
        comm.close()
        dist.destroy_process_group()
    if args.rank == 0 and args.json and ok:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "allreduce_container", "ranks": args.size, "dtype": "float32",
                       "rows": rows}, f, indent=1)
    if not ok and args.rank == 0:
        print("FAIL: an all-reduce returned wrong sums (details above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
