"""Question: on CPU, with a gradient-heavy model (an MLP of about 8M
parameters, batch 4, one thread per rank, so that communication weighs as
much as compute), how much faster is a DistributedDataParallel step with
cohort's comm hook (cohort.torch.allreduce_hook) than with torch's gloo
backend, and how close does it come to the step without communication?

One rank's process; benchmarks/run_ddp.sh starts them (and the 1-rank
compute-only baseline, --baseline, which needs no other rank):

    bench_ddp.py --rank R --size N --gloo-port P --store tcp://127.0.0.1:Q [--compute-ms MS]

Every rank builds, from the same seed, one model per mode and trains each
on the same data (its own per rank):
  local   no DDP, no communication, all ranks at once (the cores they share
          are part of the limit, as on this machine they are)
  noop    DDP with a hook that returns the bucket unreduced: DDP's own
          bucketing and hook machinery, no communication
  gloo    DDP on torch's gloo process group (the reference)
  cohort  DDP with cohort's comm hook
Modes take turns in blocks of --block steps, round after round, so that a
change in the machine's load falls on all of them alike; after --warmup
steps each, rounds go on until --rounds, or --seconds is spent (rank 0
decides, so every rank runs the same count). A mode's step time is the
median over rounds of the slowest rank's mean step in that round.

Then gloo's and cohort's parameters, after the same steps from the same
start, are compared (sum of each, max |difference|, worst rank), and the
all-reduce of one gradient's worth of float32 (what DDP sends per step) is
timed alone, cohort (avg, in place) against dist.all_reduce (sum), to say
how much of a step communication is. Rank 0 prints the table.
"""

import argparse
import gc
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("COHORT_PYTHONPATH") or os.path.join(HERE, "..", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import cohort  # noqa: E402
import cohort.torch  # noqa: E402

MODES = ("local", "noop", "gloo", "cohort")
DATA_BATCHES = 8  # cycled: a step's data costs nothing to make


def options():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--size", type=int, default=1)
    p.add_argument("--gloo-port", type=int)
    p.add_argument("--store", help="cohort's store, tcp://127.0.0.1:PORT (rank 0 hosts it)")
    p.add_argument("--baseline", action="store_true",
                   help="one rank, no DDP, no process group: the compute-only step")
    p.add_argument("--compute-ms", type=float, help="the baseline's step, for the ratios")
    p.add_argument("--width", type=int, default=2048, help="hidden width (2048: 8.4M parameters)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="the same for every DDP mode")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--block", type=int, default=4, help="steps of one mode in a row")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--min-rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=60.0, help="bound on the timed rounds")
    p.add_argument("--allreduce-iters", type=int, default=10)
    return p.parse_args()


def make_model(width):
    # in=width/2, two hidden layers of `width`, out=width/2: 8.4M at 2048.
    torch.manual_seed(7)  # the same start on every rank and in every mode
    half = width // 2
    return torch.nn.Sequential(torch.nn.Linear(half, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, half))


def make_data(rank, width, batch):
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    half = width // 2
    return [(torch.randn(batch, half, generator=g), torch.randint(0, half, (batch,), generator=g))
            for _ in range(DATA_BATCHES)]


def noop_hook(state, bucket):
    """DDP's hook path with no communication: the bucket comes back as is."""
    future = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


class Trainer:
    """One mode's model, optimizer and position in the data."""

    def __init__(self, mode, args, comm, data):
        net = make_model(args.width)
        if mode != "local":
            net = DistributedDataParallel(net, bucket_cap_mb=args.bucket_cap_mb)
            if mode == "noop":
                net.register_comm_hook(None, noop_hook)
            elif mode == "cohort":
                net.register_comm_hook(comm, cohort.torch.allreduce_hook)
        self.net = net
        self.opt = torch.optim.SGD(net.parameters(), lr=0.01)
        self.data = data
        self.steps = 0

    def step(self):
        x, y = self.data[self.steps % len(self.data)]
        self.opt.zero_grad(set_to_none=True)
        F.cross_entropy(self.net(x), y).backward()
        self.opt.step()
        self.steps += 1

    def run(self, n):
        """n steps; returns their mean time in seconds."""
        start = time.perf_counter()
        for _ in range(n):
            self.step()
        return (time.perf_counter() - start) / n

    def flat_parameters(self):
        module = getattr(self.net, "module", self.net)
        return torch.cat([p.detach().flatten() for p in module.parameters()])


def slowest(seconds):
    """The largest of every rank's `seconds` (rank 0 reads it)."""
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def baseline(args):
    t = Trainer("local", args, None, make_data(0, args.width, args.batch))
    params = sum(p.numel() for p in t.net.parameters())
    t.run(args.warmup)
    times, start = [], time.monotonic()
    for r in range(args.rounds):
        if r >= args.min_rounds and time.monotonic() - start > args.seconds:
            break
        times.append(t.run(args.block))
    ms = statistics.median(times) * 1e3
    print(f"compute-only: 1 rank, no DDP, {params / 1e6:.2f}M parameters, batch {args.batch}, "
          f"{torch.get_num_threads()} thread, {len(times)} rounds of {args.block} steps")
    print(f"compute_ms: {ms:.2f}  samples/s: {args.batch / ms * 1e3:.1f}", flush=True)


def time_allreduce(comm, numel, iters):
    """Median of cohort's and gloo's all-reduce of `numel` float32, alternating."""
    t = torch.ones(numel)
    comm.allreduce(t, op="avg")  # warm-up: connections, shared-memory segment
    dist.all_reduce(t)
    out = {"cohort": [], "gloo": []}
    for _ in range(iters):
        for name in ("gloo", "cohort"):
            dist.barrier()
            start = time.perf_counter()
            if name == "cohort":
                comm.allreduce(t, op="avg")
            else:
                dist.all_reduce(t)
            out[name].append(slowest(time.perf_counter() - start))
    return {name: statistics.median(v) for name, v in out.items()}


def distributed(args):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.gloo_port}",
                            rank=args.rank, world_size=args.size)
    comm = cohort.Communicator(args.rank, args.size, args.store, timeout=120, connect_timeout=60)
    data = make_data(args.rank, args.width, args.batch)
    trainers = {mode: Trainer(mode, args, comm, data) for mode in MODES}
    numel = sum(p.numel() for p in trainers["local"].net.parameters())
    for t in trainers.values():
        dist.barrier()
        t.run(args.warmup)

    times = {mode: [] for mode in MODES}
    start = time.monotonic()
    rounds = 0
    while True:
        go = torch.tensor([int(rounds < args.rounds and (rounds < args.min_rounds or
                                                         time.monotonic() - start < args.seconds))])
        dist.broadcast(go, 0)  # rank 0's clock decides for everyone
        if not go.item():
            break
        for mode, t in trainers.items():
            dist.barrier()
            times[mode].append(slowest(t.run(args.block)))
        rounds += 1
    step = {mode: statistics.median(v) for mode, v in times.items()}
    spread = {mode: (min(v), max(v)) for mode, v in times.items()}

    a, b = trainers["gloo"].flat_parameters(), trainers["cohort"].flat_parameters()
    diff = slowest((a - b).abs().max().item())
    sums = (a.double().sum().item(), b.double().sum().item())
    reduce_s = time_allreduce(comm, numel, args.allreduce_iters)

    if args.rank == 0:
        report(args, numel, rounds, trainers["gloo"].steps, step, spread, sums, diff, reduce_s,
               comm.transports)
    # The DDP models go before their process group: freed after
    # destroy_process_group, their reducers kept 4-rank runs from exiting.
    del trainers, a, b
    gc.collect()
    dist.barrier()
    comm.close()
    dist.destroy_process_group()


def report(args, numel, rounds, steps, step, spread, sums, diff, reduce_s, transports):
    n, ms = args.size, {m: s * 1e3 for m, s in step.items()}
    print(f"{n} ranks: {numel / 1e6:.2f}M parameters ({numel * 4 / 2**20:.1f} MiB of gradient), "
          f"batch {args.batch} per rank, {torch.get_num_threads()} thread per rank, "
          f"bucket_cap_mb {args.bucket_cap_mb:g}, {rounds} rounds of {args.block} steps per mode "
          f"after {args.warmup} warm-up; cohort transports: {transports}")
    print(f"{'mode':<8} {'step ms':>9} {'min..max ms':>15} {'samples/s':>10} "
          f"{'/ compute-only':>15} {'/ local':>8}")
    for mode in MODES:
        lo, hi = spread[mode]
        ratio = f"{ms[mode] / args.compute_ms:.2f}x" if args.compute_ms else "-"
        print(f"{mode:<8} {ms[mode]:>9.2f} {lo * 1e3:>7.1f}..{hi * 1e3:<7.1f} "
              f"{n * args.batch / step[mode]:>10.1f} {ratio:>15} {ms[mode] / ms['local']:>7.2f}x")
    print(f"cohort / gloo speedup: {step['gloo'] / step['cohort']:.2f}x")
    print(f"parameters after {steps} steps: sum gloo {sums[0]:.6f}, cohort {sums[1]:.6f}; "
          f"max |gloo - cohort| {diff:.3g} (worst rank)")
    print(f"all-reduce of {numel * 4 / 2**20:.1f} MiB alone: gloo {reduce_s['gloo'] * 1e3:.2f} ms, "
          f"cohort {reduce_s['cohort'] * 1e3:.2f} ms")
    print(f"time over local: noop (DDP machinery) {ms['noop'] - ms['local']:+.2f} ms, "
          f"gloo {ms['gloo'] - ms['local']:+.2f} ms, cohort {ms['cohort'] - ms['local']:+.2f} ms; "
          f"cohort over noop {ms['cohort'] - ms['noop']:+.2f} ms", flush=True)


def main():
    args = options()
    torch.set_num_threads(1)
    if args.baseline:
        baseline(args)
    else:
        distributed(args)


if __name__ == "__main__":
    main()
