#!/usr/bin/env python3
"""One rank of hosts_collectives.py, on an emulated host: comm_shm_worker.py
(its arguments, its checks and its JSON line) with the scenarios that span
hosts.

  collectives   every collective, all-reduce with every algorithm but
                "shm" (which needs every rank on one host: asking for it
                must fail with a clear error, checked last); then the bytes
                this host sent on eth0 during one large hierarchical and
                one ring all-reduce (out["traffic"]: the counter before
                and after each)

With --coordinator URL instead of --store, a member of a job on a
cohort-coordinator (served in this process with --serve): it joins, waits
for its world, bootstraps a Communicator on the generation's
coordinator:// store, all-reduces its rank and prints describe() (the
driver checks the address it listens on) in its JSON line.
"""

import argparse
import json
import sys
import time

import comm_shm_worker as w  # its folder is on sys.path: this script's own

np, cohort = w.np, w.cohort
TRAFFIC_COUNT = 2 << 20  # float32: 8 MiB


def tx_bytes(dev="eth0"):
    """The bytes this host (this network namespace) sent on `dev`."""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, fields = line.partition(":")
            if name.strip() == dev:
                return int(fields.split()[8])
    raise RuntimeError("no %s in /proc/net/dev: not on an emulated host?" % dev)


def allreduces(c, algorithm):
    """Every dtype with sum, max and (floats) a sum of random values at
    small sizes, then a few large and odd ones: lighter than
    Checker.allreduces, which the single-host tests run."""
    for dtype in w.DTYPES:
        for op in ("sum", "max") + (("sum_random",) if dtype not in w.INTEGER else ()):
            for n in (0, 1, 7, 4097):
                c.allreduce(algorithm, dtype, op, n)
    c.allreduce(algorithm, "float32", "sum", w.MIB + 3)  # 4 MiB: many chunks of every ring step
    c.allreduce(algorithm, "bfloat16", "sum_random", w.MIB // 2 + 3)
    c.allreduce(algorithm, "float64", "max", w.MIB // 8 + 3, "unaligned")
    c.allreduce(algorithm, "int32", "sum", 4097, "out")


def collectives(comm, args, out):
    c = w.Checker(comm, args.seed)
    algorithms = [a for a in cohort.comm.ALGORITHMS if a != "shm"]
    out["algorithms"] = algorithms
    started = time.monotonic()
    for algorithm in algorithms:
        allreduces(c, algorithm)
    stages = {"allreduce": time.monotonic() - started}
    for name, run in (("broadcast", c.broadcasts), ("allgather", c.allgathers),
                      ("reduce_scatter", lambda: c.reduce_scatters("quick")), ("async", lambda: c.asyncs("auto"))):
        started = time.monotonic()
        run()
        stages[name] = time.monotonic() - started
    out["barriers"] = c.barriers()

    # Integers 0..3 in float32: the sum is exact, whatever the order.
    started = time.monotonic()
    i = np.arange(TRAFFIC_COUNT, dtype=np.int64)
    want = sum((i + r) % 4 for r in range(comm.size)).astype(np.float32)
    out["traffic"] = {}
    for algorithm in ("hierarchical", "ring"):
        buf = ((i + comm.rank) % 4).astype(np.float32)
        # The ranks of a host read one counter: the driver takes the first
        # reading before and the last after, since each rank reads before it
        # sends anything.
        comm.barrier()
        before = tx_bytes()
        comm.allreduce(buf, "sum", algorithm)
        comm.barrier()
        out["traffic"][algorithm] = [before, tx_bytes()]
        c.record("allreduce %s traffic n=%d" % (algorithm, TRAFFIC_COUNT), buf,
                 None if buf.tobytes() == want.tobytes() else "differs from the exact sum")
    out["traffic_bytes"] = TRAFFIC_COUNT * 4
    stages["traffic"] = time.monotonic() - started
    out["stages_s"] = {k: round(v, 2) for k, v in stages.items()}

    try:
        comm.allreduce(np.ones(4, dtype=np.float32), "sum", "shm")
        out["shm_across_hosts"] = None
    except cohort.Error as e:
        out["shm_across_hosts"] = "%s: %s" % (type(e).__name__, e)
    out.update(checks=c.checks, failures=c.failures[:30], failure_count=len(c.failures),
               digests=c.digests, ok=not c.failures)


w.SCENARIOS.update(collectives=collectives)


def coordinator_member():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--coordinator", required=True, help="http://HOST:PORT")
    parser.add_argument("--serve", action="store_true", help="serve the coordinator at that address here")
    parser.add_argument("--member", required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--job", default="route")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()
    host, _, port = args.coordinator.removeprefix("http://").rpartition(":")
    out = {"member": args.member, "ok": False}
    server = None
    try:
        if args.serve:
            server = cohort.Coordinator(host=host, port=int(port), token="")
        client = cohort.CoordinatorClient(args.coordinator, token="", retry_deadline=args.timeout)
        client.create_job(args.job, {"min_nodes": args.size, "max_nodes": args.size, "last_call": 0.0,
                                     "heartbeat_interval": 0.5, "failure_timeout": args.timeout})
        client.join(args.job, args.member)
        world = client.wait_for_world(args.job, args.member, args.timeout)
        generation, rank = world["generation"], world["rank"]
        store = "coordinator://%s/%s/%d" % (args.coordinator.removeprefix("http://"), args.job, generation)
        out.update(rank=rank, store=store)
        with cohort.Communicator(rank, world["world_size"], store, job_id=args.job, generation=generation,
                                 timeout=args.timeout, connect_timeout=args.timeout) as comm:
            buf = np.array([rank + 1], dtype=np.int64)
            comm.allreduce(buf)
            out["sum"] = int(buf[0])
            out["describe"] = comm.describe()
            comm.barrier()  # the coordinator's host leaves last of all
        out["ok"] = True
    except cohort.Error as e:
        out.update(error="%s: %s" % (type(e).__name__, e))
    finally:
        print(json.dumps(out), flush=True)
        if server is not None:
            server.close()
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(coordinator_member() if "--coordinator" in sys.argv else w.main())
