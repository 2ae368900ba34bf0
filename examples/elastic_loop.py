"""The elastic loop that train_numpy.py and torch/train_elastic.py share:
shards leased from the coordinator, one gradient sum per step all-reduced
over the world, one update per epoch, and the training state kept alike on
every rank through worker failures, with a checkpoint per worker.

The algorithm is cohort-train's (examples/cohort_train/elastic_loop.hpp
says why it is exact). Each rank holds the same state. A step: each rank
trains at most one leased shard of the current epoch that the state does
not include yet, the ranks all-reduce their sums and all-gather which
shards they trained, and every rank adds the step alike. A step whose
collectives fail adds nothing; the ranks meet in the next world, where the
rank that applied the most steps gives everyone its state. A lease is
reported done only after a later collective succeeded, and the state goes
to this worker's checkpoint before that collective, so a shard the
coordinator counts is in every rank's state and file.

What differs between the examples is a `steps` object (NumpySteps in
train_numpy.py, DDPSteps in torch/ddp_steps.py); what the loop asks of it:

    program, kind         the name in error lines; the checkpoint files' kind
    fingerprint           an int of 52 bits: flags_fingerprint() of the flags
                          that must match
    matching_flags        "--seed, ... must match", for the line saying they do not
    state                 the training state: epoch, applied_steps, finished,
                          history, included(shard), shards_in(), serialize(),
                          serialized_size(), deserialize(values)
    width                 how many of a step's sums are the model's
    plan()                the dataset plan to register
    enter_world(comm), leave_world()
    prepare(lease)        before the step's collective: this rank's work
                          (lease None: nothing to train)
    contribute(work, out) inside it: this rank's sums into out[:width]
    rows(sums)            the samples counted in a step's sums
    add_step(sums, shards, comm)  the reduced step into the state; True
                          when it completed an epoch
    epoch_line()          the epoch just completed, after "epoch E/N: "
    world_failure(error)  whether an exception other than cohort.Error is
                          a broken world's
    check_coordinator     whether rank 0 asks the coordinator at the end
    report(prefix)        rank 0's table and check at the end; True when OK
"""

import os
import sys
import time

import numpy as np

import cohort
from checkpoint_file import Checkpoint, checkpoint_file, job_created_at


def brief(error):
    """An error's first clause, short enough for a line among the others'."""
    text = str(error).split("; ")[0]
    return text if len(text) <= 160 else text[:157] + "..."


def flags_fingerprint(text):
    """Workers that disagree on the data or the model cannot train together:
    a hash of those flags (FNV-1a, cut to 52 bits to travel as a double)."""
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & ((1 << 64) - 1)
    return h >> 12


def add_flags(p, kind, check_help, weights_help):
    """The flags of every elastic example: the mode, the checkpoint, the job
    and the timeouts."""
    p.add_argument("--reference", action="store_true", help="train alone, without a coordinator")
    p.add_argument("--check", dest="check", action="store_true", default=True, help=check_help)
    p.add_argument("--no-check", dest="check", action="store_false")
    p.add_argument("--weights-out", metavar="FILE", help=weights_help)
    p.add_argument("--checkpoint", metavar="FILE", help="this worker's checkpoint (default: "
                   f"$COHORT_CHECKPOINT_DIR/{kind}-LOCAL_RANK.ckpt, when set)")
    p.add_argument("--register", dest="register", action="store_true", default=True,
                   help="register the dataset plan with the job (default)")
    p.add_argument("--no-register", dest="register", action="store_false")
    p.add_argument("--world-timeout", type=float, default=600.0, metavar="S")
    p.add_argument("--collective-timeout", type=float, default=60.0, metavar="S")


def check_flags(p, args):
    if args.world_timeout <= 0 or args.collective_timeout <= 0:
        p.error("--world-timeout and --collective-timeout must be positive")
    if args.checkpoint == "":
        p.error("--checkpoint: needs a file name")


class ElasticTrainer:
    def __init__(self, args, member, steps):
        self.args, self.m, self.steps = args, member, steps
        self.state = steps.state
        self.prefix = f"[{member.member}] "
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

    def client(self):
        url = os.environ["COHORT_COORDINATOR"]
        return cohort.CoordinatorClient(url if "://" in url else "http://" + url,
                                        token=os.environ.get("COHORT_COORDINATOR_TOKEN"))

    def prepare_job(self):
        """Registers the dataset plan and opens this worker's checkpoint."""
        program, kind = self.steps.program, self.steps.kind
        client = self.client()
        try:
            if self.args.register:
                try:
                    client.register_dataset(self.m.job, self.steps.plan())
                except cohort.Mismatch as e:
                    raise SystemExit(f"{program}: job '{self.m.job}' has another dataset plan than "
                                     f"{self.args.shards} shards x {self.args.epochs} epochs: {e}")
            path = checkpoint_file(self.args.checkpoint, self.m.member, kind)
            if path is not None:
                try:
                    created_at = job_created_at(client, self.m.job)
                except ValueError as e:
                    raise SystemExit(f"{program}: {e}")
                owner = (self.m.job, created_at, self.steps.fingerprint)
                self.checkpoint = Checkpoint(path, owner, kind)
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
                     f"{s.applied_steps}, {s.shards_in()}/{self.args.shards} shards in")
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
        """Joins the next world, connects and syncs the state; False (after a
        pause) when the world broke on the way."""
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
        self.steps.enter_world(self.comm)
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
        self.steps.leave_world()
        if self.comm is not None:
            self.comm.close()
        self.comm = None

    def collective(self, run):
        """Runs collectives under one sequence number; the error text, or None.
        Another exception than cohort's is a broken world's only when the
        steps object says so (DDP re-raises a failed bucket's cohort error
        as a RuntimeError); else it is a bug."""
        self.seq += 1
        seq = self.seq
        self.m.set_collective(seq, True)
        try:
            run()
        except cohort.Error as e:
            self.m.set_collective(seq, False)
            self.report_dead()
            return str(e)
        except Exception as e:
            if not self.steps.world_failure(e):
                raise
            self.m.set_collective(seq, False)
            self.report_dead()
            return str(e)
        finally:
            self.m.set_collective(seq, False)
        return None

    def report_dead(self):
        """A peer whose connection closed without a goodbye died (with its
        host, maybe, and its launcher): nobody else tells the coordinator,
        which would wait last_call for it in the next round. Say so."""
        if self.comm is None or not self.comm.dead_ranks:
            return
        try:
            if self.m.report_dead(self.comm):
                self.say(f"world {self.world['generation']}: reported {self.comm.dead_ranks} dead")
        except cohort.Error as e:
            self.say(f"world {self.world['generation']}: could not report the dead peers: {e}")

    def sync_state(self):
        """The rank that applied the most steps gives every rank its state."""
        size = self.comm.size
        mine = np.array([self.state.applied_steps, self.seq + 1, self.steps.fingerprint], dtype=np.int64)
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
                    f"({self.steps.matching_flags} must match)")
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
                 f"{s.shards_in()}/{self.args.shards} shards in")

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
            raise SystemExit(f"{self.steps.program}: the job leased shard {got['shard']} but --shards is "
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
        args, s, steps = self.args, self.state, self.steps
        start = time.monotonic()
        want_round = self.m.round_pending
        lease, data_wait, asked, job_done = self.pick_lease()
        work = steps.prepare(lease)
        if lease is not None:
            time.sleep(args.step_ms / 1000)
        k = steps.width
        sums = np.zeros(k + 2)  # the model's sums, round wanted, job done
        sums[k] = 1.0 if (want_round or asked) else 0.0
        sums[k + 1] = 1.0 if job_done else 0.0
        shard = np.array([-1 if lease is None else lease["shard"]], dtype=np.int64)
        gathered = {}

        def run():
            steps.contribute(work, sums)
            gathered["rows"] = steps.rows(sums)  # this rank's, before the sum
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
            if steps.add_step(sums, shards, self.comm) and self.world["rank"] == 0:
                self.say(f"epoch {epoch + 1}/{args.epochs}: {steps.epoch_line()}")
        self.everyone_idle = steps.rows(sums) == 0
        # Before the next collective, after which this step's shards are
        # reported done (examples/cohort_train/checkpoint.hpp says why).
        self.save_checkpoint()

        step_time = time.monotonic() - start
        self.m.record_step(s.applied_steps, step_time=step_time,
                           samples_per_sec=gathered["rows"] / step_time if lease is not None else 0.0,
                           data_wait=data_wait, collective_wait=collective_wait)
        if self.everyone_idle:
            time.sleep(0.01)
        if sums[k + 1] > 0 and not s.finished:
            return "job done"
        return "new world" if sums[k] > 0 else "next step"

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
            if self.steps.check_coordinator and not self.coordinator_counted_all():
                status = 3
            if not self.steps.report(self.prefix):
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


def run_elastic(args, steps):
    """Trains as a member of the job in the environment (COHORT_*); the
    exit status."""
    try:
        member = cohort.Membership.from_env()
    except cohort.Error as e:
        # A missing or malformed COHORT_* variable is a usage error.
        print(f"{steps.program}: {e}", file=sys.stderr)
        return 2 if isinstance(e, cohort.InvalidArgument) else 1
    try:
        return ElasticTrainer(args, member, steps).run()
    except cohort.Error as e:
        print(f"{steps.program}: {e}", file=sys.stderr)
        return 1
    finally:
        member.close()
