#!/usr/bin/python3
"""train_elastic.py: elastic PyTorch training with cohort.

An MLP learns scikit-learn's digits (8x8 images, 10 classes) with
DistributedDataParallel, every gradient bucket all-reduced through
cohort.torch.allreduce_hook. The coordinator leases the training set's
shards to the workers; the workers keep every shard counted exactly once
per epoch whoever computed it and however many of them die, and each keeps
a checkpoint, so a relaunched worker goes on from its file (the loop is
../elastic_loop.py, shared with train_numpy.py; the DDP step is in
ddp_steps.py). One SGD update (with momentum) per epoch, from the
gradient summed over every training sample: which worker computed which shard does not change
the math, so the result equals a single-process run's up to float32
rounding (docs/torch.md#an-elastic-example says how close and why).

    train_elastic.py --reference                      # one process, no coordinator
    cohort-run --standalone --nproc-per-node 4 --kill-worker 2@15 -- \\
        /usr/bin/python3 examples/torch/train_elastic.py --step-ms 100

Rank 0 of the last world checks the result at the end: test accuracy at
least 95%, every shard counted once in every epoch, and the final
parameters within 1e-4 of the reference's.

Exit status: 0 when training finished (and the check passed), 1 on a
runtime error, 2 for bad usage (flags, the data file, the environment), 3
when the check fails.
"""

import argparse
import gzip
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))  # elastic_loop.py and checkpoint_file.py, shared with train_numpy.py
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))  # the in-tree binding, when not installed

import numpy as np  # noqa: E402
import torch  # noqa: E402

from ddp_steps import DDPSteps  # noqa: E402
from elastic_loop import add_flags, check_flags, flags_fingerprint, run_elastic  # noqa: E402

DIGITS = ("/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz",  # python3-sklearn
          "/usr/local/share/cohort/digits.csv.gz")  # scripts/deps.sh puts it there
MIN_ACCURACY = 0.95
TOLERANCE = 1e-4           # on every parameter; docs/torch.md says why
MAX_OTHER_PREDICTIONS = 1  # test samples whose prediction may differ from the reference's


class UsageError(Exception):
    pass


# ------------------------------------------------------------------- data

def find_digits(flag):
    if flag:
        return flag
    for path in DIGITS:
        if os.path.exists(path):
            return path
    raise UsageError(f"no digits data: none of {', '.join(DIGITS)} exists; run scripts/deps.sh (it puts the "
                     "file there), or give --digits FILE (scikit-learn's digits.csv.gz)")


def load_digits(path):
    """(images, labels): float32 pixels scaled to [0, 1], int64 labels."""
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            table = np.loadtxt(f, delimiter=",", dtype=np.float32, ndmin=2)
    except OSError as e:
        raise UsageError(f"--digits: cannot read '{path}': {e.strerror or e}") from None
    except (EOFError, ValueError) as e:
        raise UsageError(f"--digits: cannot read '{path}': {e}") from None
    if table.shape[1] != 65 or len(table) < 100:
        raise UsageError(f"--digits: '{path}' has {table.shape[0]} rows of {table.shape[1]} columns; expected "
                         "scikit-learn's digits.csv.gz (1797 rows of 64 pixels and a label)")
    labels = table[:, 64].astype(np.int64)
    if labels.min() < 0 or labels.max() > 9:
        raise UsageError(f"--digits: '{path}': labels must be 0..9, found {labels.min()}..{labels.max()}")
    return table[:, :64] / 16.0, labels


class Data:
    """The held-out test split and the training shards, fixed by --seed."""

    def __init__(self, args):
        x, y = load_digits(find_digits(args.digits))
        order = np.random.default_rng(args.seed).permutation(len(y))
        n_test = int(round(args.test_fraction * len(y)))
        test, train = order[:n_test], order[n_test:]
        if args.shards > len(train):
            raise UsageError(f"--shards: {args.shards} shards but only {len(train)} training samples")
        self.test_x, self.test_y = torch.from_numpy(x[test]), torch.from_numpy(y[test])
        self.train_x, self.train_y = torch.from_numpy(x[train]), torch.from_numpy(y[train])
        self.bounds = np.linspace(0, len(train), args.shards + 1).astype(int)

    @property
    def samples(self):
        return len(self.train_y)

    def shard(self, index):
        a, b = self.bounds[index], self.bounds[index + 1]
        return self.train_x[a:b], self.train_y[a:b]

    def nothing(self):
        """An empty batch: a rank with no shard this step still runs DDP's
        backward (every rank must), adding zeros."""
        return self.train_x[:0], self.train_y[:0]


# ------------------------------------------------------------------ model

def make_model(args):
    torch.manual_seed(args.seed)  # every worker and the reference start alike
    return torch.nn.Sequential(torch.nn.Linear(64, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, 10))


def make_optimizer(params, args):
    # Plain SGD with momentum, not Adam: its step is linear in the gradient,
    # so float rounding in the gradient stays as small in the parameters.
    # Adam divides each component by its own running scale, which magnifies
    # rounding where a component's gradient nearly cancels (docs/torch.md).
    return torch.optim.SGD(params, lr=args.lr, momentum=args.momentum)


def loss_sum(output, labels):
    """Summed, not averaged: a step adds its shards' sums, and the update
    divides by the number of training samples, whoever computed what."""
    return torch.nn.functional.cross_entropy(output, labels, reduction="sum")


def flat_parameters(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def predictions(model, data):
    with torch.no_grad():
        return model(data.test_x).argmax(dim=1)


class TrainState:
    """What every rank of a world holds alike: the model, the optimizer's
    momentum, and the epoch in progress (the gradient sum so far and how
    many times each shard went into it)."""

    def __init__(self, args, data):
        self.args, self.data = args, data
        self.model = make_model(args)
        self.params = list(self.model.parameters())
        self.size = sum(p.numel() for p in self.params)
        self.optimizer = make_optimizer(self.params, args)
        self.epoch = 0
        self.applied_steps = 0
        self.epoch_steps = 0
        self.grad_sum = torch.zeros(self.size, dtype=torch.float64)
        self.loss_sum = 0.0
        self.rows = 0
        self.counts = np.zeros(args.shards, dtype=np.int64)
        self.history = []  # per epoch: (mean loss, steps, samples, fewest and most counts of a shard)

    @property
    def finished(self):
        return self.epoch >= self.args.epochs

    def included(self, shard):
        return self.counts[shard] > 0

    def shards_in(self):
        return int((self.counts > 0).sum())

    def add_step(self, grad_sum, loss, rows, shards):
        """Adds a step's summed gradient (flat float64) over `shards`; at the
        epoch's last shard, the update. True when it completed the epoch."""
        self.grad_sum += grad_sum
        self.loss_sum += loss
        self.rows += int(rows)
        for shard in shards:
            if shard >= 0:
                self.counts[shard] += 1
        self.applied_steps += 1
        self.epoch_steps += 1
        if not self.counts.all():
            return False
        mean = (self.grad_sum / self.data.samples).to(torch.float32)
        offset = 0
        for p in self.params:
            p.grad = mean[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        self.optimizer.step()
        self.history.append((self.loss_sum / self.data.samples, self.epoch_steps, self.rows,
                             int(self.counts.min()), int(self.counts.max())))
        self.epoch += 1
        self.epoch_steps = 0
        self.grad_sum.zero_()
        self.loss_sum, self.rows = 0.0, 0
        self.counts[:] = 0
        return True

    # The wire (and checkpoint) form: float64 values, exact for float32.
    def serialize(self):
        momentum = torch.cat([self.optimizer.state[p]["momentum_buffer"].reshape(-1) if p in self.optimizer.state
                              else torch.zeros(p.numel()) for p in self.params])
        history = np.zeros((self.args.epochs, 5))
        if self.history:
            history[:len(self.history)] = self.history
        head = [self.applied_steps, self.epoch, self.epoch_steps, self.loss_sum, self.rows]
        return np.concatenate([head, flat_parameters(self.model).double().numpy(), momentum.double().numpy(),
                               self.grad_sum.numpy(), self.counts, history.reshape(-1)]).astype(np.float64)

    def serialized_size(self):
        return 5 + 3 * self.size + self.args.shards + 5 * self.args.epochs

    def deserialize(self, values):
        values = np.asarray(values, dtype=np.float64)
        n, s = self.size, self.args.shards
        self.applied_steps, self.epoch, self.epoch_steps = (int(v) for v in values[:3])
        self.loss_sum, self.rows = float(values[3]), int(values[4])
        at = 5
        parts = []
        for _ in range(3):
            parts.append(torch.from_numpy(values[at:at + n].copy()))
            at += n
        params, momentum, self.grad_sum = parts
        self.counts = values[at:at + s].astype(np.int64)
        history = values[at + s:].reshape(self.args.epochs, 5)[:self.epoch]
        self.history = [(float(h[0]), int(h[1]), int(h[2]), int(h[3]), int(h[4])) for h in history]
        offset = 0
        self.optimizer.state.clear()
        with torch.no_grad():
            for p in self.params:
                k = p.numel()
                p.copy_(params[offset:offset + k].view_as(p))
                if self.epoch > 0:  # SGD keeps no momentum before its first step
                    self.optimizer.state[p] = {
                        "momentum_buffer": momentum[offset:offset + k].to(torch.float32).view_as(p).clone()}
                offset += k


# -------------------------------------------------------------- reference

def train_reference(args, data):
    """The same training written plainly for one process: an epoch is one
    step on the mean loss over the whole training set. (model, mean loss
    per epoch)."""
    model = make_model(args)
    optimizer = make_optimizer(model.parameters(), args)
    losses = []
    for _ in range(args.epochs):
        optimizer.zero_grad()
        loss = loss_sum(model(data.train_x), data.train_y) / data.samples
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return model, losses


def print_summary(prefix, history, args):
    print(f"{prefix}epoch | shards | samples | steps | loss")
    for e, (loss, steps, rows, fewest, most) in enumerate(history):
        counted = f"{args.shards}" if fewest == most == 1 else f"{fewest}..{most}x"
        print(f"{prefix}{e + 1:>5} | {counted:>6} | {rows:>7} | {steps:>5} | {loss:.6g}")
    sys.stdout.flush()


def accuracy(model, data):
    return float((predictions(model, data) == data.test_y).float().mean())


def check(prefix, model, history, args, data):
    """Rank 0's check at the end; True when it passed."""
    def say(text):
        print(prefix + text, flush=True)

    ok = True
    bad = [e + 1 for e, h in enumerate(history) if not (h[3] == h[4] == 1 and h[2] == data.samples)]
    if len(history) != args.epochs or bad:
        say(f"FAIL: not every shard counted exactly once per epoch (epochs {bad[:10]} of {len(history)})")
        ok = False
    else:
        say(f"every shard counted once per epoch: {args.shards} shards, {data.samples} samples, "
            f"in each of {args.epochs} epochs: OK")
    acc = accuracy(model, data)
    good = acc >= MIN_ACCURACY
    say(f"test accuracy {100 * acc:.2f}% on {len(data.test_y)} held-out samples (at least "
        f"{100 * MIN_ACCURACY:.0f}%): {'OK' if good else 'FAIL'}")
    ok = ok and good
    reference, _ = train_reference(args, data)
    diff = float((flat_parameters(model) - flat_parameters(reference)).abs().max())
    other = int((predictions(model, data) != predictions(reference, data)).sum())
    good = diff <= TOLERANCE and other <= MAX_OTHER_PREDICTIONS
    say(f"reference: max |param - ref| = {diff:.3g} (tolerance {TOLERANCE:g}), {other} test predictions "
        f"differ (at most {MAX_OTHER_PREDICTIONS}), reference accuracy {100 * accuracy(reference, data):.2f}%: "
        f"{'OK' if good else 'FAIL'}")
    return ok and good


def write_weights(path, model, losses, args, data):
    # json writes floats with repr(): the shortest text that reads back exactly.
    doc = {"epochs": args.epochs, "shards": args.shards, "seed": args.seed, "hidden": args.hidden,
           "accuracy": accuracy(model, data), "loss": losses,
           "parameters": [float(v) for v in flat_parameters(model)],
           "predictions": [int(v) for v in predictions(model, data)]}
    try:
        with open(path, "w") as f:
            f.write(json.dumps(doc) + "\n")
    except OSError as e:
        raise UsageError(f"--weights-out: cannot write '{path}': {e.strerror}") from None


# ---------------------------------------------------------- elastic loop

def fingerprint(args):
    return flags_fingerprint(f"{args.seed} {args.shards} {args.epochs} {args.hidden} {args.lr!r} "
                             f"{args.momentum!r} {args.test_fraction!r}")


class DigitsSteps(DDPSteps):
    """What the elastic loop (../elastic_loop.py) asks of this program; the
    step through DDP is DDPSteps' (ddp_steps.py)."""

    program = "train_elastic.py"
    kind = "train_elastic"  # the checkpoint files' kind
    matching_flags = "--seed, --shards, --epochs, --hidden, --lr, --momentum, --test-fraction"
    check_coordinator = True  # rank 0 also asks the coordinator whether it counted every shard

    def __init__(self, args, data):
        super().__init__(args, TrainState(args, data), loss_sum)
        self.data = data
        self.fingerprint = fingerprint(args)

    def plan(self):
        sizes = np.diff(self.data.bounds) * 65 * 4  # a sample: 64 pixels and a label
        return {"shards": [{"id": f"digits-{i:03}", "bytes": int(n)} for i, n in enumerate(sizes)],
                "epochs": self.args.epochs}

    def prepare(self, lease):
        return self.data.nothing() if lease is None else self.data.shard(lease["shard"])

    def epoch_line(self):
        loss, steps, rows = self.state.history[-1][:3]
        return f"loss {loss:.6g} ({self.args.shards} shards, {rows} samples, {steps} steps)"

    def report(self, prefix):
        """Rank 0 of the last world, at the end: True when all is well."""
        args, data, s = self.args, self.data, self.state
        print_summary(prefix, s.history, args)
        ok = not args.check or check(prefix, s.model, s.history, args, data)
        if args.weights_out:
            write_weights(args.weights_out, s.model, [h[0] for h in s.history], args, data)
        return ok


# ------------------------------------------------------------------ main

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=80)
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--hidden", type=int, default=64, help="hidden units of the MLP")
    p.add_argument("--lr", type=float, default=0.5, help="the learning rate")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1, help="the split and the initial weights")
    p.add_argument("--test-fraction", type=float, default=0.2, help="held out for the test accuracy")
    p.add_argument("--digits", metavar="FILE", help="digits.csv.gz (default: scikit-learn's, or scripts/deps.sh's)")
    p.add_argument("--step-ms", type=int, default=0, help="extra time per shard, to watch a demo")
    add_flags(p, DigitsSteps.kind, check_help="rank 0 checks the result at the end (default)",
              weights_help="write the final parameters as JSON (rank 0)")
    args = p.parse_args(argv)
    for name in ("epochs", "shards", "hidden"):
        if getattr(args, name) < 1:
            p.error(f"--{name}: must be at least 1, got {getattr(args, name)}")
    if not 0 <= args.seed < 2**32:
        p.error(f"--seed: must be in 0..2^32-1, got {args.seed}")
    if not 0 < args.test_fraction < 1:
        p.error(f"--test-fraction: must be between 0 and 1, got {args.test_fraction}")
    if not args.lr > 0 or not 0 <= args.momentum < 1 or args.step_ms < 0:
        p.error("--lr must be positive, --momentum in [0, 1), --step-ms at least 0")
    check_flags(p, args)
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    torch.set_num_threads(1)  # the same float sums in every process, and no oversubscribed cores
    try:
        data = Data(args)
        if args.reference:
            model, losses = train_reference(args, data)
            print_summary("", [(loss, 1, data.samples, 1, 1) for loss in losses], args)
            acc = accuracy(model, data)
            print(f"test accuracy {100 * acc:.2f}% on {len(data.test_y)} held-out samples", flush=True)
            if args.weights_out:
                write_weights(args.weights_out, model, losses, args, data)
            return 0 if not args.check or acc >= MIN_ACCURACY else 3
        return run_elastic(args, DigitsSteps(args, data))
    except UsageError as e:
        print(f"train_elastic.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
