#!/usr/bin/env python3
"""cohort-run as a user runs it: `cohort-run --standalone ... --events FILE
-- PROGRAM` (or --coordinator URL), started as a subprocess, judged by its exit status and its
events file (JSON lines), never by timing beyond generous bounds. Cases:

  signals           a long cohort-train job; once it trains, SIGTERM to
                    cohort-run: exit 143, a `signal` then a `done` event with
                    exit_code 143, no worker process left. Then the same
                    with SIGINT: 130
  exit_codes        bad flags: 2, a message on stderr naming the flag, and
                    nothing started; two workers of /bin/true: 0; one worker
                    that always exits 3, --max-restarts 1: relaunched once,
                    then removed with "relaunch budget 1 used up", exit 1
                    (a larger budget would meet the blacklist first)
  budget_blacklist  the job's budget: two workers of `exit 1` with
                    --max-restarts 1, one relaunch in all, the other worker
                    removed with "job: relaunch budget 1 used up". The host
                    blacklist: the same with --max-restarts 5: the second
                    failure within 300 s blacklists the host (a plan says
                    so) and nothing is relaunched during its cooldown
  straggler         three workers, the one with LOCAL_RANK 1 five times
                    slower (--slow 1:5, --straggler-for 2): a `straggler`
                    event for it, a plan that removes it and launches
                    another, a `relaunched` event for a new worker id in its
                    place; exit 0, rank 0's check OK and its weights equal
                    `cohort-train --reference`'s
  hang              three workers, LOCAL_RANK 2 stalls before step 10
                    (--hang-timeout 3, the others wait in the collective up
                    to 60 s): `hung` events and one `job_hung`, cause
                    collective, naming the stalled worker's rank and member
                    as the one that never entered the collective; one plan
                    restarts all workers (or relaunches the stalled one), no
                    `hung` event about the restarted workers, and the job
                    completes with exit 0, rank 0's weights the reference's
  skip_collective   LOCAL_RANK 1 never enters collective 8
                    (--skip-collective 1:8, --max-restarts 0): the diagnosis
                    names its rank and member as never having entered
                    collective 8 and the other ranks as waiting in it; then
                    SIGTERM ends the job (143) with no worker left
  restart_all       --restart all, LOCAL_RANK 1 killed (--kill-worker 1@1.5):
                    one group restart, every worker started again under a new
                    id (NODE-R.1), the stopped processes' shard leases given
                    back: every shard of every epoch done once, exit 0, rank
                    0's weights the reference's
  two_nodes         a cohort-coordinator and two cohort-run --coordinator
                    (nodes a and b, --nnodes 2, 2 workers each): one world
                    of the 4 workers, both launchers exit 0, rank 0's
                    weights the reference's
  replica_list      cohort-run --coordinator DEAD:PORT,HOST:PORT (a list of
                    replicas whose first is down): the launcher and its two
                    cohort-train workers (which get the list in
                    COHORT_COORDINATOR) pass the dead one over; exit 0,
                    rank 0's weights the reference's
  failed_waiting    --restart all, two cohort-run --coordinator (nodes a and
                    b): a's workers wait for b's; a is stopped (SIGSTOP) past
                    the failure timeout, so the coordinator fails the ids it
                    waits with, then continued and b started: a joins
                    again (a `rejoining` event) instead of waiting out the
                    60 s for a round that cannot admit failed ids; one world
                    of the 4, both launchers exit 0 (chaos soak, finding 6)
  https             a cohort-coordinator with --tls-cert/--tls-key/
                    --tls-client-ca (certificates made here with openssl),
                    cohort-run --coordinator https://... with
                    COHORT_COORDINATOR_CACERT/_CERT/_KEY: the launcher and its
                    two workers (their store coordinator+https://) train to
                    the reference's weights, exit 0; without the client
                    certificate, cohort-run fails naming it

    launcher.py --run PATH --train PATH [CASE...]
    launcher.py BUILD_DIR [CASE...]

After every case no process started with this run's coordinator address in
its environment may be left (the workers and anything they started). A
watchdog kills every child and fails the case when it overruns, so the test
never hangs. Standard library only.
"""

import argparse
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

import case_runner
from coordinator_http import CaseFailed, check, request

CASE_DEADLINE_S = 120.0
TOLERANCE = 1e-9
# Quick rounds and failure detection; no progress lines.
JOB_FLAGS = ["--heartbeat-interval", "0.2", "--failure-timeout", "1.5", "--last-call", "0.5", "--progress", "0",
             "--grace", "3", "--node-id", "h1"]

launchers = []  # every cohort-run started, for the watchdog and the clean-up


class Launcher:
    """One cohort-run with a standalone coordinator; its stdout and stderr
    go to files in workdir, its events to events.jsonl there."""

    def __init__(self, tools, workdir, name, flags, program, coordinator=None):
        self.name = name
        self.events_path = os.path.join(workdir, f"{name}.events.jsonl")
        self.out_path = os.path.join(workdir, f"{name}.out")
        self.err_path = os.path.join(workdir, f"{name}.err")
        where = ["--coordinator", coordinator] if coordinator else ["--standalone"]
        self.argv = [tools.run, *where, "--events", self.events_path, *flags, "--", *program]
        self.url = None
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        launchers.append(self)

    def events(self):
        """The events written so far; a last line not yet ended is left out."""
        try:
            with open(self.events_path) as f:
                text = f.read()
        except FileNotFoundError:
            return []
        out = []
        for line in text.split("\n")[:-1]:
            try:
                out.append(json.loads(line))
            except ValueError as e:
                raise CaseFailed(f"{self.name}: an events line is not JSON ({e}): {line!r}") from None
        for e in out:
            if e.get("event") == "coordinator" and self.url is None:
                self.url = e.get("url")
        return out

    def of(self, kind):
        return [e for e in self.events() if e.get("event") == kind]

    def output(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def stderr(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def describe(self):
        events = "\n".join(json.dumps(e) for e in self.events())
        return (f"\n--- {self.name} (exit {self.proc.poll()}): {' '.join(self.argv)}\n--- events:\n{events}\n"
                f"--- stdout (last 3000):\n{self.output()[-3000:]}\n--- stderr (last 1500):\n{self.stderr()[-1500:]}")

    def wait_event(self, predicate, what, timeout):
        """The first event for which predicate holds, within timeout s."""
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events():
                if predicate(e):
                    return e
            if self.proc.poll() is not None:
                # It may have written the event just before exiting.
                for e in self.events():
                    if predicate(e):
                        return e
                raise CaseFailed(f"{self.name} exited before {what}{self.describe()}")
            if time.monotonic() > deadline:
                raise CaseFailed(f"no {what} within {timeout} s{self.describe()}")
            time.sleep(0.05)

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise CaseFailed(f"{self.name} did not exit within {timeout} s{self.describe()}") from None


def run_to_end(tools, workdir, name, flags, program, timeout=60):
    """Starts cohort-run and waits for it; (launcher, exit status)."""
    launcher = Launcher(tools, workdir, name, flags, program)
    status = launcher.wait(timeout)
    return launcher, status


def leftover_processes(url):
    """Pids of live processes whose environment names this coordinator."""
    if not url:
        return []
    needle = f"COHORT_COORDINATOR={url}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            pass  # gone, a zombie, or not ours
    return found


def kill_leftovers(url):
    for pid in leftover_processes(url):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def check_no_workers_left(launcher):
    """After cohort-run exited: none of its workers (nor their children)
    runs, neither the ones worker_started named nor relaunched ones."""
    launcher.events()  # learns the url
    check(launcher.url, f"{launcher.name}: no coordinator event{launcher.describe()}")
    pids = [e["pid"] for e in launcher.of("worker_started")]
    deadline = time.monotonic() + 5  # the kernel may take a moment to tear down
    left = leftover_processes(launcher.url)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = leftover_processes(launcher.url)
    described = []
    for pid in left:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            described.append(f"{pid} ({command})")
        except OSError:
            described.append(str(pid))
    check(not left, f"{launcher.name}: worker processes left after cohort-run exited: {', '.join(described)} "
                     f"(worker_started pids {pids}){launcher.describe()}")


def check_done(launcher, status, expected):
    check(status == expected, f"{launcher.name}: exit {status}, expected {expected}{launcher.describe()}")
    events = launcher.events()
    check(events and events[-1].get("event") == "done",
          f"{launcher.name}: the last event is not `done`{launcher.describe()}")
    check(events[-1].get("exit_code") == expected,
          f"{launcher.name}: `done` says exit_code {events[-1].get('exit_code')}, expected {expected}"
          f"{launcher.describe()}")
    check(sum(1 for e in events if e.get("event") == "done") == 1,
          f"{launcher.name}: more than one `done` event{launcher.describe()}")
    check_no_workers_left(launcher)
    return events


def plans(launcher):
    return launcher.of("plan")


def steps_of(plan, kind):
    return [s for s in plan.get("steps", []) if s.get("kind") == kind]


def started_by_local_rank(launcher, local_rank):
    e = next((e for e in launcher.of("worker_started") if e.get("local_rank") == local_rank), None)
    check(e is not None, f"{launcher.name}: no worker_started for local rank {local_rank}{launcher.describe()}")
    return e


def names_lagging(summary, rank, member, seq=None):
    """Whether a collective diagnosis says `rank` (`member`) never entered
    the collective: "rank 2 (member h1-2) never entered collective 12; ranks
    0, 1 wait in it"."""
    m = re.match(r"ranks? ([^(]+) \(members? ([^)]+)\) never entered collective (\d+); (.+) waits? in it", summary)
    if not m:
        return False
    ranks = {int(r) for r in re.findall(r"\d+", m.group(1))}
    members = {s.strip() for s in m.group(2).split(",")}
    return rank in ranks and member in members and (seq is None or int(m.group(3)) == seq)


def reference(tools, workdir, flags):
    path = os.path.join(workdir, "reference.json")
    subprocess.run([tools.train, "--reference", "--weights-out", path, *flags], check=True,
                   stdout=subprocess.DEVNULL, timeout=60)
    with open(path) as f:
        return json.load(f)


def check_trained(launcher, weights_path, ref):
    """Rank 0 printed a passing check and wrote the reference's weights."""
    check(re.search(r"max \|w - w_ref\| = \S+ \(tolerance 1e-9\): OK", launcher.output()),
          f"{launcher.name}: rank 0's check did not pass{launcher.describe()}")
    with open(weights_path) as f:
        got = json.load(f)
    values, expected = got["weights"] + [got["bias"]], ref["weights"] + [ref["bias"]]
    check(len(values) == len(expected), f"{len(values)} weights, expected {len(expected)}")
    diff = max(abs(a - b) for a, b in zip(values, expected))
    check(diff <= TOLERANCE, f"{launcher.name}: the weights differ from the reference by {diff} (> {TOLERANCE})")
    return diff


# ------------------------------------------------------------------ cases

def case_signals(tools, workdir):
    program = [tools.train, "--epochs", "1000", "--shards", "64", "--step-ms", "50"]
    for sig, expected in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        name = signal.Signals(sig).name
        launcher = Launcher(tools, workdir, name, ["--nproc-per-node", "2", "--min-workers", "2", *JOB_FLAGS],
                            program)
        launcher.wait_event(lambda e: e.get("event") == "training", "training event", 45)
        check(len(launcher.of("worker_started")) == 2, f"{name}: expected 2 workers started{launcher.describe()}")
        launcher.proc.send_signal(sig)
        status = launcher.wait(30)
        events = check_done(launcher, status, expected)
        kinds = [e.get("event") for e in events]
        check("signal" in kinds, f"{name}: no `signal` event{launcher.describe()}")
        sig_event = events[kinds.index("signal")]
        check(sig_event.get("signal") == int(sig),
              f"{name}: the `signal` event says {sig_event.get('signal')}, expected {int(sig)}{launcher.describe()}")
        check(kinds.index("signal") < len(kinds) - 1, f"{name}: `signal` does not come before `done`")
        check(not launcher.of("worker_failed") and not launcher.of("relaunched"),
              f"{name}: workers stopped by the signal were treated as failures{launcher.describe()}")
        print(f"signals: {name} -> exit {status}, workers {[e['pid'] for e in launcher.of('worker_started')]} "
              f"gone", flush=True)


def case_exit_codes(tools, workdir):
    # Bad flags: 2, the flag named on stderr, nothing started.
    bad = [
        (["--nproc-per-node", "x"], ["/bin/true"], "--nproc-per-node"),
        (["--bogus-flag"], ["/bin/true"], "--bogus-flag"),
        (["--nproc-per-node", "2", "--kill-worker", "5@1"], ["/bin/true"], "--kill-worker"),
        (["--max-restarts", "-1"], ["/bin/true"], "--max-restarts"),
        (["--checkpoint-dir", ""], ["/bin/true"], "--checkpoint-dir: needs a directory"),
        ([], [], "no program to run"),
    ]
    for i, (flags, program, named) in enumerate(bad):
        events_path = os.path.join(workdir, f"bad{i}.events.jsonl")
        argv = [tools.run, "--standalone", "--events", events_path, *flags]
        if program:
            argv += ["--", *program]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        check(r.returncode == 2, f"{argv}: exit {r.returncode}, expected 2; stderr {r.stderr!r}")
        check(named in r.stderr, f"{argv}: stderr does not name {named!r}: {r.stderr!r}")
        check(not os.path.exists(events_path), f"{argv}: bad flags, yet it wrote an events file")

    r = subprocess.run([tools.run, "--coordinator", "127.0.0.1:1", "--host", "0.0.0.0", "--", "/bin/true"],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and "--port, --host and --data-dir are for --standalone" in r.stderr,
          f"--host without --standalone: exit {r.returncode}, stderr {r.stderr!r}")
    r = subprocess.run([tools.run, "--standalone", "--checkpoint-dir", "/dev/null/x", "--", "/bin/true"],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and "--checkpoint-dir: cannot create '/dev/null/x'" in r.stderr,
          f"--checkpoint-dir /dev/null/x: exit {r.returncode}, stderr {r.stderr!r}")

    # A program that exits 0 at once: every worker finished.
    launcher, status = run_to_end(tools, workdir, "true", ["--nproc-per-node", "2", *JOB_FLAGS], ["/bin/true"])
    check_done(launcher, status, 0)
    check(len(launcher.of("worker_started")) == 2 and len(launcher.of("worker_exited")) == 2,
          f"true: expected 2 workers started and 2 exited{launcher.describe()}")
    check(not launcher.of("worker_failed") and not launcher.of("relaunched"),
          f"true: a failure or a relaunch{launcher.describe()}")

    # The environment a worker gets: torchrun's rendezvous on this machine
    # (one launcher), and a checkpoint directory removed when the launcher
    # ends.
    seen = os.path.join(workdir, "env")
    script = ('test "$MASTER_ADDR" = 127.0.0.1 && test "$MASTER_PORT" -gt 0 && test "$LOCAL_WORLD_SIZE" = 2 '
              '&& test -d "$COHORT_CHECKPOINT_DIR" && echo "$COHORT_CHECKPOINT_DIR" > ' + seen + '.$LOCAL_RANK '
              '|| exit 9')
    launcher, status = run_to_end(tools, workdir, "env", ["--nproc-per-node", "2", *JOB_FLAGS],
                                  ["/bin/sh", "-c", script])
    check_done(launcher, status, 0)
    dirs = set()
    for r in range(2):
        with open(f"{seen}.{r}") as f:
            dirs.add(f.read().strip())
    check(len(dirs) == 1, f"env: the workers got different checkpoint directories: {dirs}")
    check(not os.path.exists(dirs.pop()), "env: the launcher left its checkpoint directory behind")

    # A program that always exits 3: relaunched within the budget, then
    # removed with the reason; the job failed. One relaunch: a second
    # failure on the host within 300 s blacklists it (budget_blacklist),
    # and the budget is what this checks.
    launcher, status = run_to_end(tools, workdir, "exit3",
                                  ["--max-restarts", "1", "--relaunch-delay", "0.1", *JOB_FLAGS],
                                  ["/bin/sh", "-c", "exit 3"])
    check_done(launcher, status, 1)
    failed = launcher.of("worker_failed")
    check(len(failed) == 2 and all(e.get("exit_code") == 3 for e in failed),
          f"exit3: expected 2 worker_failed events with exit_code 3{launcher.describe()}")
    relaunched = launcher.of("relaunched")
    check([e.get("restart") for e in relaunched] == [1] and relaunched[0].get("worker") == failed[0].get("worker"),
          f"exit3: expected one relaunch (restart 1) of the failed worker{launcher.describe()}")
    last = plans(launcher)[-1] if plans(launcher) else {}
    removes = steps_of(last, "remove")
    check(removes and "relaunch budget 1 used up" in removes[0].get("reason", "") and not steps_of(last, "relaunch"),
          f"exit3: the last plan does not remove the worker for its used-up budget{launcher.describe()}")
    print(f"exit_codes: bad flags -> 2; /bin/true -> 0; exit 3 -> 1 after 1 relaunch "
          f"({removes[0]['reason']})", flush=True)


def case_budget_blacklist(tools, workdir):
    # The job's budget: one relaunch in all for two failing workers.
    launcher, status = run_to_end(tools, workdir, "job_budget",
                                  ["--nproc-per-node", "2", "--max-restarts", "1", "--relaunch-delay", "0.1",
                                   *JOB_FLAGS], ["/bin/sh", "-c", "exit 1"])
    check_done(launcher, status, 1)
    check(len(launcher.of("relaunched")) == 1, f"job_budget: expected exactly 1 relaunch{launcher.describe()}")
    relaunched = launcher.of("relaunched")[0]["worker"]
    reasons = {s["node"]: s.get("reason", "") for p in plans(launcher) for s in steps_of(p, "remove")}
    other = next((w for w in ("h1-0", "h1-1") if w != relaunched), None)
    check("job: relaunch budget 1 used up" in reasons.get(other, ""),
          f"job_budget: {other} was not removed for the job's used-up budget: {reasons}{launcher.describe()}")
    check(f"node {relaunched}: relaunch budget 1 used up" in reasons.get(relaunched, ""),
          f"job_budget: {relaunched} was not removed for its own used-up budget: {reasons}{launcher.describe()}")

    # The blacklist: 2 failures on host h1 within 300 s keep it off for
    # 30 s; with a budget of 5 the second failure is what stops relaunches.
    launcher, status = run_to_end(tools, workdir, "blacklist",
                                  ["--nproc-per-node", "2", "--max-restarts", "5", "--relaunch-delay", "0.1",
                                   *JOB_FLAGS], ["/bin/sh", "-c", "exit 1"])
    all_plans = plans(launcher)
    at = next((i for i, p in enumerate(all_plans)
               if any(re.match(r"host h1 blacklisted until \S+ after 2 failures within 300s", w)
                      for w in p.get("warnings", []))), None)
    check(at is not None, f"blacklist: no plan says host h1 is blacklisted{launcher.describe()}")
    blacklisted_t = all_plans[at]["t"]
    before = sum(len(steps_of(p, "relaunch")) for p in all_plans[:at])
    after = [s for p in all_plans[at:] for s in steps_of(p, "relaunch")]
    check(not after, f"blacklist: relaunches planned while h1 is blacklisted: {after}{launcher.describe()}")
    # Relaunches planned before the blacklisting may still run (after
    # --relaunch-delay); nothing more.
    relaunched = launcher.of("relaunched")
    check(len(relaunched) == before, f"blacklist: {len(relaunched)} relaunched events, expected the {before} "
                                     f"planned before h1 was blacklisted{launcher.describe()}")
    removes = [s for p in all_plans[at:] for s in steps_of(p, "remove")]
    check(removes and all("blacklisted" in s.get("reason", "") for s in removes),
          f"blacklist: the workers that failed on h1 afterwards were not removed for the blacklist"
          f"{launcher.describe()}")
    done = launcher.of("done")
    check(done and done[0]["t"] - blacklisted_t < 30, "blacklist: the job outlived the cooldown")
    check_done(launcher, status, 1)
    print(f"budget_blacklist: job budget 1 -> 1 relaunch; blacklist after 2 failures -> {before} relaunch(es) "
          f"before it, none after ({removes[0]['reason']})", flush=True)


def case_straggler(tools, workdir):
    flags = ["--epochs", "3", "--shards", "48", "--step-ms", "40"]
    ref = reference(tools, workdir, flags)
    weights = os.path.join(workdir, "weights.json")
    launcher = Launcher(tools, workdir, "straggler",
                        ["--nproc-per-node", "3", "--min-workers", "3", "--straggler-for", "2",
                         "--straggler-threshold", "0.7", *JOB_FLAGS],
                        [tools.train, *flags, "--slow", "1:5", "--weights-out", weights])
    status = launcher.wait(90)
    check_done(launcher, status, 0)
    slow = started_by_local_rank(launcher, 1)["worker"]
    stragglers = launcher.of("straggler")
    check(stragglers and stragglers[0].get("worker") == slow,
          f"straggler: expected a straggler event for {slow}{launcher.describe()}")
    check(all(e.get("worker") == slow for e in stragglers),
          f"straggler: a worker other than {slow} was called a straggler{launcher.describe()}")
    check(0 <= stragglers[0].get("score", -1) < 0.7, f"straggler: score {stragglers[0].get('score')} not below 0.7")
    replace = next((p for p in plans(launcher)
                    if any(s.get("node") == slow for s in steps_of(p, "remove")) and steps_of(p, "launch")), None)
    check(replace is not None, f"straggler: no plan removes {slow} and launches another{launcher.describe()}")
    new = [e for e in launcher.of("relaunched") if e.get("local_rank") == 1]
    check(new and new[0].get("worker") not in ("", slow),
          f"straggler: no relaunched event for a new worker in {slow}'s place{launcher.describe()}")
    check(any(new[0]["worker"] in e.get("workers", []) and slow not in e.get("workers", [])
              for e in launcher.of("round_formed")),
          f"straggler: no round with {new[0]['worker']} in place of {slow}{launcher.describe()}")
    check(not launcher.of("worker_failed"), f"straggler: a worker failed{launcher.describe()}")
    diff = check_trained(launcher, weights, ref)
    print(f"straggler: {slow} (score {stragglers[0]['score']:.2f}) replaced by {new[0]['worker']}; "
          f"rank 0's weights within {diff:.3g} of the reference", flush=True)


def case_hang(tools, workdir):
    flags = ["--epochs", "3", "--shards", "48", "--step-ms", "20"]
    ref = reference(tools, workdir, flags)
    weights = os.path.join(workdir, "weights.json")
    launcher = Launcher(tools, workdir, "hang",
                        ["--nproc-per-node", "3", "--min-workers", "3", "--hang-timeout", "3", *JOB_FLAGS],
                        [tools.train, *flags, "--stall-at-step", "2:10", "--collective-timeout", "60",
                         "--weights-out", weights])
    launcher.wait_event(lambda e: e.get("event") == "job_hung", "job_hung event", 45)
    try:
        status = launcher.proc.wait(30)  # training after the restart takes a few seconds
    except subprocess.TimeoutExpired:
        status = None  # the checks below say why, or the one after them
    stalled = started_by_local_rank(launcher, 2)
    member, rank = stalled["worker"], stalled["rank"]
    check(launcher.of("hung"), f"hang: no `hung` event{launcher.describe()}")
    job_hung = launcher.of("job_hung")
    check(job_hung, f"hang: no `job_hung` event{launcher.describe()}")
    check(job_hung[0].get("cause") == "collective",
          f"hang: job_hung cause {job_hung[0].get('cause')!r}, expected 'collective'{launcher.describe()}")
    check(names_lagging(job_hung[0].get("summary", ""), rank, member),
          f"hang: the summary does not name rank {rank} ({member}) as never having entered the collective: "
          f"{job_hung[0].get('summary')!r}{launcher.describe()}")
    # The shipped rule restarts every worker; a policy that relaunches or
    # replaces only the stalled member would do as well.
    acting = [p for p in plans(launcher)
              if steps_of(p, "restart_all") or any(s.get("node") == member for s in p.get("steps", []))]
    check(acting, f"hang: no plan restarts the workers or relaunches {member}{launcher.describe()}")
    # One hang, one restart: the restarted workers must not be judged on the
    # stalled ones' health, which would spend the job's budget at once.
    check(len(job_hung) == 1 and len(acting) == 1,
          f"hang: {len(job_hung)} job_hung events and {len(acting)} plans acting on them for one hang"
          f"{launcher.describe()}")
    late = [e for e in launcher.of("hung") if e["t"] > acting[0]["t"]]
    check(not late, f"hang: `hung` events about the restarted workers: {late}{launcher.describe()}")
    relaunched = sorted(e.get("local_rank") for e in launcher.of("relaunched"))
    expected = [0, 1, 2] if steps_of(acting[0], "restart_all") else [2]
    check(relaunched == expected, f"hang: relaunched local ranks {relaunched}, expected {expected}"
                                  f"{launcher.describe()}")
    check(status is not None, f"hang: the job did not finish within 30 s of its hang{launcher.describe()}")
    check_done(launcher, status, 0)
    diff = check_trained(launcher, weights, ref)
    print(f"hang: {job_hung[0]['summary']!r}; {acting[0]['text']!r}; rank 0's weights within {diff:.3g} of "
          f"the reference", flush=True)


def case_skip_collective(tools, workdir):
    seq = 8
    launcher = Launcher(tools, workdir, "skip",
                        ["--nproc-per-node", "3", "--min-workers", "3", "--hang-timeout", "3", "--max-restarts", "0",
                         *JOB_FLAGS],
                        [tools.train, "--epochs", "3", "--shards", "48", "--step-ms", "20", "--skip-collective",
                         f"1:{seq}", "--collective-timeout", "60"])
    job_hung = launcher.wait_event(lambda e: e.get("event") == "job_hung", "job_hung event", 45)
    skipper = started_by_local_rank(launcher, 1)
    member, rank = skipper["worker"], skipper["rank"]
    check(job_hung.get("cause") == "collective",
          f"skip: job_hung cause {job_hung.get('cause')!r}, expected 'collective'{launcher.describe()}")
    summary = job_hung.get("summary", "")
    check(names_lagging(summary, rank, member, seq),
          f"skip: the summary does not name rank {rank} ({member}) as never having entered collective {seq}: "
          f"{summary!r}{launcher.describe()}")
    others = sorted(e["rank"] for e in launcher.of("worker_started") if e["worker"] != member)
    waiting = re.search(r"; ranks? ([\d, -]+) waits? in it", summary)
    check(waiting and sorted(int(r) for r in re.findall(r"\d+", waiting.group(1))) == others,
          f"skip: the summary does not say ranks {others} wait in collective {seq}: {summary!r}")
    hung = {e.get("worker"): e for e in launcher.of("hung")}
    check(member in hung and hung[member].get("cause") == "collective",
          f"skip: no collective `hung` event for {member}{launcher.describe()}")
    launcher.proc.send_signal(signal.SIGTERM)
    check_done(launcher, launcher.wait(30), 143)
    print(f"skip_collective: {summary!r}", flush=True)


def case_restart_all(tools, workdir):
    flags = ["--epochs", "4", "--shards", "48", "--step-ms", "40"]
    ref = reference(tools, workdir, flags)
    weights = os.path.join(workdir, "weights.json")
    launcher = Launcher(tools, workdir, "restart_all",
                        ["--nproc-per-node", "3", "--min-workers", "3", "--restart", "all", "--kill-worker", "1@1.5",
                         *JOB_FLAGS],
                        [tools.train, *flags, "--weights-out", weights])
    status = launcher.wait(90)
    check_done(launcher, status, 0)
    check(len(launcher.of("restarting")) == 1, f"restart_all: expected one group restart{launcher.describe()}")
    second = launcher.of("worker_started")[3:]
    check(sorted(e["worker"] for e in second) == ["h1-0.1", "h1-1.1", "h1-2.1"],
          f"restart_all: the new world's workers are not h1-0.1, h1-1.1, h1-2.1{launcher.describe()}")
    summary = launcher.output()
    check(len(re.findall(r"\(each once\)", summary)) == 4,
          f"restart_all: not every epoch's shards done once (leases of the stopped processes kept?)"
          f"{launcher.describe()}")
    diff = check_trained(launcher, weights, ref)
    print(f"restart_all: one group restart, each shard once, rank 0's weights within {diff:.3g} of the reference",
          flush=True)


def case_two_nodes(tools, workdir):
    """Two cohort-run on this machine with one coordinator act as two nodes
    of one job: one world of 4, trained to the reference's weights."""
    exe = os.path.join(os.path.dirname(tools.run), "cohort-coordinator")
    check(os.access(exe, os.X_OK), f"two_nodes: no cohort-coordinator next to cohort-run ({exe})")
    with open(os.path.join(workdir, "coordinator.err"), "wb") as err:
        server = subprocess.Popen([exe, "--port", "0"], stdout=subprocess.PIPE, stderr=err,
                                  stdin=subprocess.DEVNULL)
    try:
        url = server.stdout.readline().decode().strip()
        check(url.startswith("http://"), f"two_nodes: the coordinator did not start (exit {server.poll()})")
        flags = ["--epochs", "2", "--shards", "32", "--step-ms", "20"]
        ref = reference(tools, workdir, flags)
        weights = os.path.join(workdir, "weights.json")
        nodes = [Launcher(tools, workdir, node,
                          [*JOB_FLAGS, "--nnodes", "2", "--nproc-per-node", "2", "--min-workers", "4",
                           "--node-id", node, "--job", "pair"],  # the last --node-id counts
                          [tools.train, *flags, "--weights-out", weights], coordinator=url)
                 for node in ("a", "b")]
        statuses = [n.wait(90) for n in nodes]  # both, before either is judged: they share the workers' URL
        for n, status in zip(nodes, statuses):
            check_done(n, status, 0)
            formed = n.of("round_formed")
            check(formed and sorted(formed[0].get("workers", [])) == ["a-0", "a-1", "b-0", "b-1"],
                  f"two_nodes: {n.name}'s first round is not the 4 workers of both nodes{n.describe()}")
        with_rank0 = [n for n in nodes if "max |w - w_ref|" in n.output()]
        check(len(with_rank0) == 1, "two_nodes: rank 0's check is not in exactly one launcher's output")
        diff = check_trained(with_rank0[0], weights, ref)
        print(f"two_nodes: one world of 4 over 2 launchers; weights within {diff:.3g} of the reference", flush=True)
    finally:
        server.kill()
        server.wait()
        server.stdout.close()


def case_replica_list(tools, workdir):
    """A list of coordinator replicas whose first is down reaches the
    launcher and, through COHORT_COORDINATOR, its workers: all pass the dead
    one over and train to the reference's weights."""
    exe = os.path.join(os.path.dirname(tools.run), "cohort-coordinator")
    check(os.access(exe, os.X_OK), f"replica_list: no cohort-coordinator next to cohort-run ({exe})")
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with open(os.path.join(workdir, "coordinator.err"), "wb") as err:
        server = subprocess.Popen([exe, "--port", "0"], stdout=subprocess.PIPE, stderr=err,
                                  stdin=subprocess.DEVNULL)
    try:
        url = server.stdout.readline().decode().strip()
        check(url.startswith("http://"), f"replica_list: the coordinator did not start (exit {server.poll()})")
        replicas = f"127.0.0.1:{dead},{url.removeprefix('http://')}"
        flags = ["--epochs", "2", "--shards", "16", "--step-ms", "10"]
        ref = reference(tools, workdir, flags)
        weights = os.path.join(workdir, "weights.json")
        launcher = Launcher(tools, workdir, "list", [*JOB_FLAGS, "--nproc-per-node", "2", "--job", "list"],
                            [tools.train, *flags, "--weights-out", weights], coordinator=replicas)
        check_done(launcher, launcher.wait(90), 0)
        check(launcher.url == f"http://127.0.0.1:{dead},{url}",
              f"replica_list: the launcher's coordinator is {launcher.url!r}, not the list{launcher.describe()}")
        diff = check_trained(launcher, weights, ref)
        print(f"replica_list: trained through {replicas}; weights within {diff:.3g} of the reference", flush=True)
    finally:
        server.kill()
        server.wait()
        server.stdout.close()


def case_failed_waiting(tools, workdir):
    """The ids a launcher waits for its round with are failed under it (it
    was stopped past the failure timeout; after a coordinator restart, a
    heartbeat held back by the client's retry back-off does the same): it
    must join them again, not wait out world_wait() for a round that can
    never admit them."""
    exe = os.path.join(os.path.dirname(tools.run), "cohort-coordinator")
    check(os.access(exe, os.X_OK), f"failed_waiting: no cohort-coordinator next to cohort-run ({exe})")
    with open(os.path.join(workdir, "coordinator.err"), "wb") as err:
        server = subprocess.Popen([exe, "--port", "0"], stdout=subprocess.PIPE, stderr=err,
                                  stdin=subprocess.DEVNULL)
    try:
        url = server.stdout.readline().decode().strip()
        check(url.startswith("http://"), f"failed_waiting: the coordinator did not start (exit {server.poll()})")
        flags = ["--epochs", "2", "--shards", "16", "--step-ms", "20"]
        program = [tools.train, *flags]
        job = [*JOB_FLAGS, "--failure-timeout", "1", "--restart", "all", "--nnodes", "2", "--nproc-per-node", "2",
               "--min-workers", "4", "--job", "wait"]
        a = Launcher(tools, workdir, "a", [*job, "--node-id", "a"], program, coordinator=url)

        def member_states():
            status, body = request(url, "GET", "/v1/jobs/wait", timeout=5)
            if status != 200 or not isinstance(body, dict):
                return {}
            return {m.get("id"): m.get("state") for m in body.get("members", [])}

        deadline = time.monotonic() + 30
        while member_states().get("a-0") != "waiting" or member_states().get("a-1") != "waiting":
            check(a.proc.poll() is None, f"failed_waiting: a exited before its workers waited{a.describe()}")
            check(time.monotonic() < deadline, f"failed_waiting: a-0 and a-1 never waited{a.describe()}")
            time.sleep(0.05)
        a.proc.send_signal(signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 15
            while member_states().get("a-0") != "failed" or member_states().get("a-1") != "failed":
                check(time.monotonic() < deadline,
                      f"failed_waiting: the coordinator did not fail a's silent ids: {member_states()}")
                time.sleep(0.05)
        finally:
            a.proc.send_signal(signal.SIGCONT)
        b = Launcher(tools, workdir, "b", [*job, "--node-id", "b"], program, coordinator=url)
        # Well under world_wait() (60 s): before the fix, a waited that out.
        statuses = [n.wait(45) for n in (a, b)]
        for n, status in zip((a, b), statuses):
            check_done(n, status, 0)
        check(a.of("rejoining"), f"failed_waiting: no `rejoining` event from a{a.describe()}")
        formed = [e for e in a.of("round_formed") if sorted(e.get("workers", [])) == ["a-0", "a-1", "b-0", "b-1"]]
        check(formed, f"failed_waiting: no round of a-0, a-1, b-0, b-1{a.describe()}")
        print(f"failed_waiting: a joined again after its ids were failed ({a.of('rejoining')[0].get('worker')}); "
              f"one world of 4, both exit 0", flush=True)
    finally:
        server.kill()
        server.wait()
        server.stdout.close()


def make_certificates(workdir):
    """A CA, a server certificate for 127.0.0.1 and a client certificate."""
    with open(os.path.join(workdir, "cert.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
    script = ("set -e; openssl ecparam -name prime256v1 -genkey -noout -out ca.key;"
              " openssl req -x509 -new -key ca.key -subj /CN=cohort-test-ca -days 2 -out ca.pem;"
              " for n in server client; do openssl ecparam -name prime256v1 -genkey -noout -out $n.key;"
              " openssl req -new -key $n.key -subj /CN=$n -out $n.csr;"
              " openssl x509 -req -in $n.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2"
              " -extfile cert.ext -out $n.pem; done")
    subprocess.run(["bash", "-c", script], cwd=workdir, check=True, capture_output=True, timeout=60)
    return {n: os.path.join(workdir, n) for n in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}


def case_https(tools, workdir):
    """cohort-run and its workers reach a coordinator over mutual TLS with
    the files named in the environment; then cohort-run --standalone serves
    HTTPS itself (--tls-cert, --tls-key, --tls-client-ca)."""
    exe = os.path.join(os.path.dirname(tools.run), "cohort-coordinator")
    check(os.access(exe, os.X_OK), f"https: no cohort-coordinator next to cohort-run ({exe})")
    files = make_certificates(workdir)
    with open(os.path.join(workdir, "coordinator.err"), "wb") as err:
        server = subprocess.Popen([exe, "--port", "0", "--tls-cert", files["server.pem"], "--tls-key",
                                   files["server.key"], "--tls-client-ca", files["ca.pem"]],
                                  stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
    saved = {k: os.environ.get(k) for k in ("COHORT_COORDINATOR_CACERT", "COHORT_COORDINATOR_CERT",
                                            "COHORT_COORDINATOR_KEY")}
    try:
        url = server.stdout.readline().decode().strip()
        check(url.startswith("https://"), f"https: the coordinator did not start on https:// (got {url!r}, "
                                          f"exit {server.poll()})")
        # Without a client certificate: refused, and told why.
        os.environ["COHORT_COORDINATOR_CACERT"] = files["ca.pem"]
        r = subprocess.run([tools.run, "--coordinator", url, "--job", "nocert", "--nproc-per-node", "1",
                            "--", "/bin/true"], capture_output=True, text=True, timeout=90)
        check(r.returncode != 0 and "client certificate" in r.stderr,
              f"https: cohort-run without a client certificate: exit {r.returncode}, stderr {r.stderr[-600:]!r}")
        os.environ["COHORT_COORDINATOR_CERT"] = files["client.pem"]
        os.environ["COHORT_COORDINATOR_KEY"] = files["client.key"]
        flags = ["--epochs", "2", "--shards", "16", "--step-ms", "10"]
        ref = reference(tools, workdir, flags)
        weights = os.path.join(workdir, "weights.json")
        launcher = Launcher(tools, workdir, "tls", [*JOB_FLAGS, "--nproc-per-node", "2", "--job", "tls"],
                            [tools.train, *flags, "--weights-out", weights], coordinator=url)
        check_done(launcher, launcher.wait(90), 0)
        diff = check_trained(launcher, weights, ref)
        # The refused handshake was counted.
        context = ssl.create_default_context(cafile=files["ca.pem"])
        context.load_cert_chain(files["client.pem"], files["client.key"])
        with urllib.request.urlopen(url + "/metrics", context=context, timeout=10) as answer:
            metrics = answer.read().decode()
        counted = [line for line in metrics.splitlines()
                   if line.startswith('cohort_coordinator_connections_refused_total{reason="tls_handshake"}')]
        check(counted and float(counted[0].split()[-1]) >= 1,
              f"https: the refused handshake is not counted in /metrics: {counted}")
        print(f"https: trained through {url} under mutual TLS; weights within {diff:.3g} of the reference; "
              f"{counted[0]}", flush=True)
        # cohort-run --standalone serving HTTPS with client certificates
        # itself, the same files in the environment.
        weights = os.path.join(workdir, "weights-standalone.json")
        tls_flags = ["--tls-cert", files["server.pem"], "--tls-key", files["server.key"],
                     "--tls-client-ca", files["ca.pem"]]
        standalone = Launcher(tools, workdir, "tls-standalone",
                              [*JOB_FLAGS, *tls_flags, "--nproc-per-node", "2", "--job", "tls"],
                              [tools.train, *flags, "--weights-out", weights])
        check_done(standalone, standalone.wait(90), 0)
        served = standalone.of("coordinator")
        check(served and served[0].get("url", "").startswith("https://127.0.0.1:"),
              f"https: cohort-run --standalone --tls-cert did not serve https:// ({served})")
        diff = check_trained(standalone, weights, ref)
        print(f"https: cohort-run --standalone served {served[0]['url']} under mutual TLS; weights within "
              f"{diff:.3g} of the reference", flush=True)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.kill()
        server.wait()
        server.stdout.close()


CASES = {"signals": case_signals, "exit_codes": case_exit_codes, "budget_blacklist": case_budget_blacklist,
         "straggler": case_straggler, "hang": case_hang, "skip_collective": case_skip_collective,
         "restart_all": case_restart_all, "two_nodes": case_two_nodes, "replica_list": case_replica_list,
         "failed_waiting": case_failed_waiting, "https": case_https}


def clean_up():
    for launcher in launchers:
        launcher.events()  # learns the url, if it got that far
        if launcher.proc.poll() is None:
            launcher.proc.kill()
        launcher.proc.wait()
        kill_leftovers(launcher.url)  # its workers, orphaned by the kill
    launchers.clear()


def kill_launchers():
    case_runner.kill_live([launcher.proc for launcher in launchers])


def run_case(tools, name):
    return case_runner.run_case(name, lambda workdir: CASES[name](tools, workdir),
                                prefix=f"cohort-launcher-{name}-", deadline_s=CASE_DEADLINE_S,
                                kill_all=kill_launchers, clean_up=clean_up, expected=(CaseFailed,))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir", nargs="?", help="the build tree")
    parser.add_argument("cases", nargs="*", help=f"cases to run (default all: {', '.join(CASES)})")
    parser.add_argument("--run", help="cohort-run (default BUILD_DIR/examples/cohort-run)")
    parser.add_argument("--train", help="cohort-train (default BUILD_DIR/examples/cohort-train)")
    args = parser.parse_args()
    if args.build_dir in CASES:  # only cases, with --run and --train
        args.cases.insert(0, args.build_dir)
        args.build_dir = None
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r} (expected {', '.join(CASES)})")
    build = args.build_dir
    args.run = args.run or (build and os.path.join(build, "examples", "cohort-run"))
    args.train = args.train or (build and os.path.join(build, "examples", "cohort-train"))
    for flag, path in (("--run", args.run), ("--train", args.train)):
        if not path or not os.access(path, os.X_OK):
            parser.error(f"{flag}: no executable at {path!r} (give BUILD_DIR or {flag} PATH)")
    results = [run_case(args, c) for c in (args.cases or list(CASES))]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
