#!/usr/bin/env python3
"""The chaos soak: the training demo under cohort-run, faults at random.

A cohort-coordinator with --data-dir and NODES cohort-run --coordinator
launchers (2 workers each) train cohort-train for long enough that every
fault lands mid-training. At random, seeded times (the seed is printed, and
--seed replays it) the driver injects one of:

  coordinator  kill -9 of the coordinator, restarted on the same port and
               data directory
  worker       SIGKILL of a worker (its launcher relaunches it)
  launcher     SIGKILL of a launcher (its workers die with it, by
               PR_SET_PDEATHSIG) and a new one with the same --node-id
  stop         SIGSTOP of a worker for failure_timeout + 1 s, then SIGCONT:
               under survivors the coordinator fails it, it fences itself, and
               it rejoins or is relaunched; under --restart all its launcher
               heartbeats for it, so the others wait in their collective

The launchers run with --restart all by default (--restart survivors
is there to show what breaks under it: docs/benchmarks.md, "Chaos soak").
After each fault it waits for the job to recover: every worker in one world
(a new one, but after a coordinator restart or a stop under --restart all)
again and every worker's step moving on (GET /v1/jobs/JOB); the time from the
fault (for `stop`, from the SIGCONT) to then is the fault's recovery time.
Once the fault budget (--faults, or --minutes) is spent, or the training
nears its end, it stops injecting and lets the job finish. Then:

  - every shard of every epoch was done exactly once (the job's shards);
  - every launcher still running exits 0, and rank 0's weights equal
    `cohort-train --reference`'s within 1e-9;
  - no worker process and no new /dev/shm entry is left.

    chaos.py BUILD_DIR (--faults N | --minutes M) [--seed S] [--kinds K,...]
             [--nodes K] [--restart survivors|all] [--keep DIR]
    chaos.py --run PATH --train PATH --coordinator PATH (--faults N | ...)

Prints one line per fault and a table of recovery times per kind; exits 0
when every check passed. A watchdog kills everything if the soak overruns.
Standard library only; it reuses launcher.py, train_demo.py and
coordinator_restart.py from beside it.
"""

import argparse
import os
import random
import signal
import statistics
import sys
import time
import types

import case_runner  # beside this file, so on sys.path when run as a script
import coordinator_restart
import launcher as launch
import train_demo
from coordinator_http import CaseFailed, check, free_port, request

KINDS = ("coordinator", "worker", "launcher", "stop")
NPROC = 2
SHARDS = 24
STEP_MS = 20
HEARTBEAT_S = 0.25
FAILURE_TIMEOUT_S = 2.0
RECOVERY_TIMEOUT_S = 90.0
# Seconds of training each fault is given (the gap before it, the fault,
# the recovery), and epochs of the demo per second of training: they size
# the job so that the faults land mid-training (measured on a loaded 2-core
# machine; a faster one only leaves more training after the last fault).
SECONDS_PER_FAULT = 6.0
EPOCHS_PER_SECOND = 3.0
# No fault once fewer epochs than this are left: the job must end trained.
QUIET_EPOCHS = 12


def job_flags(nodes, node, restart):
    return [
        "--job", "train", "--restart", restart, "--nnodes", str(nodes), "--nproc-per-node", str(NPROC),
        "--min-workers", "2", "--heartbeat-interval", str(HEARTBEAT_S), "--failure-timeout", str(FAILURE_TIMEOUT_S),
        "--last-call", "0.5", "--relaunch-delay", "0.5", "--max-restarts", "100000", "--grace", "3",
        "--progress", "0", "--node-id", node]


class Soak:
    def __init__(self, args, workdir):
        self.args = args
        self.workdir = workdir
        self.rng = random.Random(args.seed)
        self.tools = types.SimpleNamespace(run=args.run, train=args.train, coordinator=args.coordinator)
        self.data_dir = os.path.join(workdir, "data")
        self.port = free_port()
        self.coordinator = None
        self.coordinator_starts = 0
        self.nodes = [f"n{i}" for i in range(args.nodes)]
        self.current = {}  # node -> its live Launcher
        self.incarnations = {n: 0 for n in self.nodes}
        self.recoveries = {k: [] for k in KINDS}
        self.failures = []
        self.faults = 0
        self.weights = os.path.join(workdir, "weights.json")
        self.world = args.nodes * NPROC
        budget = args.faults if args.faults else args.minutes * 60 / SECONDS_PER_FAULT
        self.epochs = int(budget * SECONDS_PER_FAULT * EPOCHS_PER_SECOND) + 2 * QUIET_EPOCHS
        self.train_flags = ["--epochs", str(self.epochs), "--shards", str(SHARDS), "--step-ms", str(STEP_MS)]

    # ------------------------------------------------------------ processes

    def start_coordinator(self):
        self.coordinator_starts += 1
        self.coordinator = coordinator_restart.start(self.tools.coordinator, self.data_dir, self.port, self.workdir,
                                                     f"coordinator.{self.coordinator_starts}")
        self.url = self.coordinator.url

    def start_launcher(self, node):
        k = self.incarnations[node]
        self.incarnations[node] += 1
        flags = job_flags(self.args.nodes, node, self.args.restart)
        self.current[node] = launch.Launcher(self.tools, self.workdir, f"{node}.{k}", flags,
                                             [self.tools.train, *self.train_flags, "--weights-out", self.weights],
                                             coordinator=self.url)

    def workers(self, node=None):
        """Live worker pids (of one node's launcher, or all): the processes
        whose environment names the coordinator (and the node)."""
        pids = launch.leftover_processes(self.url)
        if node is None:
            return pids
        mine = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if f"COHORT_NODE_ID={node}".encode() in f.read().split(b"\0"):
                        mine.append(pid)
            except OSError:
                pass
        return mine

    # ------------------------------------------------------------ the job

    def state(self):
        try:
            status, body = request(self.url, "GET", "/v1/jobs/train", timeout=2)
        except OSError:
            return None  # down or restarting
        return body if status == 200 and isinstance(body, dict) else None

    def epochs_done(self, state):
        shards = (state or {}).get("shards") or {}
        return sum(1 for e in shards.get("epochs", []) if e.get("done") == e.get("total"))

    def full_world(self, state):
        """(generation, the lowest step of a worker) when every worker is in
        one world and has reported a step in it."""
        if not state or state.get("world_size") != self.world:
            return None
        active = [m for m in state.get("members", []) if m.get("state") == "active" and m.get("rank") is not None]
        if len(active) != self.world:
            return None
        steps = [m.get("step") for m in active]
        if any(step is None for step in steps):
            return None  # a worker that has not trained in it yet
        return state.get("generation"), min(steps)

    def wait_recovered(self, kind, since, generation):
        """Seconds from `since` until the whole world trains again: a full
        world (of a later generation than `generation`, unless the fault
        was the coordinator's) whose step then moves on."""
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S
        seen = None
        while time.monotonic() < deadline:
            self.check_launchers()
            state = self.state()
            if state and (state.get("shards") or {}).get("finished"):
                return None  # the job ended during the recovery
            full = self.full_world(state)
            if full and (generation is None or full[0] > generation):
                if seen and seen[0] == full[0] and full[1] > seen[1]:
                    return time.monotonic() - since
                if not seen or seen[0] != full[0]:
                    seen = full
            time.sleep(0.1)
        # Not the failed ones: under --restart all every restart leaves 6.
        live = [m for m in (state or {}).get("members", []) if m.get("state") != "failed"]
        raise CaseFailed(f"{kind}: the job did not recover within {RECOVERY_TIMEOUT_S} s "
                         f"(last state: world_size {state and state.get('world_size')}, generation "
                         f"{state and state.get('generation')}, members "
                         f"{[(m.get('id'), m.get('state'), m.get('rank'), m.get('step')) for m in live]})"
                         f"{''.join(l.describe()[-2500:] for l in self.current.values())}")

    def check_launchers(self):
        for l in self.current.values():
            status = l.proc.poll()
            if status is not None and status != 0:
                raise CaseFailed(f"launcher {l.name} exited {status} during the soak{l.describe()}")

    # ------------------------------------------------------------ faults

    def inject(self, kind):
        """Injects one fault; returns (the moment recovery is timed from,
        what was done)."""
        if kind == "coordinator":
            self.coordinator.kill9()
            down = self.rng.uniform(0.2, 2.0)
            time.sleep(down)
            self.start_coordinator()
            return time.monotonic(), f"kill -9 coordinator, down {down:.1f} s"
        node = self.rng.choice(self.nodes)
        if kind == "launcher":
            l = self.current[node]
            l.proc.kill()
            l.proc.wait()
            gap = self.rng.uniform(0.2, 2.0)
            time.sleep(gap)
            self.start_launcher(node)
            return time.monotonic(), f"SIGKILL launcher {l.name} (pid {l.proc.pid}), restarted after {gap:.1f} s"
        deadline = time.monotonic() + 15  # a relaunched worker may not have started yet
        pids = self.workers(node)
        while not pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = self.workers(node)
        check(pids, f"{kind}: no live worker of node {node} to hit")
        pid = self.rng.choice(pids)
        if kind == "worker":
            os.kill(pid, signal.SIGKILL)
            return time.monotonic(), f"SIGKILL worker pid {pid} of {node}"
        held = FAILURE_TIMEOUT_S + 1.0
        os.kill(pid, signal.SIGSTOP)
        time.sleep(held)
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass  # its launcher stopped it meanwhile
        return time.monotonic(), f"SIGSTOP worker pid {pid} of {node} for {held:.1f} s"

    def kinds(self):
        """Every kind once per round, in a random order."""
        while True:
            order = list(self.args.kinds)
            self.rng.shuffle(order)
            yield from order

    def run(self):
        before_shm = set(os.listdir("/dev/shm"))
        ref = launch.reference(self.tools, self.workdir, self.train_flags)
        self.start_coordinator()
        for node in self.nodes:
            self.start_launcher(node)
        print(f"chaos: seed {self.args.seed}, {len(self.nodes)} launchers x {NPROC} workers, {self.epochs} epochs of "
              f"{SHARDS} shards, coordinator {self.url} (data {self.data_dir})", flush=True)
        self.wait_recovered("start", time.monotonic(), None)
        started = time.monotonic()
        end = started + self.args.minutes * 60 if self.args.minutes else None
        kinds = self.kinds()
        while True:
            if self.args.faults and self.faults >= self.args.faults:
                break
            if end and time.monotonic() >= end:
                break
            time.sleep(self.rng.uniform(0.5, 3.0))
            state = self.state()
            if self.epochs - self.epochs_done(state) < QUIET_EPOCHS:
                print(f"chaos: the training nears its end after {self.faults} faults; no more faults",
                      flush=True)
                break
            kind = next(kinds)
            # A new world must form, but for the coordinator's restart and,
            # under --restart all (where the launcher heartbeats for its
            # workers), a stopped worker: the world may go on as it was.
            same_world = kind == "coordinator" or (kind == "stop" and self.args.restart == "all")
            generation = None if same_world else (state or {}).get("generation")
            self.faults += 1
            at = time.monotonic()
            since, what = self.inject(kind)
            recovered = self.wait_recovered(kind, since, generation)
            if recovered is not None:
                self.recoveries[kind].append(recovered)
            print(f"chaos: fault {self.faults} at {at - started:6.1f} s: {what}; "
                  f"{'recovered in %.2f s' % recovered if recovered is not None else 'the job ended'} "
                  f"(epoch {self.epochs_done(self.state())}/{self.epochs})", flush=True)
        print(f"chaos: {self.faults} faults in {time.monotonic() - started:.0f} s; letting the job finish",
              flush=True)
        self.finish(ref, before_shm)
        self.table()

    def finish(self, ref, before_shm):
        statuses = {node: l.wait(600) for node, l in self.current.items()}
        for node, l in self.current.items():
            launch.check_done(l, statuses[node], 0)
        train_demo.check_shards(self.url, self.epochs, SHARDS)
        checked = [l for l in launch.launchers if "max |w - w_ref|" in l.output()]
        check(checked, "no launcher's output has rank 0's check of its weights")
        diff = launch.check_trained(checked[-1], self.weights, ref)
        self.coordinator.terminate()
        left = self.workers()
        check(not left, f"worker processes left: {left}")
        stray = [l.name for l in launch.launchers if l.proc.poll() is None]
        check(not stray, f"launchers left running: {stray}")
        new_shm = sorted(set(os.listdir("/dev/shm")) - before_shm)
        check(not new_shm, f"/dev/shm entries left: {new_shm}")
        print(f"chaos: every shard of {self.epochs} epochs done once; weights within {diff:.3g} of the reference; "
              f"no process and no /dev/shm entry left", flush=True)

    def table(self):
        print(f"{'fault':<12} {'count':>5} {'median s':>9} {'max s':>7}")
        for kind in KINDS:
            times = self.recoveries[kind]
            if times:
                print(f"{kind:<12} {len(times):>5} {statistics.median(times):>9.2f} {max(times):>7.2f}")
            else:
                print(f"{kind:<12} {0:>5} {'-':>9} {'-':>7}")
        sys.stdout.flush()


def kill_all():
    case_runner.kill_live([l.proc for l in launch.launchers] + coordinator_restart.Coordinator.children)


def clean_up():
    urls = {l.url for l in launch.launchers}
    launch.clean_up()
    case_runner.reap(coordinator_restart.Coordinator.children)
    for url in urls:
        launch.kill_leftovers(url)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir", nargs="?", help="the build tree (examples/cohort-run, cohort-train, "
                                                     "cohort-coordinator)")
    for exe in ("run", "train", "coordinator"):
        parser.add_argument(f"--{exe}", help=f"cohort-{exe} (default BUILD_DIR/examples/cohort-{exe})")
    parser.add_argument("--faults", type=int, default=0, help="inject this many faults")
    parser.add_argument("--minutes", type=float, default=0, help="inject faults for this long")
    parser.add_argument("--seed", type=int, default=None, help="the random seed (default: from the clock)")
    parser.add_argument("--restart", choices=("survivors", "all"), default="all",
                        help="cohort-run's --restart mode (default all: under survivors a restarted launcher "
                             "and the host blacklist end the soak, see docs/benchmarks.md)")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"the faults to inject, comma-separated (default {','.join(KINDS)})")
    parser.add_argument("--nodes", type=int, default=3, help="launchers (default 3)")
    parser.add_argument("--keep", metavar="DIR", help="on failure, copy the soak's working directory (every "
                                                       "launcher's output and events, the coordinator's log and "
                                                       "journal) to DIR, which must not exist yet")
    args = parser.parse_args()
    if (args.faults > 0) == (args.minutes > 0):
        parser.error("give exactly one of --faults N (N > 0) and --minutes M (M > 0)")
    args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in args.kinds if k not in KINDS]
    if unknown or not args.kinds:
        parser.error(f"--kinds: unknown fault {unknown[0] if unknown else '(none)'!r} (expected some of "
                     f"{', '.join(KINDS)})")
    if args.nodes < 2:
        parser.error(f"--nodes: at least 2, not {args.nodes}")
    if args.keep and os.path.exists(args.keep):
        parser.error(f"--keep: {args.keep!r} exists already (give a new directory)")
    for exe in ("run", "train", "coordinator"):
        path = getattr(args, exe) or (args.build_dir and os.path.join(args.build_dir, "examples", f"cohort-{exe}"))
        if not path or not os.access(path, os.X_OK):
            parser.error(f"--{exe}: no executable at {path!r} (give BUILD_DIR or --{exe} PATH; build it with "
                         f"cmake --build BUILD --target cohort-{exe})")
        setattr(args, exe, path)
    if args.seed is None:
        args.seed = int(time.time() * 1000) % 1_000_000
    budget = args.faults * SECONDS_PER_FAULT if args.faults else args.minutes * 60
    # A slow machine, then the end of the training; under ctest's TIMEOUT
    # (300 s) for the short run, so that the watchdog says what hung.
    deadline = budget * 2 + 150
    passed = case_runner.run_case(f"chaos (seed {args.seed})", lambda workdir: Soak(args, workdir).run(),
                                  prefix="cohort-chaos-", deadline_s=deadline, kill_all=kill_all,
                                  clean_up=clean_up, expected=(CaseFailed,), keep=args.keep)
    if not passed:
        print(f"chaos: replay with --seed {args.seed}", file=sys.stderr, flush=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
