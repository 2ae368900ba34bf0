#!/usr/bin/env python3
"""The training demo across emulated hosts (hosts.py, docs/hosts.md): a
cohort-coordinator on host 0 and one `cohort-run --coordinator` per host,
each with two cohort-train workers; only the network joins the hosts. Cases:

  launcher     3 hosts: one world of the 6 workers, every launcher exits 0,
               rank 0's weights equal `cohort-train --reference`'s within
               1e-9 and every shard of every epoch is done once
  host_killed  3 hosts; once the job trains, SIGKILL every process of host 1
               (its launcher and workers): the survivors meet in a world of
               the 4 workers of hosts 0 and 2 within failure_timeout +
               heartbeat_interval + last_call + 2 s and finish; host 1's
               workers never come back (nothing on host 1 relaunches them)
               and no other launcher relaunches anything; the weights are
               the reference's and every shard is done once
  host_killed_restart_all  the same with --restart all --max-restarts 1
               (torchrun's habit): each survivor's launcher restarts its
               workers once (charged to its budget: "restart 1 of 1"), and
               the restarted workers of hosts 0 and 2 form a world of 4,
               finish, and end with the reference's weights. A round whose
               rank 0 died with its host before publishing MASTER_ADDR is
               left for the next round, not waited for
  partition    3 hosts; once the job trains, host 1's link goes down. The
               survivors meet in a world of 4 within failure_timeout +
               heartbeat_interval + last_call + 2 s and train on. Host 1's
               workers, unable to reach the coordinator, fence themselves:
               a collective under way aborts naming the failure timeout
               ("fenced"), long before the collective's own timeout, and no
               collective of theirs fails for any other reason while they
               are cut off (a worker waiting on the coordinator for a lease
               is in no collective; the api test MembershipFence checks the
               fencing itself). Once the link is back, host 1's workers join
               a later round (a world of 6 again); all three launchers exit
               0, the weights are the reference's, every shard is done
               exactly once (none leased, none twice)

    hosts_training.py --run PATH --coordinator PATH --train PATH [CASE...]
    hosts_training.py BUILD_DIR [CASE...]

As root only: without root or namespaces each case is skipped (77) saying
why, except under CI=true, where it fails. A watchdog kills everything the
case started when it overruns; the hosts and every process on them go with
the case.
"""

import argparse
import contextlib
import json
import random
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import case_runner  # noqa: E402
import hosts  # noqa: E402
import launcher as runs  # noqa: E402  (cohort-run's events and checks)
from coordinator_http import CaseFailed, check  # noqa: E402

CASE_DEADLINE_S = 150.0
# Each host has its own ports, so nothing else can hold this one; random,
# because the leftover check finds a case's processes by the coordinator's
# URL in their environment, and other runs may use the same addresses.
def coordinator_port():
    return random.randrange(20000, 30000)

HEARTBEAT, FAILURE_TIMEOUT, LAST_CALL = 0.2, 1.5, 0.5
JOB_FLAGS = ["--heartbeat-interval", str(HEARTBEAT), "--failure-timeout", str(FAILURE_TIMEOUT), "--last-call",
             str(LAST_CALL), "--progress", "0", "--grace", "3", "--relaunch-delay", "0.2", "--nproc-per-node", "2",
             "--nnodes", "3", "--min-workers", "4", "--job", "hosts"]
# Long enough that a fault lands mid-training and the healed host still
# finds the job running: 8 steps an epoch of 6 workers, 12 of 4; 60 ms each.
TRAIN_FLAGS = ["--epochs", "12", "--shards", "48", "--step-ms", "60"]
# A failure is noticed within failure_timeout (a heartbeat checked every
# interval), and the round closes last_call later; 2 s for the rest.
RECOVERY_BOUND_S = FAILURE_TIMEOUT + HEARTBEAT + LAST_CALL + 2.0


class Tools:
    def __init__(self, run, coordinator, train):
        self.run, self.coordinator, self.train = run, coordinator, train


class HostLauncher(runs.Launcher):
    """cohort-run on an emulated host; its files in workdir (the hosts
    share this machine's file system)."""

    def __init__(self, cluster, host, tools, workdir, url, program, flags=()):
        self.name = "host%d" % host
        self.host = host
        self.events_path = os.path.join(workdir, f"{self.name}.events.jsonl")
        self.out_path = os.path.join(workdir, f"{self.name}.out")
        self.err_path = os.path.join(workdir, f"{self.name}.err")
        self.argv = [tools.run, "--coordinator", url, "--events", self.events_path, *JOB_FLAGS, "--node-id",
                     self.name, *flags, "--", *program]
        self.url = None
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = cluster.run(host, self.argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        runs.launchers.append(self)


class Job:
    """A coordinator on host 0 and a launcher on each of n hosts."""

    def __init__(self, cluster, tools, workdir, flags=()):
        self.cluster, self.tools, self.workdir = cluster, tools, workdir
        address = cluster.address(0)
        self.err_path = os.path.join(workdir, "coordinator.err")
        with open(self.err_path, "wb") as err:
            self.server = cluster.run(0, [tools.coordinator, "--host", address, "--port", str(coordinator_port())],
                                      stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        self.url = self.server.stdout.readline().decode().strip()
        check(self.url.startswith("http://"), f"the coordinator on host 0 did not start (exit {self.server.poll()})")
        self.ref = runs.reference(tools, workdir, TRAIN_FLAGS)
        self.weights = os.path.join(workdir, "weights.json")
        self.program = [tools.train, *TRAIN_FLAGS, "--weights-out", self.weights]
        self.launchers = [HostLauncher(cluster, i, tools, workdir, self.url, self.program, flags)
                          for i in range(cluster.n)]

    def state(self):
        """GET /v1/jobs/hosts, asked from host 0 (the coordinator is not
        reachable from this machine's own network)."""
        script = ("import sys, urllib.request; "
                  "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())")
        out = self.cluster.check_output(0, [sys.executable, "-c", script, self.url + "/v1/jobs/hosts"], timeout=15)
        return json.loads(out)

    def rounds_seen(self):
        """How many rounds each launcher has seen so far, by name."""
        return {l.name: len(self.rounds(l)) for l in self.launchers}

    def rounds(self, launcher):
        """The sorted workers of each round_formed event so far."""
        return [sorted(e.get("workers", [])) for e in launcher.of("round_formed")]

    def wait_training(self, timeout=60):
        """Until all 6 workers train in one world (the first round may close
        with 4 if a launcher starts late)."""
        for launcher in self.launchers:
            self.wait_round(launcher, workers(0, 1, 2), 0, "a world of the 6 workers", timeout)
        for launcher in self.launchers:
            launcher.wait_event(lambda e: e.get("event") == "training" and
                                e.get("generation") == launcher.of("round_formed")[-1].get("generation"),
                                "a `training` event in the world of 6", timeout)
        # A few steps in: the fault lands mid-training, not in the first round.
        time.sleep(0.6)

    def wait_round(self, launcher, workers, after, what, timeout):
        """Waits for a round_formed event of exactly `workers` among the
        events after the first `after` rounds of `launcher`; the time it was
        seen (the events are polled every 50 ms)."""
        want = sorted(workers)

        def new_round(_):
            return want in self.rounds(launcher)[after:]
        launcher.wait_event(new_round, what, timeout)
        return time.time()

    def finish(self, launchers, status=0):
        statuses = [l.wait(90) for l in launchers]  # all before any is judged: they share the workers' URL
        for l, s in zip(launchers, statuses):
            runs.check_done(l, s, status)
        with_rank0 = [l for l in launchers if "max |w - w_ref|" in l.output()]
        check(len(with_rank0) == 1, "rank 0's check is not in exactly one launcher's output" +
              "".join(l.describe() for l in launchers))
        diff = runs.check_trained(with_rank0[0], self.weights, self.ref)
        self.check_shards()
        return diff

    def check_shards(self):
        progress = self.state()["shards"]
        epochs, shards = int(TRAIN_FLAGS[1]), int(TRAIN_FLAGS[3])
        check(progress and progress["finished"] and progress["leases"] == 0, f"shards not finished: {progress}")
        check(len(progress["epochs"]) == epochs, f"{len(progress['epochs'])} epochs, expected {epochs}: {progress}")
        for e in progress["epochs"]:
            check(e["done"] == e["total"] == shards and e["todo"] == 0 and e["leased"] == 0,
                  f"epoch {e['epoch']}: {e} (expected all {shards} done, once)")

    def close(self):
        for launcher in self.launchers:
            launcher.events()
        runs.clean_up()
        if self.server.poll() is None:
            self.server.kill()
        self.server.wait()
        self.server.stdout.close()


@contextlib.contextmanager
def job_on_three_hosts(tools, workdir, flags=()):
    """(cluster, job): 3 emulated hosts and a job on them, taken down
    (launchers, coordinator, hosts) whatever happens."""
    with hosts.Cluster(3) as cluster:
        job = Job(cluster, tools, workdir, flags)
        try:
            yield cluster, job
        finally:
            job.close()


def workers(*host_ids):
    return [f"host{h}-{r}" for h in host_ids for r in (0, 1)]


def worker_output(launcher, member):
    """The lines of one worker in its launcher's stdout ([member] ...)."""
    prefix = f"[{member}]"
    return [line for line in launcher.output().splitlines() if line.startswith(prefix)]


# ------------------------------------------------------------------ cases

def case_launcher(tools, workdir):
    with job_on_three_hosts(tools, workdir) as (cluster, job):
        diff = job.finish(job.launchers)
        for launcher in job.launchers:
            check(workers(0, 1, 2) in job.rounds(launcher),
                  f"{launcher.name}: no round of the 6 workers of the 3 hosts{launcher.describe()}")
        print(f"launcher: one world of 6 over 3 hosts; weights within {diff:.3g} of the reference", flush=True)


def case_host_killed(tools, workdir):
    with job_on_three_hosts(tools, workdir) as (cluster, job):
        job.wait_training()
        seen = job.rounds_seen()
        killed_at = time.time()
        count = cluster.kill_processes(1)
        check(count >= 3, f"host 1 had {count} processes to kill, expected its launcher and 2 workers")
        job.launchers[1].wait(10)
        survivors = [job.launchers[0], job.launchers[2]]
        recovered = []
        for launcher in survivors:
            formed = job.wait_round(launcher, workers(0, 2), seen[launcher.name], "a world of hosts 0 and 2",
                                    RECOVERY_BOUND_S + 5)
            check(formed - killed_at <= RECOVERY_BOUND_S,
                  f"{launcher.name}: the world without host 1 formed {formed - killed_at:.2f} s after the "
                  f"kill, expected within {RECOVERY_BOUND_S:.1f} s{launcher.describe()}")
            recovered.append(formed - killed_at)
        diff = job.finish(survivors)
        for launcher in survivors:
            check(not launcher.of("relaunched"),
                  f"{launcher.name} relaunched a worker: only host 1's died{launcher.describe()}")
            late = [w for w in job.rounds(launcher)[seen[launcher.name]:] if any(m.startswith("host1") for m in w)]
            check(not late, f"{launcher.name}: host 1's workers are in a round after the kill: {late}")
        print(f"host_killed: a world of 4 {min(recovered):.2f} s after the kill (failure_timeout {FAILURE_TIMEOUT} s); "
              f"weights within {diff:.3g} of the reference", flush=True)


def case_host_killed_restart_all(tools, workdir):
    """torchrun's habit (--restart all): a host lost restarts every
    survivor's workers in a new world, charged to each launcher's budget."""
    with job_on_three_hosts(tools, workdir, ["--restart", "all", "--max-restarts", "1"]) as (cluster, job):
        job.wait_training()
        seen = job.rounds_seen()
        killed_at = time.time()
        cluster.kill_processes(1)
        job.launchers[1].wait(10)
        survivors = [job.launchers[0], job.launchers[2]]
        restarted = [f"{w}.1" for w in workers(0, 2)]
        for launcher in survivors:
            formed = job.wait_round(launcher, restarted, seen[launcher.name],
                                    "a world of hosts 0 and 2's restarted workers", RECOVERY_BOUND_S + 15)
            restarts = launcher.of("restarting")
            check(len(restarts) == 1, f"{launcher.name}: {len(restarts)} group restarts, expected 1"
                  f"{launcher.describe()}")
            check("restart 1 of 1" in launcher.output(),
                  f"{launcher.name}: the restart is not charged to the budget (no 'restart 1 of 1')"
                  f"{launcher.describe()}")
        diff = job.finish(survivors)
        print(f"host_killed_restart_all: one group restart per survivor (budget 1), a world of 4 "
              f"{formed - killed_at:.2f} s after the kill; weights within {diff:.3g} of the reference", flush=True)


FENCED = re.compile(r"fenced")


def case_partition(tools, workdir):
    with job_on_three_hosts(tools, workdir) as (cluster, job):
        job.wait_training()
        seen = job.rounds_seen()
        cut_at = time.time()
        cluster.link_down(1)
        a, b, c = job.launchers
        formed = [job.wait_round(l, workers(0, 2), seen[l.name], "a world of hosts 0 and 2", RECOVERY_BOUND_S + 5)
                  for l in (a, c)]
        check(max(formed) - cut_at <= RECOVERY_BOUND_S,
              f"the world without host 1 formed {max(formed) - cut_at:.2f} s after the link went down, expected "
              f"within {RECOVERY_BOUND_S:.1f} s{a.describe()}")
        # The far side fences itself: a collective under way aborts,
        # naming why. A worker waiting on the coordinator instead (a
        # lease, a report: retried through outages) is in no collective;
        # it learns when the link is back.
        before = {m: len(worker_output(b, m)) for m in workers(1)}
        time.sleep(FAILURE_TIMEOUT * 1.5 + HEARTBEAT + 1.0)
        fenced, failures = [], []
        for m in workers(1):
            lines = worker_output(b, m)[before[m]:]
            failures += [line for line in lines if "collective failed" in line and not FENCED.search(line)]
            if any(FENCED.search(line) for line in lines):
                fenced.append(m)
        check(not failures, f"host 1's collectives failed, while cut off, for another reason than fencing: "
              f"{failures}{b.describe()}")
        seen_a = len(job.rounds(a))
        cluster.link_up(1)
        healed_at = time.time()
        rejoined = job.wait_round(a, workers(0, 1, 2), seen_a, "a world of 6 again after the link came back",
                                  30)
        diff = job.finish(job.launchers)
        print(f"partition: a world of 4 {min(formed) - cut_at:.2f} s after the cut; {len(fenced)} of host 1's "
              f"2 workers were in a collective and fenced themselves; a world of 6 {rejoined - healed_at:.2f} s after the link came back; "
              f"weights within {diff:.3g} of the reference", flush=True)


CASES = {"launcher": case_launcher, "host_killed": case_host_killed,
         "host_killed_restart_all": case_host_killed_restart_all, "partition": case_partition}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir", nargs="?", help="the build tree")
    parser.add_argument("cases", nargs="*", help=f"cases to run (default all: {', '.join(CASES)})")
    parser.add_argument("--run", help="cohort-run")
    parser.add_argument("--coordinator", help="cohort-coordinator")
    parser.add_argument("--train", help="cohort-train")
    args = parser.parse_args()
    if args.build_dir in CASES:
        args.cases.insert(0, args.build_dir)
        args.build_dir = None
    if args.build_dir:
        ex = os.path.join(args.build_dir, "examples")
        args.run = args.run or os.path.join(ex, "cohort-run")
        args.coordinator = args.coordinator or os.path.join(ex, "cohort-coordinator")
        args.train = args.train or os.path.join(ex, "cohort-train")
    for flag, path in (("--run", args.run), ("--coordinator", args.coordinator), ("--train", args.train)):
        if not path or not os.access(path, os.X_OK):
            parser.error(f"{flag}: no executable at {path!r} (give BUILD_DIR or {flag} PATH)")
    unknown = [n for n in args.cases if n not in CASES]
    if unknown:
        parser.error(f"no case {', '.join(unknown)}; cases: {', '.join(CASES)}")
    reason = hosts.support()
    if reason:
        if os.environ.get("CI") == "true":
            print(f"FAILED: emulated hosts are needed in CI: {reason}", file=sys.stderr, flush=True)
            return 1
        print(f"SKIP: {reason}", flush=True)
        return 77
    tools = Tools(args.run, args.coordinator, args.train)
    results = [case_runner.run_case(name, lambda workdir, name=name: CASES[name](tools, workdir),
                                    prefix=f"cohort-hosts-{name}-", deadline_s=CASE_DEADLINE_S,
                                    kill_all=runs.kill_launchers, clean_up=runs.clean_up,
                                    expected=(CaseFailed, hosts.HostsError))
               for name in (args.cases or list(CASES))]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
