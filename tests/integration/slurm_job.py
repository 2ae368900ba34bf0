#!/usr/bin/env python3
"""cohort-run --scheduler slurm on a real Slurm cluster (slurm_cluster.py:
munged, slurmctld and one slurmd per emulated host). Each case submits
examples/slurm/cohort.sbatch as an `sbatch -N 2` job of the 3 nodes;
cohort-run runs on the job's first node, hosts the coordinator and starts
one cohort-train worker per node as a job step. Cases:

  step_killed  once the job trains, the worker on the second node is
               SIGKILLed on its node, then (once its relaunch trains) the
               one on the first: each death reaches the policy (the
               launcher's `plan` event for it) and the worker is relaunched
               on its own node; the job finishes (cohort-run exits 0), rank 0's
               weights equal `cohort-train --reference`'s within 1e-9 and
               every shard of every epoch is done once. Prints how long
               each death took to reach the policy (docs/benchmarks.md).
  node_lost    once the job trains, the second node dies: its slurmd, its
               slurmstepd and its worker are SIGKILLed. Slurm declares the
               node down (SlurmdTimeout), srun says "Node failure", and the
               launcher reports the worker failed with cause node_lost; the
               policy removes it (no other node of the job has room) and
               the survivor finishes the job alone with the reference's
               weights; the node is never used again.
  oom          a cluster with cgroup memory limits; cohort-run with
               --srun-arg=--mem=60M runs a worker that takes 300 MB: Slurm
               kills its step, and its relaunch's, for memory; both
               failures come with cause oom and cohort-run exits 1.
  preempted    a cluster whose "high" partition preempts "low" (PreemptMode
               CANCEL, GraceTime 6 s); once the job trains, a job of "high"
               needs both nodes: the workers get SIGTERM and their failure
               comes with cause preempted (the step's line names no reason;
               the job's PreemptTime does); the job is cancelled after its
               grace time.
  stopped      once the job trains, SIGTERM to cohort-run (scancel --batch
               --signal=TERM): it stops its workers through srun and exits
               143; no worker step and no worker process is left.

    slurm_job.py --run PATH --train PATH [CASE...]

As root only: without root, namespaces or Slurm each case is skipped (77)
saying why, except under CI=true, where it fails. A watchdog kills
everything the case started when it overruns; the cluster, its daemons and
the emulated hosts go with the case whatever happens.
"""

import argparse
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
# Our own subnet, so that no other test's emulated hosts collide with ours.
os.environ.setdefault("COHORT_HOSTS_SUBNETS", "10.93.0.0/24")
import hosts  # noqa: E402
import slurm_cluster  # noqa: E402

SBATCH = os.path.join(SOURCE, "examples", "slurm", "cohort.sbatch")
CASE_DEADLINE_S = 150.0
TOLERANCE = 1e-9
HEARTBEAT, FAILURE_TIMEOUT, LAST_CALL = 0.2, 1.5, 0.5
RUN_FLAGS = ["--heartbeat-interval", str(HEARTBEAT), "--failure-timeout", str(FAILURE_TIMEOUT), "--last-call",
             str(LAST_CALL), "--progress", "0", "--grace", "3", "--relaunch-delay", "0.2", "--max-restarts", "5",
             "--job", "slurm"]
# Long enough for two kills and their relaunches mid-training.
TRAIN_FLAGS = ["--epochs", "12", "--shards", "48", "--step-ms", "60"]
VICTIMS = [(1, "host1-0"), (0, "host0-0")]  # (host, worker) killed in turn by step_killed


class CaseFailed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise CaseFailed(message)


class Tools:
    def __init__(self, run, train):
        self.run, self.train = run, train


class SlurmJob:
    """The sbatch job: its cohort-run's events and output, in workdir (the
    emulated hosts share this machine's file system)."""

    def __init__(self, sc, tools, workdir, nodes=2, program=None, run_flags=(), sbatch_flags=()):
        self.sc, self.workdir = sc, workdir
        self.events_path = os.path.join(workdir, "events.jsonl")
        self.out_path = os.path.join(workdir, "job.out")
        self.weights = os.path.join(workdir, "weights.json")
        program = program or [tools.train, *TRAIN_FLAGS, "--weights-out", self.weights]
        env = {"COHORT_RUN": tools.run, "NPROC_PER_NODE": "1", "MIN_WORKERS": "1",
               "COHORT_RUN_FLAGS": " ".join(RUN_FLAGS + list(run_flags)), "COHORT_EVENTS": self.events_path}
        argv = ["sbatch", "--parsable", "-N", str(nodes), *sbatch_flags, "--output", self.out_path, "--chdir",
                workdir, SBATCH, "--", *program]
        r = _run(sc.client_argv(0, argv), sc.env(env))
        check(r.returncode == 0, "sbatch failed (exit %d): %s" % (r.returncode, r.stderr.strip()))
        self.id = r.stdout.strip().split(";")[0]
        check(self.id.isdigit(), "sbatch --parsable printed %r, not a job id" % r.stdout)

    def events(self):
        try:
            with open(self.events_path) as f:
                return [json.loads(line) for line in f if line.strip()]
        except (OSError, ValueError):
            return []

    def of(self, kind):
        return [e for e in self.events() if e.get("event") == kind]

    def output(self):
        try:
            with open(self.out_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def describe(self):
        return "\n--- job output (last 4000 characters) ---\n%s\n--- slurmctld log ---\n%s" % (
            self.output()[-4000:], self.sc._log("log/slurmctld.log")[-1500:])

    def wait_event(self, predicate, what, timeout):
        """The first event that satisfies predicate, and when it was seen
        (the events file is read every 5 ms)."""
        limit = time.monotonic() + timeout
        while time.monotonic() < limit:
            for e in self.events():
                if predicate(e):
                    return e, time.monotonic()
            time.sleep(0.005)
        raise CaseFailed("no %s within %.0f s%s" % (what, timeout, self.describe()))

    def state(self):
        """The job's Slurm state (squeue; empty once it is over)."""
        return self.sc.client(0, ["squeue", "-h", "-j", self.id, "-o", "%T"], check=False).strip()

    def wait_done(self, timeout):
        limit = time.monotonic() + timeout
        while time.monotonic() < limit:
            done = self.of("done")
            if done and not self.state():
                return done[-1]
            time.sleep(0.2)
        raise CaseFailed("the job did not finish within %.0f s (squeue: %r)%s"
                         % (timeout, self.state(), self.describe()))

    def cancel(self):
        self.sc.client(0, ["scancel", self.id], check=False)


def _run(argv, env, timeout=30):
    import subprocess
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)


def worker_pids(sc, host, member):
    """The pids of `member`'s cohort-train process on host (by its netns
    and COHORT_MEMBER)."""
    net = os.readlink("/proc/%d/ns/net" % sc.cluster.hosts[host].pid)
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink("/proc/%s/ns/net" % entry) != net:
                continue
            with open("/proc/%s/environ" % entry, "rb") as f:
                env = f.read().split(b"\0")
            with open("/proc/%s/comm" % entry) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm == "cohort-train" and ("COHORT_MEMBER=%s" % member).encode() in env:
            pids.append(int(entry))
    return pids


def kill_all_on(sc, host):
    """Every process of host's network namespace but its init: slurmd,
    slurmstepd and the tasks, as a crash would."""
    net = os.readlink("/proc/%d/ns/net" % sc.cluster.hosts[host].pid)
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == sc.cluster.hosts[host].pid:
            continue
        try:
            if os.readlink("/proc/%s/ns/net" % entry) == net:
                os.kill(int(entry), signal.SIGKILL)
                count += 1
        except OSError:
            pass
    return count


def check_trained(job, tools, workdir):
    ref_path = os.path.join(workdir, "reference.json")
    r = _run([tools.train, "--reference", "--weights-out", ref_path, *TRAIN_FLAGS], dict(os.environ), timeout=60)
    check(r.returncode == 0, "cohort-train --reference failed: %s" % r.stderr)
    with open(ref_path) as f:
        ref = json.load(f)
    check(re.search(r"max \|w - w_ref\| = \S+ \(tolerance 1e-9\): OK", job.output()),
          "rank 0's check did not pass%s" % job.describe())
    with open(job.weights) as f:
        got = json.load(f)
    values, expected = got["weights"] + [got["bias"]], ref["weights"] + [ref["bias"]]
    check(len(values) == len(expected), "%d weights, expected %d" % (len(values), len(expected)))
    diff = max(abs(a - b) for a, b in zip(values, expected))
    check(diff <= TOLERANCE, "the weights differ from the reference by %g" % diff)
    return diff


def check_done(job, status):
    done = job.wait_done(90)
    check(done.get("exit_code") == status, "cohort-run ended with %s (%s), expected %d%s"
          % (done.get("exit_code"), done.get("reason"), status, job.describe()))


def wait_training(job, after=0):
    """Until a `training` event later than `after` (launcher seconds)."""
    job.wait_event(lambda e: e.get("event") == "training" and e.get("t", 0) > after, "training", 60)
    time.sleep(0.5)  # a few steps in


# ------------------------------------------------------------------ cases

def case_step_killed(tools, workdir):
    with slurm_cluster.SlurmCluster(3, workdir) as sc:
        job = SlurmJob(sc, tools, workdir)
        try:
            starts = job.wait_event(lambda e: e.get("event") == "worker_started", "a worker started", 60)[0]
            check(starts.get("host") in ("host0", "host1"), "worker started on %s" % starts.get("host"))
            wait_training(job)
            latencies = []
            # One kill per node: a second failure on one host within the
            # blacklist window would (rightly) keep its worker off it.
            for kill, (host, member) in enumerate(VICTIMS):
                pids = worker_pids(sc, host, member)
                check(len(pids) == 1, "kill %d: %s's cohort-train on host%d: pids %s%s"
                      % (kill + 1, member, host, pids, job.describe()))
                plans_before = len(job.of("plan"))
                killed = time.monotonic()
                os.kill(pids[0], signal.SIGKILL)
                _, seen = job.wait_event(lambda e: len(job.of("plan")) > plans_before,
                                         "a plan after kill %d" % (kill + 1), 20)
                latencies.append(seen - killed)
                failures = [x for x in job.of("worker_failed") if x.get("worker") == member]
                check(len(failures) == 1 and failures[0].get("signal") == 9 and failures[0].get("cause") == "none"
                      and failures[0].get("host") == "host%d" % host,
                      "kill %d: worker_failed events %s, expected one, signal 9 on host%d, cause none"
                      % (kill + 1, failures, host))
                plan = job.of("plan")[-1]
                check(any(s.get("kind") == "relaunch" and s.get("node") == member for s in plan.get("steps", [])),
                      "kill %d: the plan does not relaunch %s: %s" % (kill + 1, member, plan))
                # Relaunched on its own node, and training again before the next kill.
                restarted = job.wait_event(
                    lambda e: e.get("event") == "relaunched" and e.get("worker") == member,
                    "%s's relaunch" % member, 20)[0]
                limit = time.monotonic() + 20
                while time.monotonic() < limit and len(worker_pids(sc, host, member)) != 1:
                    time.sleep(0.05)
                check(len(worker_pids(sc, host, member)) == 1,
                      "%s was not relaunched on host%d (%s)%s" % (member, host, restarted, job.describe()))
                wait_training(job, restarted.get("t", 0))
            check_done(job, 0)
            diff = check_trained(job, tools, workdir)
            check(len(job.of("worker_failed")) == len(VICTIMS),
                  "failures other than the kills: %s" % job.of("worker_failed"))
        finally:
            job.cancel()
    print("step_killed: workers killed on host1 and host0, each relaunched on its node; weights within %.3g of "
          "the reference" % diff)
    print("worker death to the policy (SIGKILL on its node to cohort-run's plan event): %s ms; max %.0f ms"
          % (", ".join("%.0f" % (1000 * t) for t in latencies), 1000 * max(latencies)), flush=True)
    return latencies


def case_node_lost(tools, workdir):
    with slurm_cluster.SlurmCluster(3, workdir) as sc:
        job = SlurmJob(sc, tools, workdir)
        try:
            wait_training(job)
            killed = time.monotonic()
            count = kill_all_on(sc, 1)
            check(count >= 3, "host1 had %d processes to kill, expected slurmd, slurmstepd and a worker" % count)
            failed, seen = job.wait_event(lambda e: e.get("event") == "worker_failed" and
                                          e.get("worker") == "host1-0", "host1-0's failure", 60)
            check(failed.get("cause") == "node_lost" and "node host1 lost" in failed.get("detail", ""),
                  "host1-0 failed with %s, expected cause node_lost%s" % (failed, job.describe()))
            plan = job.wait_event(lambda e: e.get("event") == "plan" and e.get("t", 0) >= failed.get("t", 0),
                                  "a plan for host1-0", 10)[0]
            check(any(s.get("kind") == "remove" and s.get("node") == "host1-0" for s in plan.get("steps", [])),
                  "the plan does not remove host1-0: %s" % plan)
            check_done(job, 0)
            diff = check_trained(job, tools, workdir)
            check(not job.of("relaunched"), "something was relaunched: %s" % job.of("relaunched"))
            state = sc.node_states().get("host1", "")
            check(state.startswith("down"), "sinfo shows host1 %r, expected down" % state)
        finally:
            job.cancel()
    print("node_lost: host1 died; cause node_lost %.1f s later (SlurmdTimeout %d s); the job finished on host0, "
          "weights within %.3g of the reference" % (seen - killed, 5, diff), flush=True)


def case_oom(tools, workdir):
    with slurm_cluster.SlurmCluster(2, workdir, memory_limits=True) as sc:
        hog = [sys.executable, "-c", "import time; x = bytearray(b'x' * (300 << 20)); time.sleep(30)"]
        job = SlurmJob(sc, tools, workdir, nodes=1, program=hog, sbatch_flags=["--mem=900M"],
                       run_flags=["--srun-arg=--mem=60M", "--max-restarts", "1"])
        try:
            check_done(job, 1)
            failures = job.of("worker_failed")
            check(len(failures) == 2, "%d worker failures, expected the worker and its one relaunch: %s%s"
                  % (len(failures), failures, job.describe()))
            for f in failures:
                check(f.get("cause") == "oom" and "out of memory" in f.get("detail", ""),
                      "a failure without cause oom: %s%s" % (f, job.describe()))
            check(any(s.get("kind") == "relaunch" for s in job.of("plan")[0].get("steps", [])),
                  "the first OOM was not relaunched: %s" % job.of("plan")[0])
        finally:
            job.cancel()
    print("oom: the step of --mem=60M that took 300 MB was killed by Slurm's cgroup, twice; cause oom each time: %s"
          % failures[0].get("detail"), flush=True)


def case_preempted(tools, workdir):
    with slurm_cluster.SlurmCluster(2, workdir, preemption_grace_s=6) as sc:
        job = SlurmJob(sc, tools, workdir)
        try:
            wait_training(job)
            r = _run(sc.client_argv(0, ["sbatch", "--parsable", "-p", "high", "-N", "2", "--exclusive", "--output",
                                        os.path.join(workdir, "high.out"), "--wrap", "sleep 1"]), sc.env())
            check(r.returncode == 0, "sbatch of the high job failed: %s" % r.stderr.strip())
            high = r.stdout.strip().split(";")[0]
            failed, _ = job.wait_event(lambda e: e.get("event") == "worker_failed", "a worker's failure", 30)
            check(failed.get("cause") == "preempted" and "preempted" in failed.get("detail", ""),
                  "the first failure is %s, expected cause preempted%s" % (failed, job.describe()))
            # The job is cancelled at the end of its grace time; the high job runs and ends.
            limit = time.monotonic() + 60
            while time.monotonic() < limit and (job.state() or sc.client(0, ["squeue", "-h", "-j", high],
                                                                          check=False).strip()):
                time.sleep(0.3)
            check(not job.state(), "the preempted job is still there: %s" % job.state())
        finally:
            job.cancel()
    print("preempted: a job of the high partition took the nodes; the workers' failures came with cause preempted "
          "(%s)" % failed.get("detail"), flush=True)


def worker_steps(sc, job):
    """The job's steps other than the batch step, as 'ID NAME'."""
    out = sc.client(0, ["squeue", "-h", "--steps", "-j", job.id, "-o", "%i %j"], check=False)
    return [line.strip() for line in out.splitlines() if line.strip() and ".batch" not in line]


def case_stopped(tools, workdir):
    with slurm_cluster.SlurmCluster(3, workdir) as sc:
        job = SlurmJob(sc, tools, workdir)
        try:
            wait_training(job)
            steps = worker_steps(sc, job)
            check(sorted(s.split()[1] for s in steps) == ["host0-0", "host1-0"],
                  "the job's worker steps are %s, expected host0-0 and host1-0" % steps)
            # SIGTERM to the batch script, which is cohort-run (exec).
            sc.client(0, ["scancel", "--batch", "--signal=TERM", job.id])
            done, _ = job.wait_event(lambda e: e.get("event") == "done", "cohort-run's done event", 30)
            check(done.get("exit_code") == 143, "cohort-run ended with %s, expected 143 (SIGTERM)" % done)
            limit = time.monotonic() + 5  # slurmctld may list a step a moment after its srun ended
            left = worker_steps(sc, job)
            while left and time.monotonic() < limit:
                time.sleep(0.2)
                left = worker_steps(sc, job)
            check(not left, "worker steps left after cohort-run stopped: %s" % left)
            check(not worker_pids(sc, 0, "host0-0") and not worker_pids(sc, 1, "host1-0"),
                  "a worker process is left on its node")
            check(not job.of("worker_failed"), "workers reported failed: %s" % job.of("worker_failed"))
        finally:
            job.cancel()
    print("stopped: SIGTERM to cohort-run ended both worker steps and their processes; cohort-run exited 143",
          flush=True)


CASES = {"step_killed": case_step_killed, "node_lost": case_node_lost, "oom": case_oom,
         "preempted": case_preempted, "stopped": case_stopped}


def run_case(tools, name):
    workdir = tempfile.mkdtemp(prefix="cohort-slurm-%s-" % name)
    os.chmod(workdir, 0o755)
    done = threading.Event()

    def watchdog():
        if not done.wait(CASE_DEADLINE_S):
            print("FAIL %s: overran %.0f s; killing everything it started" % (name, CASE_DEADLINE_S), flush=True)
            slurm_cluster.SlurmCluster.close_all()  # the daemons, slurmstepd and the tasks
            os.kill(os.getpid(), signal.SIGTERM)  # hosts.py's handler closes the hosts
    threading.Thread(target=watchdog, daemon=True).start()
    try:
        CASES[name](tools, workdir)
        return 0
    except (CaseFailed, slurm_cluster.SlurmError, hosts.HostsError) as e:
        print("FAIL %s: %s" % (name, e), flush=True)
        return 1
    finally:
        done.set()
        shutil.rmtree(workdir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="cohort-run")
    parser.add_argument("--train", required=True, help="cohort-train")
    parser.add_argument("cases", nargs="*", help="of: %s (default: all)" % ", ".join(sorted(CASES)))
    args = parser.parse_args()
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error("unknown case %s; the cases are %s" % (", ".join(unknown), ", ".join(sorted(CASES))))
    why = slurm_cluster.support()
    if why:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            print("FAIL: CI=true but %s" % why, flush=True)
            return 1
        print("SKIP: %s" % why, flush=True)
        return hosts.SKIP
    tools = Tools(os.path.abspath(args.run), os.path.abspath(args.train))
    status = 0
    for name in args.cases or sorted(CASES):
        status |= run_case(tools, name)
    return status


if __name__ == "__main__":
    sys.exit(main())
