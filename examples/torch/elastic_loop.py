"""The elastic loop of train_elastic.py: DistributedDataParallel over
cohort's communicator, shards leased from the coordinator, and the
training state kept alike on every rank through worker failures.

The algorithm is cohort-train's (examples/cohort_train/elastic_loop.hpp
says why it is exact). Each rank holds the same state. A step: each rank
trains at most one leased shard of the current epoch that the state does
not include yet (a rank without one runs backward on an empty batch, as
DDP needs every rank), DDP averages the gradients through
cohort.torch.allreduce_hook, the ranks add up the loss and all-gather which
shards they trained, and every rank adds the step alike. A step whose
collectives fail adds nothing; the ranks meet in the next world, where the
rank that applied the most steps gives everyone its state, and build a new
communicator and a new DDP wrapper (DDP's reducer belongs to one set of
ranks). A lease is reported done only after a later collective succeeded,
and the state goes to this worker's checkpoint before that collective, so
a shard the coordinator counts is in every rank's state and file.
"""

import os
import re
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import cohort
import cohort.torch
from checkpoint_file import Checkpoint, checkpoint_file, job_created_at

KIND = "train_elastic"  # the checkpoint files' kind
# How a comm hook's cohort error reads once DDP re-raised it: "...: PeerFailed: allreduce #3 ..."
COHORT_ERROR_IN_DDP = re.compile(r"\b(PeerFailed|Closed|Timeout|Unavailable|Mismatch|InternalError): ")


def brief(error):
    """An error's first clause, short enough for a line among the others'."""
    text = str(error).split("; ")[0]
    return text if len(text) <= 160 else text[:157] + "..."


def own_process_group():
    """DDP wants a torch.distributed process group, which it uses only at
    construction (to check and broadcast the parameters). The state sync does
    both through cohort, and cohort's worlds change while a torch group's
    ranks are fixed, so each worker gives DDP a group of its own, of one."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


class ElasticTrainer:
    def __init__(self, args, member, state, data, loss_fn, fingerprint, report):
        self.args, self.m = args, member
        self.state, self.data, self.loss_fn = state, data, loss_fn
        self.fingerprint, self.report = fingerprint, report
        self.prefix = f"[{member.member}] "
        self.comm = None
        self.ddp = None
        self.world = None
        self.seq = 0          # the last collective's sequence number
        self.held = []        # leased, not trained yet
        self.pending = []     # in the state, to report after the next collective
        self.everyone_idle = True
        self.checkpoint = None
        self.checkpoint_failing = False

    def say(self, text):
        print(self.prefix + text, flush=True)

    def client(self):
        url = os.environ["COHORT_COORDINATOR"]
        return cohort.CoordinatorClient(url if "://" in url else "http://" + url,
                                        token=os.environ.get("COHORT_COORDINATOR_TOKEN"))

    def prepare_job(self):
        """Registers the dataset plan and opens this worker's checkpoint."""
        client = self.client()
        try:
            if self.args.register:
                sizes = np.diff(self.data.bounds) * 65 * 4  # a sample: 64 pixels and a label
                plan = {"shards": [{"id": f"digits-{i:03}", "bytes": int(n)} for i, n in enumerate(sizes)],
                        "epochs": self.args.epochs}
                try:
                    client.register_dataset(self.m.job, plan)
                except cohort.Mismatch as e:
                    raise SystemExit(f"train_elastic.py: job '{self.m.job}' has another dataset plan than "
                                     f"{self.args.shards} shards x {self.args.epochs} epochs: {e}")
            path = checkpoint_file(self.args.checkpoint, self.m.member, KIND)
            if path is not None:
                try:
                    created_at = job_created_at(client, self.m.job)
                except ValueError as e:
                    raise SystemExit(f"train_elastic.py: {e}")
                owner = (self.m.job, created_at, self.fingerprint)
                self.checkpoint = Checkpoint(path, owner, KIND)
        finally:
            client.close()
        if self.checkpoint is None:
            return
        values, note = self.checkpoint.load(self.state.serialized_size())
        s = self.state
        if values is not None:
            s.deserialize(values)
            self.say(f"resumed from checkpoint {self.checkpoint.path} (restart "
                     f"{os.environ.get('COHORT_RESTART_COUNT', '0')}): epoch {s.epoch + 1}, step "
                     f"{s.applied_steps}, {int((s.counts > 0).sum())}/{self.args.shards} shards in")
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
                try:
                    self.m.request_round()
                except cohort.Error:
                    pass  # no longer a member: the next heartbeat says so
                ask_at = time.monotonic() + 2.0
            if time.monotonic() > deadline:
                raise cohort.Timeout(f"world {self.world['generation']} broke and no new round "
                                          f"opened within {self.args.world_timeout} s")
            time.sleep(0.02)

    def enter_world(self):
        """Joins the next world, connects, syncs the state and wraps the model
        in a new DDP; False (after a pause) when the world broke on the way."""
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
        except cohort.InvalidArgument:
            raise  # flags differ: no world will do better
        except cohort.Error as e:
            self.say(f"world {w['generation']}: {brief(e)}; next round")
            self.leave_world()
            time.sleep(0.2)
            return False
        self.ddp = DistributedDataParallel(self.state.model)
        self.ddp.register_comm_hook(self.comm, cohort.torch.allreduce_hook)
        # Reported after the next step: only leases whose shard the synced
        # state includes; the others are trained again.
        keep = []
        for lease in self.pending:
            e = self.state.epoch
            if lease["epoch"] > e or (lease["epoch"] == e and not self.state.included(lease["shard"])):
                self.held.insert(0, lease)
            else:
                keep.append(lease)
        self.pending = keep
        self.everyone_idle = True
        return True

    def leave_world(self):
        self.ddp = None  # its reducer goes, and the hooks it put on the parameters
        if self.comm is not None:
            self.comm.close()
        self.comm = None

    def collective(self, run):
        """Runs collectives under one sequence number; the error text, or None.
        DDP raises a failed bucket's cohort error as a RuntimeError that
        names it; any other RuntimeError is a bug, not a broken world."""
        self.seq += 1
        seq = self.seq
        self.m.set_collective(seq, True)
        try:
            run()
        except cohort.Error as e:
            return str(e)
        except RuntimeError as e:
            if not COHORT_ERROR_IN_DDP.search(str(e)):
                raise
            return str(e)
        finally:
            self.m.set_collective(seq, False)
        return None

    def sync_state(self):
        """The rank that applied the most steps gives every rank its state."""
        size = self.comm.size
        mine = np.array([self.state.applied_steps, self.seq + 1, self.fingerprint], dtype=np.int64)
        found = {}

        def gather():
            found["all"] = self.comm.allgather(mine, timeout=self.args.collective_timeout).reshape(size, 3)

        error = self.collective(gather)
        if error is not None:
            raise cohort.PeerFailed(f"state sync failed: {error}")
        everyone = found["all"]
        for r in range(size):
            if everyone[r, 2] != mine[2]:
                raise cohort.InvalidArgument(
                    f"state sync: rank {r} runs with other model or data flags than rank {self.world['rank']} "
                    "(--seed, --shards, --epochs, --hidden, --lr, --momentum, --test-fraction must match)")
        root = int(np.argmax(everyone[:, 0]))  # the lowest rank with the most steps
        self.seq = int(everyone[:, 1].max())   # from here on every rank numbers collectives alike
        data = self.state.serialize()
        error = self.collective(lambda: self.comm.broadcast(data, root=root, timeout=self.args.collective_timeout))
        if error is not None:
            raise cohort.PeerFailed(f"state sync failed: {error}")
        self.state.deserialize(data)
        self.save_checkpoint()
        s = self.state
        self.say(f"state from rank {root}: epoch {s.epoch + 1}, step {s.applied_steps}, "
                 f"{int((s.counts > 0).sum())}/{self.args.shards} shards in")

    # -- leases

    def sort(self, lease, fresh=False):
        """The lease to train now, or None: kept for a later epoch, or its
        shard is in the state already (reported after the next step)."""
        s = self.state
        if lease["epoch"] < s.epoch or (lease["epoch"] == s.epoch and s.included(lease["shard"])):
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
        except cohort.NotFound:
            return None, time.monotonic() - start, False, False  # no plan yet
        except cohort.Error as e:
            self.say(f"next_shard: {brief(e)}")
            return None, time.monotonic() - start, True, False
        wait = time.monotonic() - start
        if not got.get("granted"):
            return None, wait, False, bool(got.get("finished"))
        if got["shard"] >= self.args.shards:
            raise SystemExit(f"train_elastic.py: the job leased shard {got['shard']} but --shards is "
                             f"{self.args.shards}: its dataset plan is not this program's")
        lease = {"lease": got["lease"], "shard": got["shard"], "epoch": got["epoch"]}
        return self.sort(lease, True), wait, False, False

    def report_pending(self):
        for lease in self.pending:
            try:
                self.m.shard_done(lease["lease"])
            except cohort.Error as e:
                self.say(f"shard_done(lease {lease['lease']}, shard {lease['shard']}): {brief(e)}")
        self.pending = []

    # -- steps

    def step(self):
        """One step; what next: "next step", "new world" or "job done" (the
        job's shards are all done without this world: it came too late)."""
        args, s = self.args, self.state
        start = time.monotonic()
        want_round = self.m.round_pending
        lease, data_wait, asked, job_done = self.pick_lease()
        if lease is not None:
            x, y = self.data.shard(lease["shard"])
            time.sleep(args.step_ms / 1000)
        else:
            x, y = self.data.nothing()
        sums = np.zeros(4)  # loss sum, samples, round wanted, job done
        sums[2] = 1.0 if (want_round or asked) else 0.0
        sums[3] = 1.0 if job_done else 0.0
        shard = np.array([-1 if lease is None else lease["shard"]], dtype=np.int64)
        gathered = {}

        def run():
            self.ddp.zero_grad(set_to_none=True)
            loss = self.loss_fn(self.ddp(x), y)
            loss.backward()  # every bucket averaged over the ranks by cohort.torch.allreduce_hook
            sums[0], sums[1] = float(loss), len(y)
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
            # The hook averaged: times the world's size, the sum over this step's shards.
            grad = torch.cat([p.grad.reshape(-1) for p in s.params]).double() * self.comm.size
            epoch = s.epoch
            if lease is not None:
                self.pending.append(lease)
            if s.add_step(grad, sums[0], sums[1], shards) and self.world["rank"] == 0:
                loss, steps, rows = s.history[-1][:3]
                self.say(f"epoch {epoch + 1}/{args.epochs}: loss {loss:.6g} ({args.shards} shards, {rows} "
                         f"samples, {steps} steps)")
        self.everyone_idle = sums[1] == 0
        # Before the next collective, after which this step's shards are
        # reported done.
        self.save_checkpoint()

        step_time = time.monotonic() - start
        self.m.record_step(s.applied_steps, step_time=step_time,
                           samples_per_sec=len(y) / step_time if lease is not None else 0.0,
                           data_wait=data_wait, collective_wait=collective_wait)
        if self.everyone_idle:
            time.sleep(0.01)
        if sums[3] > 0 and not s.finished:
            return "job done"
        return "new world" if sums[2] > 0 else "next step"

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
        if self.world["rank"] == 0:
            s = self.state
            self.say(f"done: {len(s.history)} epochs, {s.applied_steps} steps")
            if not self.coordinator_counted_all():
                status = 3
            if not self.report(self.prefix):
                status = 3
        self.leave_world()
        self.m.leave()
        return status

    def coordinator_counted_all(self):
        """The coordinator's side of "every shard once per epoch": its count
        of done shards, epoch by epoch."""
        client = self.client()
        try:
            progress = client.job_state(self.m.job).get("shards") or {}
        finally:
            client.close()
        epochs = progress.get("epochs", [])
        bad = [e for e in epochs if not (e.get("done") == e.get("total") == self.args.shards)]
        ok = len(epochs) == self.args.epochs and not bad and progress.get("leases") == 0
        if ok:
            self.say(f"coordinator: {self.args.shards}/{self.args.shards} shards done in each of {len(epochs)} "
                     "epochs, no lease left: OK")
        else:
            self.say(f"coordinator: FAIL: shard progress {progress}")
        return ok


def run_elastic(args, state, data, loss_fn, fingerprint, report):
    """Trains as a member of the job in the environment (COHORT_*); the
    exit status."""
    try:
        member = cohort.Membership.from_env()
    except cohort.Error as e:
        # A missing or malformed COHORT_* variable is a usage error.
        print(f"train_elastic.py: {e}", file=sys.stderr)
        return 2 if isinstance(e, cohort.InvalidArgument) else 1
    own_process_group()
    try:
        return ElasticTrainer(args, member, state, data, loss_fn, fingerprint, report).run()
    except cohort.Error as e:
        print(f"train_elastic.py: {e}", file=sys.stderr)
        return 1
    finally:
        member.close()
