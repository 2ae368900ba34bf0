#!/usr/bin/python3
"""train_numpy.py: cohort-train's elastic training demo in Python and numpy.

Linear regression on synthetic data, one gradient-descent update per epoch
from the gradients of every shard. Workers lease shards from the
coordinator, all-reduce their gradients and, whenever the world changes,
sync the training state, so every shard counts exactly once per epoch
whoever computed it and however many workers die (the algorithm is
described in examples/cohort_train/elastic_loop.hpp). Each worker keeps
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
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # checkpoint_file.py
sys.path.insert(0, os.path.join(HERE, "..", "python"))  # the in-tree binding, when not installed

from checkpoint_file import Checkpoint, checkpoint_file, job_created_at  # noqa: E402

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
# The same algorithm as examples/cohort_train/elastic_loop.cpp; read the
# comment at the top of elastic_loop.hpp for why it is exact.

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
        self.included = np.zeros(args.shards, dtype=bool)
        self.history = []  # (loss, steps) per finished epoch

    @property
    def finished(self):
        return self.epoch >= self.args.epochs

    def apply_step(self, sums, shards):
        """Adds a step's summed contributions; True when it completed the epoch."""
        d = self.args.features
        self.grad_sum += sums[:d + 1]
        self.loss_sum += sums[d + 1]
        self.rows += sums[d + 2]
        for shard in shards:
            if shard >= 0:
                self.included[shard] = True
        self.applied_steps += 1
        self.epoch_steps += 1
        if not self.included.all():
            return False
        self.w, self.b = apply_update(self.w, self.b, self.grad_sum, self.args)
        self.history.append((self.loss_sum / total_rows(self.args), self.epoch_steps))
        self.epoch += 1
        self.epoch_steps = 0
        self.grad_sum[:] = 0
        self.loss_sum = self.rows = 0.0
        self.included[:] = False
        return True

    # The wire form: the same layout as cohort-train's (train_state.cpp).
    def serialize(self):
        history = np.zeros(2 * self.args.epochs)
        for e, (loss, steps) in enumerate(self.history):
            history[2 * e:2 * e + 2] = (loss, steps)
        head = [self.applied_steps, self.epoch, self.epoch_steps, self.loss_sum, self.rows, self.b]
        return np.concatenate([np.array(head, dtype=np.float64), self.w, self.grad_sum,
                               self.included.astype(np.float64), history])

    def deserialize(self, data):
        d, n = self.args.features, self.args.shards
        self.applied_steps, self.epoch, self.epoch_steps = (int(v) for v in data[:3])
        self.loss_sum, self.rows, self.b = (float(v) for v in data[3:6])
        self.w = data[6:6 + d].copy()
        self.grad_sum = data[6 + d:7 + 2 * d].copy()
        self.included = data[7 + 2 * d:7 + 2 * d + n] != 0
        h = data[7 + 2 * d + n:]
        self.history = [(float(h[2 * e]), int(h[2 * e + 1])) for e in range(self.epoch)]


def fingerprint(args):
    """Workers that disagree on the data or the model cannot train together:
    a hash of those flags (FNV-1a, cut to 52 bits to travel as a double)."""
    text = f"{args.seed} {args.features} {args.rows_per_shard} {args.shards} {args.epochs} {args.lr!r} {args.noise!r}"
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & ((1 << 64) - 1)
    return h >> 12


def brief(error):
    """An error's first clause, short enough for a line among the others'."""
    text = str(error).split("; ")[0]
    return text if len(text) <= 160 else text[:157] + "..."


def plan(args):
    nbytes = args.rows_per_shard * (args.features + 1) * 8
    return {"shards": [{"id": f"shard-{i:05}", "bytes": nbytes} for i in range(args.shards)],
            "epochs": args.epochs}


class ElasticTrainer:
    def __init__(self, args, cohort, member):
        self.args = args
        self.cohort = cohort
        self.m = member
        self.prefix = f"[{member.member}] "
        self.state = TrainState(args)
        self.truth = make_truth(args)
        self.comm = None
        self.world = None
        self.seq = 0          # the last collective's sequence number
        self.held = []        # leased, not trained yet
        self.pending = []     # in the state, to report after the next collective
        self.everyone_idle = True
        self.checkpoint = None
        self.checkpoint_failing = False

    def say(self, text):
        print(self.prefix + text, flush=True)

    def prepare_job(self):
        """Registers the dataset plan and opens this worker's checkpoint."""
        url = os.environ["COHORT_COORDINATOR"]
        client = self.cohort.CoordinatorClient(url if "://" in url else "http://" + url,
                                               token=os.environ.get("COHORT_COORDINATOR_TOKEN"))
        try:
            if self.args.register:
                try:
                    client.register_dataset(self.m.job, plan(self.args))
                except self.cohort.Mismatch as e:
                    raise SystemExit(f"train_numpy.py: job '{self.m.job}' has another dataset plan than "
                                     f"{self.args.shards} shards x {self.args.epochs} epochs: {e}")
            path = checkpoint_file(self.args.checkpoint, self.m.member, CHECKPOINT_KIND)
            if path is not None:
                try:
                    created_at = job_created_at(client, self.m.job)
                except ValueError as e:
                    raise SystemExit(f"train_numpy.py: {e}")
                owner = (self.m.job, created_at, fingerprint(self.args))
                self.checkpoint = Checkpoint(path, owner, CHECKPOINT_KIND)
        finally:
            client.close()
        if self.checkpoint is None:
            return
        values, note = self.checkpoint.load(len(self.state.serialize()))
        s = self.state
        if values is not None:
            s.deserialize(np.array(values))
            self.say(f"resumed from checkpoint {self.checkpoint.path} (restart "
                     f"{os.environ.get('COHORT_RESTART_COUNT', '0')}): epoch {s.epoch + 1}, step "
                     f"{s.applied_steps}, {int(s.included.sum())}/{self.args.shards} shards in")
        elif note:
            self.say(note)

    def save_checkpoint(self):
        if self.checkpoint is None:
            return
        try:
            self.checkpoint.save(self.state.serialize())
            self.checkpoint_failing = False
        except OSError as e:
            if not self.checkpoint_failing:
                self.say(f"{e.strerror} (training goes on; a restart would begin again)")
            self.checkpoint_failing = True

    def run(self):
        self.prepare_job()
        while True:
            if self.comm is None and not self.enter_world():
                continue
            if self.state.finished:
                status = self.finish()
                if status is not None:
                    return status
                self.leave_world()
                continue
            after = self.step()
            if after == "job done":
                self.say(f"the job's shards are all done without this world (at epoch {self.state.epoch + 1}); "
                         "nothing to train")
                self.leave_world()
                self.m.leave()
                return 0
            if after == "new world":
                self.leave_world()

    # -- worlds

    def await_new_round(self):
        deadline = time.monotonic() + self.args.world_timeout
        ask_at = time.monotonic()
        while not self.m.round_pending:
            if time.monotonic() >= ask_at:
                self.m.request_round()
                ask_at = time.monotonic() + 2.0
            if time.monotonic() > deadline:
                raise self.cohort.Timeout(f"world {self.world['generation']} broke and no new round "
                                          f"opened within {self.args.world_timeout} s")
            time.sleep(0.02)

    def enter_world(self):
        broken = self.world["generation"] if self.world else None
        while True:
            if broken is not None:
                self.await_new_round()
            self.world = self.m.next_world(timeout=self.args.world_timeout)
            if self.world["generation"] != broken:
                break
        w = self.world
        self.say(f"world {w['generation']}: rank {w['rank']} of {w['world_size']}")
        try:
            self.comm = self.m.communicator()
            self.sync_state()
        except self.cohort.InvalidArgument:
            raise
        except self.cohort.Error as e:
            self.say(f"world {w['generation']}: {brief(e)}; next round")
            self.leave_world()
            time.sleep(0.2)
            return False
        keep = []
        for lease in self.pending:
            e = self.state.epoch
            if lease["epoch"] > e or (lease["epoch"] == e and not self.state.included[lease["shard"]]):
                self.held.insert(0, lease)
            else:
                keep.append(lease)
        self.pending = keep
        self.everyone_idle = True
        return True

    def leave_world(self):
        if self.comm is not None:
            self.comm.close()
        self.comm = None

    def collective(self, run):
        """Runs collectives under one sequence number; the error text, or None."""
        self.seq += 1
        seq = self.seq
        self.m.set_collective(seq, True)
        try:
            run()
        except self.cohort.Error as e:
            return str(e)
        finally:
            self.m.set_collective(seq, False)
        return None

    def sync_state(self):
        """The rank that applied the most steps gives every rank its state."""
        size = self.comm.size
        mine = np.array([self.state.applied_steps, self.seq + 1, fingerprint(self.args)], dtype=np.int64)
        found = {}

        def gather():
            found["all"] = self.comm.allgather(mine, timeout=self.args.collective_timeout).reshape(size, 3)

        error = self.collective(gather)
        if error is not None:
            raise self.cohort.PeerFailed(f"state sync failed: {error}")
        everyone = found["all"]
        for r in range(size):
            if everyone[r, 2] != mine[2]:
                raise self.cohort.InvalidArgument(
                    f"state sync: rank {r} runs with other model or data flags than rank {self.world['rank']} "
                    "(--seed, --features, --rows-per-shard, --shards, --epochs, --lr, --noise must match)")
        root = int(np.argmax(everyone[:, 0]))  # the lowest rank with the most steps
        self.seq = int(everyone[:, 1].max())   # from here on every rank numbers collectives alike
        data = self.state.serialize()
        error = self.collective(lambda: self.comm.broadcast(data, root=root, timeout=self.args.collective_timeout))
        if error is not None:
            raise self.cohort.PeerFailed(f"state sync failed: {error}")
        self.state.deserialize(data)
        self.save_checkpoint()
        s = self.state
        self.say(f"state from rank {root}: epoch {s.epoch + 1}, step {s.applied_steps}, "
                 f"{int(s.included.sum())}/{self.args.shards} shards in")

    # -- steps

    def sort(self, lease, fresh=False):
        """The lease to train now, or None: kept for a later epoch, or its
        shard is in the state already (reported after the next step)."""
        s = self.state
        if lease["epoch"] < s.epoch or (lease["epoch"] == s.epoch and s.included[lease["shard"]]):
            if fresh:
                self.say(f"shard {lease['shard']} of epoch {lease['epoch'] + 1}: in the state already "
                         "(its holder died); reported")
            self.pending.append(lease)
            return None
        if lease["epoch"] > s.epoch:
            self.held.append(lease)
            return None
        return lease

    def pick_lease(self):
        """(lease to train or None, seconds waiting for the coordinator, round
        wanted, the job's shards all done)."""
        held, self.held = self.held, []
        pick = None
        for lease in held:
            if pick is not None:
                self.held.append(lease)
            else:
                pick = self.sort(lease)
        if pick is not None:
            return pick, 0.0, False, False
        # With a lease of a later epoch in hand, ask for more only while
        # nobody trains: else one rank could lease a whole epoch ahead.
        if self.held and not self.everyone_idle:
            return None, 0.0, False, False
        start = time.monotonic()
        try:
            got = self.m.next_shard()
        except self.cohort.NotFound:
            return None, time.monotonic() - start, False, False  # no plan yet
        except self.cohort.Error as e:
            self.say(f"next_shard: {brief(e)}")
            return None, time.monotonic() - start, True, False
        wait = time.monotonic() - start
        if not got.get("granted"):
            return None, wait, False, bool(got.get("finished"))
        if got["shard"] >= self.args.shards:
            raise SystemExit(f"train_numpy.py: the job leased shard {got['shard']} but --shards is "
                             f"{self.args.shards}: its dataset plan is not this program's")
        lease = {"lease": got["lease"], "shard": got["shard"], "epoch": got["epoch"]}
        return self.sort(lease, True), wait, False, False

    def report_pending(self):
        for lease in self.pending:
            try:
                self.m.shard_done(lease["lease"])
            except self.cohort.Error as e:
                self.say(f"shard_done(lease {lease['lease']}, shard {lease['shard']}): {brief(e)}")
        self.pending = []

    def step(self):
        """One step; what next: "next step", "new world" or "job done" (the
        job's shards are all done without this world: it came too late)."""
        args, s = self.args, self.state
        start = time.monotonic()
        want_round = self.m.round_pending
        lease, data_wait, asked, job_done = self.pick_lease()
        d = args.features
        sums = np.zeros(d + 5)  # grad, loss_sum, rows, round wanted, job done
        shard = np.array([-1], dtype=np.int64)
        if lease is not None:
            time.sleep(args.step_ms / 1000)
            x, y = make_shard(args, self.truth, lease["shard"])
            sums[:d + 1], sums[d + 1], sums[d + 2] = shard_gradient(s.w, s.b, x, y)
            shard[0] = lease["shard"]
        sums[d + 3] = 1.0 if (want_round or asked) else 0.0
        sums[d + 4] = 1.0 if job_done else 0.0

        gathered = {}

        def run():
            self.comm.allreduce(sums, timeout=args.collective_timeout)
            gathered["shards"] = self.comm.allgather(shard, timeout=args.collective_timeout).reshape(-1)

        in_collective = time.monotonic()
        error = self.collective(run)
        collective_wait = time.monotonic() - in_collective
        if error is not None:
            if lease is not None:
                self.held.insert(0, lease)
            self.say(f"step {s.applied_steps + 1}: collective failed, contribution dropped: {brief(error)}")
            return "new world"

        shards = [int(v) for v in gathered["shards"]]
        self.report_pending()  # every rank now has the state that includes them
        valid = [v for v in shards if v >= 0]
        if len(valid) != len(set(valid)):
            # Two ranks with one shard (a lease that expired while held):
            # every rank drops the step; the lowest of them keeps it.
            me = self.world["rank"]
            if lease is not None and shard[0] not in shards[:me]:
                self.held.insert(0, lease)
            self.say(f"step {s.applied_steps + 1}: a shard came from two ranks; step dropped")
        else:
            epoch = s.epoch
            if lease is not None:
                self.pending.append(lease)
            if s.apply_step(sums, shards) and self.world["rank"] == 0:
                loss, steps = s.history[-1]
                self.say(f"epoch {epoch + 1}/{args.epochs}: loss {loss:.6g} ({args.shards} shards, {steps} steps)")
        self.everyone_idle = sums[d + 2] == 0
        # Before the next collective, after which this step's shards are
        # reported done (examples/cohort_train/checkpoint.hpp says why).
        self.save_checkpoint()

        step_time = time.monotonic() - start
        self.m.record_step(s.applied_steps, step_time=step_time,
                           samples_per_sec=args.rows_per_shard / step_time if lease is not None else 0.0,
                           data_wait=data_wait, collective_wait=collective_wait)
        if self.everyone_idle:
            time.sleep(0.01)
        if sums[d + 4] > 0 and not s.finished:
            return "job done"
        return "new world" if sums[d + 3] > 0 else "next step"

    def finish(self):
        """Every epoch is in: reports what is left; rank 0 prints the table
        and checks. None when the world broke first."""
        one = np.ones(1)
        error = self.collective(lambda: self.comm.allreduce(one, timeout=self.args.collective_timeout))
        if error is not None:
            self.say(f"finishing: collective failed: {brief(error)}")
            return None
        self.report_pending()
        self.pending, self.held = self.held, []  # every epoch is in: nothing left to train
        self.report_pending()
        # Leave together: nobody closes while another still waits on it.
        self.collective(lambda: self.comm.barrier(timeout=self.args.collective_timeout))
        status = 0
        s = self.state
        if self.world["rank"] == 0:
            self.say(f"done: {len(s.history)} epochs, {s.applied_steps} steps")
            print_summary(self.prefix, s.history, self.args.shards)
            if self.args.check and not check_against_reference(self.prefix, s.w, s.b, self.args):
                status = 3
            if self.args.weights_out:
                write_weights(self.args.weights_out, s.w, s.b, [loss for loss, _ in s.history], self.args)
        self.leave_world()
        self.m.leave()
        return status


def run_elastic(args):
    import cohort
    from cohort.membership import Membership
    try:
        member = Membership.from_env()
    except cohort.Error as e:
        # A missing or malformed COHORT_* variable is a usage error.
        print(f"train_numpy.py: {e}", file=sys.stderr)
        return 2 if isinstance(e, cohort.InvalidArgument) else 1
    try:
        return ElasticTrainer(args, cohort, member).run()
    except cohort.Error as e:
        print(f"train_numpy.py: {e}", file=sys.stderr)
        return 1
    finally:
        member.close()


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
    p.add_argument("--reference", action="store_true", help="train alone, without a coordinator")
    p.add_argument("--check", dest="check", action="store_true", default=True,
                   help="rank 0 compares with the reference at the end (default)")
    p.add_argument("--no-check", dest="check", action="store_false")
    p.add_argument("--weights-out", metavar="FILE", help="write the final weights as JSON (rank 0)")
    p.add_argument("--checkpoint", metavar="FILE", help="this worker's checkpoint (default: "
                   "$COHORT_CHECKPOINT_DIR/train_numpy-LOCAL_RANK.ckpt, when set)")
    p.add_argument("--register", dest="register", action="store_true", default=True,
                   help="register the dataset plan with the job (default)")
    p.add_argument("--no-register", dest="register", action="store_false")
    p.add_argument("--world-timeout", type=float, default=600.0, metavar="S")
    p.add_argument("--collective-timeout", type=float, default=60.0, metavar="S")
    args = p.parse_args(argv)
    for name in ("epochs", "shards", "rows_per_shard", "features"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: must be at least 1, got {getattr(args, name)}")
    if not 0 <= args.seed < 2**64:
        p.error(f"--seed: must be in 0..2^64-1, got {args.seed}")
    if args.lr <= 0 or args.noise < 0 or args.step_ms < 0:
        p.error("--lr must be positive, --noise and --step-ms at least 0")
    if args.world_timeout <= 0 or args.collective_timeout <= 0:
        p.error("--world-timeout and --collective-timeout must be positive")
    if args.checkpoint == "":
        p.error("--checkpoint: needs a file name")
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
    return run_elastic(args)


if __name__ == "__main__":
    sys.exit(main())
