#!/usr/bin/python3
"""train_numpy.py: cohort-train's elastic training demo in Python and numpy.

Linear regression on synthetic data, one gradient-descent update per epoch
from the gradients of every shard. Workers lease shards from the
coordinator, all-reduce their gradients and, whenever the world changes,
sync the training state, so every shard counts exactly once per epoch
whoever computed it and however many workers die (the algorithm is
described in examples/cohort_train/elastic_loop.hpp; the loop, shared
with torch/train_elastic.py, is in elastic_loop.py). Each worker keeps
its state in a checkpoint file, as cohort-train does, so the job finishes
even when every worker restarts (checkpoint_file.py). The data is the same
as cohort-train's, bit for bit, so the two end with the same weights.

    train_numpy.py --reference                 # one process, no coordinator
    COHORT_COORDINATOR=http://HOST:PORT COHORT_JOB=train COHORT_MEMBER=w0 \\
        train_numpy.py --epochs 3              # one worker (under cohort-run)

Exit status: 0 when training finished (and the check passed), 1 on a
runtime error, 2 for bad usage, 3 when the check fails.
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # elastic_loop.py and checkpoint_file.py
sys.path.insert(0, os.path.join(HERE, "..", "python"))  # the in-tree binding, when not installed

from elastic_loop import add_flags, check_flags, flags_fingerprint, run_elastic  # noqa: E402

TOLERANCE = 1e-9
CHECKPOINT_KIND = "train_numpy"
MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15   # splitmix64's increment
STREAM = 0xD1B54A32D192ED03  # spreads stream numbers apart


# ------------------------------------------------------------------- data
# The same splitmix64 streams as examples/cohort_train/data.cpp: change
# one, change the other.

def mix64(z):
    """splitmix64's mix step on a numpy uint64 array (wrapping)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def stream_state(seed, stream):
    """The start of stream `stream` (0: the true model, i + 1: shard i)."""
    with np.errstate(over="ignore"):
        return int(mix64(np.array([(seed ^ (STREAM * (stream + 1))) & MASK], dtype=np.uint64))[0])


def draws(state, count):
    """`count` draws of splitmix64 from `state`, each in [-1, 1)."""
    with np.errstate(over="ignore"):
        steps = np.arange(1, count + 1, dtype=np.uint64) * np.uint64(GAMMA) + np.uint64(state)
        z = mix64(steps)
    unit = (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    return 2.0 * unit - 1.0


def make_truth(args):
    values = draws(stream_state(args.seed, 0), args.features + 1)
    return values[:args.features].copy(), float(values[args.features])


def make_shard(args, truth, index):
    """(x, y): per row the features then the noise, in draw order;
    y = ((x0*w0 + x1*w1) + ...) + b + noise, summed left to right."""
    w_true, b_true = truth
    d = args.features
    values = draws(stream_state(args.seed, index + 1), args.rows_per_shard * (d + 1))
    values = values.reshape(args.rows_per_shard, d + 1)
    x = np.ascontiguousarray(values[:, :d])
    y = np.zeros(args.rows_per_shard)
    for j in range(d):
        y += x[:, j] * w_true[j]
    y = y + b_true + args.noise * values[:, d]
    return x, y


# ------------------------------------------------------------------ model

def shard_gradient(w, b, x, y):
    """The squared error's gradient summed over the shard's rows (d/dw, then
    d/db), its loss sum and its row count."""
    residual = x @ w + b - y
    grad = np.empty(len(w) + 1)
    grad[:-1] = 2.0 * (x.T @ residual)
    grad[-1] = 2.0 * residual.sum()
    return grad, float(residual @ residual), float(len(y))


def total_rows(args):
    return args.shards * args.rows_per_shard


def apply_update(w, b, grad_sum, args):
    scale = args.lr / total_rows(args)
    return w - scale * grad_sum[:-1], b - scale * grad_sum[-1]


def train_reference(args):
    """Every epoch visits the shards in order: (w, b, loss per epoch)."""
    truth = make_truth(args)
    shards = [make_shard(args, truth, i) for i in range(args.shards)]
    w, b = np.zeros(args.features), 0.0
    losses = []
    for _ in range(args.epochs):
        total = np.zeros(args.features + 1)
        loss = 0.0
        for x, y in shards:
            grad, loss_sum, _rows = shard_gradient(w, b, x, y)
            total += grad
            loss += loss_sum
        w, b = apply_update(w, b, total, args)
        losses.append(loss / total_rows(args))
    return w, b, losses


def print_summary(prefix, history, shards):
    print(f"{prefix}epoch | shards | steps | loss")
    for e, (loss, steps) in enumerate(history):
        print(f"{prefix}{e + 1:>5} | {shards:>6} | {steps:>5} | {loss:.6g}")
    sys.stdout.flush()


def check_against_reference(prefix, w, b, args):
    w_ref, b_ref, _ = train_reference(args)
    diff = max(float(np.max(np.abs(w - w_ref))), abs(b - b_ref))
    ok = diff <= TOLERANCE
    print(f"{prefix}max |w - w_ref| = {diff:.3g} (tolerance 1e-9): {'OK' if ok else 'FAIL'}", flush=True)
    return ok


def write_weights(path, w, b, losses, args):
    # json writes floats with repr(): the shortest text that reads back exactly.
    doc = {"features": args.features, "shards": args.shards, "rows_per_shard": args.rows_per_shard,
           "epochs": args.epochs, "seed": args.seed, "weights": [float(v) for v in w],
           "bias": float(b), "loss": [float(v) for v in losses]}
    try:
        with open(path, "w") as f:
            f.write(json.dumps(doc) + "\n")
    except OSError as e:
        raise SystemExit(f"train_numpy.py: --weights-out: cannot write '{path}': {e.strerror}")


# ---------------------------------------------------------- elastic loop
# The loop is elastic_loop.py's, cohort-train's algorithm (read the comment
# at the top of examples/cohort_train/elastic_loop.hpp for why it is
# exact); here are the state it keeps alike on every rank and the steps.

class TrainState:
    """The training state every rank of a world holds alike."""

    def __init__(self, args):
        self.args = args
        self.w = np.zeros(args.features)
        self.b = 0.0
        self.epoch = 0
        self.applied_steps = 0
        self.epoch_steps = 0
        self.grad_sum = np.zeros(args.features + 1)
        self.loss_sum = 0.0
        self.rows = 0.0
        self.done = np.zeros(args.shards, dtype=bool)  # per shard: in this epoch's sums
        self.history = []  # (loss, steps) per finished epoch

    @property
    def finished(self):
        return self.epoch >= self.args.epochs

    def included(self, shard):
        return bool(self.done[shard])

    def shards_in(self):
        return int(self.done.sum())

    def apply_step(self, sums, shards):
        """Adds a step's summed contributions; True when it completed the epoch."""
        d = self.args.features
        self.grad_sum += sums[:d + 1]
        self.loss_sum += sums[d + 1]
        self.rows += sums[d + 2]
        for shard in shards:
            if shard >= 0:
                self.done[shard] = True
        self.applied_steps += 1
        self.epoch_steps += 1
        if not self.done.all():
            return False
        self.w, self.b = apply_update(self.w, self.b, self.grad_sum, self.args)
        self.history.append((self.loss_sum / total_rows(self.args), self.epoch_steps))
        self.epoch += 1
        self.epoch_steps = 0
        self.grad_sum[:] = 0
        self.loss_sum = self.rows = 0.0
        self.done[:] = False
        return True

    # The wire form: the same layout as cohort-train's (train_state.cpp).
    def serialize(self):
        history = np.zeros(2 * self.args.epochs)
        for e, (loss, steps) in enumerate(self.history):
            history[2 * e:2 * e + 2] = (loss, steps)
        head = [self.applied_steps, self.epoch, self.epoch_steps, self.loss_sum, self.rows, self.b]
        return np.concatenate([np.array(head, dtype=np.float64), self.w, self.grad_sum,
                               self.done.astype(np.float64), history])

    def serialized_size(self):
        return 7 + 2 * self.args.features + self.args.shards + 2 * self.args.epochs

    def deserialize(self, data):
        data = np.asarray(data, dtype=np.float64)
        d, n = self.args.features, self.args.shards
        self.applied_steps, self.epoch, self.epoch_steps = (int(v) for v in data[:3])
        self.loss_sum, self.rows, self.b = (float(v) for v in data[3:6])
        self.w = data[6:6 + d].copy()
        self.grad_sum = data[6 + d:7 + 2 * d].copy()
        self.done = data[7 + 2 * d:7 + 2 * d + n] != 0
        h = data[7 + 2 * d + n:]
        self.history = [(float(h[2 * e]), int(h[2 * e + 1])) for e in range(self.epoch)]


def fingerprint(args):
    return flags_fingerprint(f"{args.seed} {args.features} {args.rows_per_shard} {args.shards} {args.epochs} "
                             f"{args.lr!r} {args.noise!r}")


class NumpySteps:
    """What the elastic loop (elastic_loop.py) asks of this model: a step's
    sums are the gradient summed over the rank's shard, its loss sum and
    its rows, all-reduced through the Communicator with the loop's flags."""

    program = "train_numpy.py"
    kind = CHECKPOINT_KIND
    matching_flags = "--seed, --features, --rows-per-shard, --shards, --epochs, --lr, --noise"
    check_coordinator = False

    def __init__(self, args):
        self.args = args
        self.state = TrainState(args)
        self.truth = make_truth(args)
        self.fingerprint = fingerprint(args)
        self.width = args.features + 3  # grad (d/dw, d/db), loss sum, rows

    def plan(self):
        nbytes = self.args.rows_per_shard * (self.args.features + 1) * 8
        return {"shards": [{"id": f"shard-{i:05}", "bytes": nbytes} for i in range(self.args.shards)],
                "epochs": self.args.epochs}

    def enter_world(self, comm):
        pass

    def leave_world(self):
        pass

    def prepare(self, lease):
        """This rank's sums for the step: zeros without a lease."""
        sums = np.zeros(self.width)
        if lease is not None:
            x, y = make_shard(self.args, self.truth, lease["shard"])
            d = self.args.features
            sums[:d + 1], sums[d + 1], sums[d + 2] = shard_gradient(self.state.w, self.state.b, x, y)
        return sums

    def contribute(self, work, out):
        out[:self.width] = work

    def rows(self, sums):
        return sums[self.args.features + 2]

    def add_step(self, sums, shards, comm):
        return self.state.apply_step(sums, shards)

    def epoch_line(self):
        loss, steps = self.state.history[-1]
        return f"loss {loss:.6g} ({self.args.shards} shards, {steps} steps)"

    def world_failure(self, error):
        return False  # the Communicator raises only cohort errors

    def report(self, prefix):
        s, args = self.state, self.args
        print_summary(prefix, s.history, args.shards)
        ok = not args.check or check_against_reference(prefix, s.w, s.b, args)
        if args.weights_out:
            write_weights(args.weights_out, s.w, s.b, [loss for loss, _ in s.history], args)
        return ok


# ------------------------------------------------------------ main

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--shards", type=int, default=64)
    p.add_argument("--rows-per-shard", type=int, default=256)
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--noise", type=float, default=0.01)
    p.add_argument("--step-ms", type=int, default=30, help="simulated compute per shard")
    add_flags(p, CHECKPOINT_KIND, check_help="rank 0 compares with the reference at the end (default)",
              weights_help="write the final weights as JSON (rank 0)")
    args = p.parse_args(argv)
    for name in ("epochs", "shards", "rows_per_shard", "features"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: must be at least 1, got {getattr(args, name)}")
    if not 0 <= args.seed < 2**64:
        p.error(f"--seed: must be in 0..2^64-1, got {args.seed}")
    if args.lr <= 0 or args.noise < 0 or args.step_ms < 0:
        p.error("--lr must be positive, --noise and --step-ms at least 0")
    check_flags(p, args)
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.reference:
        w, b, losses = train_reference(args)
        print_summary("", [(loss, args.shards) for loss in losses], args.shards)
        print(f"w[0] = {w[0]:.6g}, ... ({len(w)} weights), b = {b:.6g}")
        if args.weights_out:
            write_weights(args.weights_out, w, b, losses, args)
        return 0
    return run_elastic(args, NumpySteps(args))


if __name__ == "__main__":
    sys.exit(main())
