#!/usr/bin/env python3
"""Question: how long after a worker's SIGKILL does the job train again?

Runs the training demo (cohort-train) under the launcher (cohort-run) at the
default job settings (heartbeat 1 s, failure timeout 5 s, last call 3 s),
kills mid-training and splits kill → training again into detection, new
round and restart. Times come from the launcher's --events file and from
the coordinator's job state, polled every 20 ms: the round history (when a
round opened and closed, and why) and the shards reported done (a worker
reports its shards only after a step's collectives succeed, so the first
report in a new world is its first step). Scenarios:

  worker     one launcher, 4 workers; cohort-run --kill-worker SIGKILLs one.
             The launcher sees its child die, the survivors meet in a new
             round; the relaunched worker comes back in that or a later one.
  node       a cohort-coordinator and two launchers (nodes a and b, 2
             workers each); this program SIGKILLs node b whole (launcher
             and workers), so no launcher reports b's workers. Phases for
             node a.
  node-stop  the same with SIGSTOP: a node that vanishes without its kernel
             closing its connections (power loss, partition), so only the
             coordinator's failure timeout can tell.

  coordinator-leader-kill
             two launchers whose coordinator is three cohort-coordinator
             --etcd replicas on a local etcd (recovery_coordinator.py): the
             leader replica SIGKILLed mid-training. Target: training stops
             for at most 3 s, and no new round opens (issue 17).

  host-kill, host-partition, host-heal, host-kill-report
             on two emulated hosts (root only; recovery_hosts.py says
             what each does): every process of host 1 SIGKILLed (the
             survivors only asking for a round: --no-report-dead), its
             link down, its link down and up again, and a kill whose dead
             peers the survivors report (Membership::report_dead).
             Target: failure_timeout + 1 heartbeat interval + 1 s (7 s).

Anchors (not run, printed as references): DLRover notices a dead peer after
a 600 s no-heartbeat window; under torchelastic the survivors of a killed
worker may hang in a collective up to the NCCL timeout, 30 min by default.
Target: SIGKILL to training again in under 6 s.

  python3 benchmarks/bench_recovery.py [--build build] [--runs 5]
      [--scenarios worker,node,node-stop] [--kill-at 5] [--keep DIR]
      [--heal-after 8] [--rejoin-timeout 90]
  python3 benchmarks/bench_recovery.py --analyze EVENTS.jsonl  # one 'worker' file

Stdlib only. Exits 1 when a run fails to finish or an expected event is
missing (each named), 2 for bad usage or missing binaries.
"""

import argparse
import ctypes
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

TARGET_S = 6.0
# Host scenarios: failure_timeout + 1 heartbeat interval + 1 s at the defaults.
HOST_TARGET_S = 5.0 + 1.0 + 1.0
HOST_SCENARIOS = ("host-kill", "host-partition", "host-heal", "host-kill-report")
ANCHORS = [
    ("anchor: DLRover, no-heartbeat window before a peer counts as dead", "600 s"),
    ("anchor: torchelastic, survivors blocked in a collective (NCCL timeout)", "up to 1,800 s"),
]
# Demo flags: 4 workers each train one 100 ms shard per step, 16 steps an
# epoch, so 8 epochs are about 15 s of training with a recovery in them.
TRAIN_FLAGS = ["--epochs", "8", "--shards", "64", "--step-ms", "100"]

LAUNCHER_LINE = re.compile(r"^cohort-run \[\s*([0-9.]+)s\]")
WORLD_LINE = re.compile(r"^\[([^\]]+)\] world (\d+): rank \d+ of \d+")
SYNCED_LINE = re.compile(r"^\[([^\]]+)\] state from rank \d+:")


class Missing(Exception):
    """An expected event (or run outcome) that is not there."""


def log(text):
    print(text, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- processes


def process_tree(root):
    """root and every descendant, from /proc (parents before children)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def signal_tree(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class Launcher:
    """One cohort-run process: its output lines, timestamped on arrival,
    and its --events file."""

    def __init__(self, name, cmd, workdir, spawn=subprocess.Popen):
        self.name = name
        self.events_path = os.path.join(workdir, f"{name}.events.jsonl")
        self.log_path = os.path.join(workdir, f"{name}.log")
        cmd = [c.replace("{EVENTS}", self.events_path) for c in cmd]
        self.cmd = cmd
        self.lines = []  # (time.monotonic() on arrival, text)
        self.started = time.monotonic()
        # Its own session, away from this program's terminal signals.
        # spawn: a Popen, or one that starts it on an emulated host.
        self.proc = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        with open(self.log_path, "w") as out:
            out.write("$ " + " ".join(self.cmd) + "\n")
            for raw in self.proc.stdout:
                now = time.monotonic()
                text = raw.decode(errors="replace").rstrip("\n")
                self.lines.append((now, text))
                out.write(text + "\n")
                out.flush()

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        finally:
            self.reader.join(timeout=2)

    def kill(self):
        """Ends whatever is left of it (by the ids of its processes)."""
        if self.proc.poll() is None:
            tree = process_tree(self.proc.pid)
            signal_tree(tree, signal.SIGKILL)
            signal_tree(tree, signal.SIGCONT)
            self.proc.wait()
        self.reader.join(timeout=2)

    def offset(self):
        """Launcher time t is at monotonic offset + t: the smallest delay
        between a line's own timestamp (to 10 ms) and its arrival here."""
        best = None
        for now, text in list(self.lines):
            m = LAUNCHER_LINE.match(text)
            if m:
                d = now - float(m.group(1))
                best = d if best is None else min(best, d)
        return best if best is not None else self.started

    def events(self):
        try:
            with open(self.events_path) as f:
                raw = f.read()
        except OSError as e:
            raise Missing(f"{self.name}: no events file: {e}")
        return parse_events(raw, self.events_path)

    def synced(self):
        """(launcher time, member, generation) when each worker printed that
        its state was synced in a world: from there it steps."""
        return synced_lines(self.lines, self.offset())

    def tail(self, n=15):
        return "\n".join(text for _, text in self.lines[-n:])


def parse_events(raw, where):
    events = []
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
        except ValueError as err:
            # The last line may be cut short by a kill: ignore only that one.
            if number == len(raw.splitlines()):
                continue
            raise Missing(f"{where}:{number}: not JSON: {err}")
        if not isinstance(e, dict) or "t" not in e or "event" not in e:
            raise Missing(f"{where}:{number}: an event needs 't' and 'event': {line[:120]}")
        events.append(e)
    return events


def synced_lines(lines, offset):
    generation, out = {}, []
    for now, text in lines:
        m = WORLD_LINE.match(text)
        if m:
            generation[m.group(1)] = int(m.group(2))
            continue
        m = SYNCED_LINE.match(text)
        if m and m.group(1) in generation:
            out.append((now - offset, m.group(1), generation[m.group(1)]))
    return out


# ---------------------------------------------------------------- analysis


def first(events, name, after=None, where=None, what=None, **match):
    for e in events:
        if e["event"] != name or (after is not None and e["t"] < after):
            continue
        if all(e.get(k) == v for k, v in match.items()) and (where is None or where(e)):
            return e
    raise Missing(what or f"no '{name}' event" + (f" at or after t={after:.3f}" if after is not None else "")
                  + (f" with {match}" if match else ""))


def check_done(events, name):
    done = [e for e in events if e["event"] == "done"]
    if not done:
        raise Missing(f"{name}: no 'done' event: the launcher did not finish")
    if done[-1].get("exit_code") != 0:
        raise Missing(f"{name}: 'done' with exit_code {done[-1].get('exit_code')}: {done[-1].get('reason')}")


def ready_after(round_event, round_t, synced):
    """When the last member of the round's world had its state synced."""
    if not synced:
        return None
    gen, members = round_event["generation"], set(round_event.get("workers", []))
    seen = {}
    for t, member, g in synced:
        if g == gen and member not in seen and t >= round_t - 0.05:
            seen[member] = t
    if not members or set(seen) < members:
        return None
    return max(seen[m] for m in members)


def stepped(watch, generation, what):
    """Launcher time of the first step of a world, from the coordinator."""
    t = watch.first_step(generation)
    if t is None:
        raise Missing(f"{what}: the coordinator never had a shard reported in generation {generation} or later")
    return t


def closed(watch, formed):
    """When the coordinator closed the round of a `round_formed` event."""
    t = watch.round_closed(formed["generation"])
    if t is None:
        raise Missing(f"the coordinator's round history has no generation {formed['generation']}")
    return t


def analyze_worker(events, watch=None, synced=None):
    """Phases (seconds) of one --kill-worker run. With `watch` (samples of
    the coordinator's job state) a round starts when the coordinator closed
    it and training when the first shard of that world was reported; from
    the events alone, at `round_formed` and `training`."""
    killed = first(events, "worker_killed", what="no 'worker_killed' event (did the job end before --kill-at?)")
    w, k = killed["worker"], killed["t"]
    failed = first(events, "worker_failed", after=k, worker=w)
    formed = first(events, "round_formed", after=failed["t"])
    training = first(events, "training", after=formed["t"], where=lambda e: e["generation"] >= formed["generation"])
    relaunched = first(events, "relaunched", after=k, worker=w)
    back = first(events, "round_formed", after=relaunched["t"], where=lambda e: w in e.get("workers", []),
                 what=f"no 'round_formed' with the relaunched worker {w} in its workers")
    back_training = first(events, "training", after=back["t"], where=lambda e: e["generation"] >= back["generation"])
    check_done(events, "launcher")
    if watch is None:
        round_t, step, back_t, back_step = formed["t"], training["t"], back["t"], back_training["t"]
    else:
        round_t, back_t = closed(watch, formed), closed(watch, back)
        step = stepped(watch, formed["generation"], "the round after the kill")
        back_step = stepped(watch, back["generation"], f"the round with {w} back")
    p = {
        "detection": failed["t"] - k,
        "new_round": round_t - failed["t"],
        "restart": step - round_t,
        "total": step - k,
        "formed_event": formed["t"] - k,
        "training_event": training["t"] - k,
        "relaunched": relaunched["t"] - k,
        "back_in_round": back_t - k,
        "back_training": back_step - k,
        "world_after": formed.get("world_size"),
        "same_round": back is formed,
    }
    if watch is not None:
        p["round_reason"] = watch.round_reason(formed["generation"])
    ready = ready_after(formed, round_t, synced)
    if ready is not None:
        p["synced"] = ready - round_t
    return p


def analyze_node(events, kill_t, watch, b_members, synced=None, finished=True):
    """Phases for node a after node b was stopped at launcher time kill_t
    (finished: node a's launcher has ended, and must have succeeded)."""
    before = [e for e in events if e["event"] == "round_formed" and e["t"] < kill_t]
    if not before:
        raise Missing("node a: no 'round_formed' before the kill")
    g0 = before[-1]["generation"]
    formed = first(events, "round_formed", after=kill_t, where=lambda e: e["generation"] > g0)
    training = first(events, "training", after=formed["t"], where=lambda e: e["generation"] >= formed["generation"])
    if finished:
        check_done(events, "node a")
    opened = watch.round_opened(formed["generation"])
    round_t = closed(watch, formed)
    step = stepped(watch, formed["generation"], "node a, the round after the kill")
    p = {
        "detection": opened - kill_t,
        "round_reason": watch.round_reason(formed["generation"]),
        "new_round": round_t - opened,
        "restart": step - round_t,
        "total": step - kill_t,
        "formed_event": formed["t"] - kill_t,
        "training_event": training["t"] - kill_t,
        "world_after": formed.get("world_size"),
    }
    gone = watch.all_failed(b_members, kill_t)
    if gone is not None:
        p["b_failed"] = gone - kill_t
    ready = ready_after(formed, round_t, synced)
    if ready is not None:
        p["synced"] = ready - round_t
    return p


# ---------------------------------------------------------------- the coordinator

_CLONE_NEWNET = 0x40000000


def enter_netns(path):
    """Moves the calling thread (only it: a network namespace is per
    thread) into the network namespace at `path`, so the sockets it opens
    reach an emulated host's addresses."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({path}): {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


class JobWatch:
    """Polls GET /v1/jobs/{job} every `period` s on a keep-alive connection:
    the generation, the shards reported done, the members' states and the
    round history, each sample timed on this machine's monotonic clock."""

    def __init__(self, url, job, period=0.02, netns=None):
        host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
        self.host, self.port, self.job, self.period = host, int(port), job, period
        self.samples = []  # (monotonic, generation, shards done, {member: state})
        self.rounds = []
        self.state = {}  # the latest job state
        self.unix_minus_mono = time.time() - time.monotonic()
        self.offset = 0.0  # launcher time = monotonic - offset; set before use
        self.netns = netns  # /proc/PID/ns/net of an emulated host to poll from
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self):
        if self.netns is not None:
            enter_netns(self.netns)
        conn = None
        while not self._stop.is_set():
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(self.host, self.port, timeout=2)
                conn.request("GET", f"/v1/jobs/{self.job}")
                resp = conn.getresponse()
                body = resp.read()
                now = time.monotonic()
                if resp.status == 200:
                    self._record(now, json.loads(body))
            except (OSError, ValueError, http.client.HTTPException):
                if conn is not None:
                    conn.close()
                conn = None
            self._stop.wait(self.period)
        if conn is not None:
            conn.close()

    def _record(self, now, state):
        shards = state.get("shards") or {}
        done = sum(e.get("done", 0) for e in shards.get("epochs", []))
        members = {m.get("id"): m.get("state") for m in state.get("members", [])}
        self.samples.append((now, state.get("generation", 0), done, members))
        self.state = state
        self.rounds = state.get("rounds", self.rounds)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=5)

    def first_step(self, generation):
        """When the coordinator first had a shard reported in a world of
        `generation` or later: a worker reports its shards only after the
        step's collectives succeeded, so this is the world's first step."""
        before = max((d for _, g, d, _ in self.samples if g < generation), default=None)
        if before is None:
            return None
        for now, g, d, _ in self.samples:
            if g >= generation and d > before:
                return now - self.offset
        return None

    def _round(self, generation):
        return next((r for r in self.rounds if r.get("generation") == generation), None)

    def round_opened(self, generation):
        r = self._round(generation)
        if r is None:
            return None
        return r["opened_at"] - self.unix_minus_mono - self.offset

    def round_closed(self, generation):
        r = self._round(generation)
        if r is None or not r.get("closed_at"):
            return None
        return r["closed_at"] - self.unix_minus_mono - self.offset

    def round_reason(self, generation):
        r = self._round(generation)
        return r.get("reason", "?") if r else "?"

    def all_failed(self, members, after):
        for now, _, _, states in self.samples:
            if now - self.offset >= after and all(states.get(m) in ("failed", "left") for m in members):
                return now - self.offset
        return None


# ---------------------------------------------------------------- scenarios


def train_cmd(args):
    return [args.train] + args.train_flags


def coordinator_url(launcher, deadline):
    """The standalone coordinator's URL, from the launcher's first event."""
    while time.monotonic() < deadline:
        try:
            for e in launcher.events():
                if e["event"] == "coordinator":
                    return e["url"]
        except Missing:
            pass
        if launcher.proc.poll() is not None:
            break
        time.sleep(0.01)
    raise Missing(f"no 'coordinator' event; last lines:\n{launcher.tail()}")


def run_worker(args, workdir, index):
    cmd = [args.run, "--standalone", "--nproc-per-node", "4", "--kill-worker", f"{args.kill_rank}@{args.kill_at:g}",
           "--events", "{EVENTS}", "--"] + train_cmd(args)
    launcher = Launcher(f"worker-{index}", cmd, workdir)
    watch = None
    try:
        watch = JobWatch(coordinator_url(launcher, time.monotonic() + 10), "cohort")
        code = launcher.wait(args.timeout)
        watch.stop()
        if code is None:
            raise Missing(f"did not finish within {args.timeout:g} s (--timeout); last lines:\n{launcher.tail()}")
        events = launcher.events()
        if code != 0:
            raise Missing(f"cohort-run exited {code}; last lines:\n{launcher.tail()}")
        watch.offset = launcher.offset()
        return analyze_worker(events, watch, launcher.synced())
    finally:
        if watch is not None:
            watch.stop()
        launcher.kill()


def start_coordinator(args, workdir, name):
    with open(os.path.join(workdir, f"{name}.coordinator.log"), "w") as err:
        proc = subprocess.Popen([args.coordinator, "--port", "0"], stdout=subprocess.PIPE, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    url = proc.stdout.readline().decode().strip()
    if not url.startswith("http://"):
        proc.kill()
        proc.wait()
        raise Missing(f"cohort-coordinator printed '{url}' instead of its URL")
    return proc, url


def wait_full_world(a, b, size, kill_at, deadline):
    """Returns once a's launcher saw a world of `size` train, and no earlier
    than kill_at s after it started; Missing past the deadline or when a
    launcher exits first."""
    while True:
        if time.monotonic() > deadline:
            raise Missing(f"node a: no world of {size} training by the deadline (--timeout); last lines:\n{a.tail()}")
        if a.proc.poll() is not None or b.proc.poll() is not None:
            raise Missing(f"a launcher exited ({a.proc.poll()}, {b.proc.poll()}) before the kill")
        try:
            events = a.events()
        except Missing:
            events = []
        full = [e["generation"] for e in events if e["event"] == "round_formed" and e.get("world_size") == size]
        trains = full and any(e["event"] == "training" and e["generation"] >= full[-1] for e in events)
        if trains and time.monotonic() - a.offset() >= kill_at:
            return
        time.sleep(0.02)


def run_node(args, workdir, index, stop):
    sig = signal.SIGSTOP if stop else signal.SIGKILL
    name = f"node{'-stop' if stop else ''}-{index}"
    coordinator, url = start_coordinator(args, workdir, name)
    job = "recovery"
    watch = JobWatch(url, job)
    launchers = {}
    try:
        for node in ("a", "b"):
            cmd = [args.run, "--coordinator", url, "--job", job, "--nnodes", "2", "--nproc-per-node", "2",
                   "--node-id", node, "--events", "{EVENTS}", "--"] + train_cmd(args)
            launchers[node] = Launcher(f"{name}-{node}", cmd, workdir)
        a, b = launchers["a"], launchers["b"]
        deadline = time.monotonic() + args.timeout
        wait_full_world(a, b, 4, args.kill_at, deadline)
        # The launcher and every worker (each worker has a process group of
        # its own, so the launcher's group alone is not enough).
        tree = process_tree(b.proc.pid)
        kill_mono = time.monotonic()
        signal_tree(tree, sig)
        log(f"  node b: {signal.Signals(sig).name} to {len(tree)} processes {tree}")

        code = a.wait(max(1.0, deadline - time.monotonic()))
        watch.stop()
        if code is None:
            raise Missing(f"node a did not finish within {args.timeout:g} s (--timeout); last lines:\n{a.tail()}")
        events = a.events()
        if code != 0:
            raise Missing(f"node a's cohort-run exited {code}; last lines:\n{a.tail()}")
        watch.offset = a.offset()
        return analyze_node(events, kill_mono - watch.offset, watch, {"b-0", "b-1"}, a.synced())
    finally:
        watch.stop()
        for launcher in launchers.values():
            launcher.kill()
        coordinator.send_signal(signal.SIGTERM)
        try:
            coordinator.wait(timeout=5)
        except subprocess.TimeoutExpired:
            coordinator.kill()
            coordinator.wait()


# ---------------------------------------------------------------- report


def fmt(x):
    return "" if x is None else f"{x:.2f} s"


def phase_rows(results, rows):
    out = []
    for key, label in rows:
        values = [r[key] for r in results if r.get(key) is not None]
        if not values:
            continue
        out.append(f"| {label} | {fmt(min(values))} | {fmt(statistics.median(values))} | {fmt(max(values))} |")
    return out


WORKER_ROWS = [
    ("detection", "detection: kill → `worker_failed`"),
    ("new_round", "new round: `worker_failed` → the coordinator closes the round"),
    ("restart", "restart: round closed → the new world's first step"),
    ("synced", "restart, first part: round closed → every worker's state synced"),
    ("total", "**total: kill → training again (first step)**"),
    ("formed_event", "as cohort-run reports it: kill → `round_formed`"),
    ("training_event", "as cohort-run reports it: kill → `training`"),
    ("relaunched", "relaunch: kill → `relaunched`"),
    ("back_in_round", "relaunch: kill → the round with the relaunched worker closes"),
    ("back_training", "relaunch: kill → first step of that world"),
]
NODE_ROWS = [
    ("detection", "detection: kill → the coordinator opens a round"),
    ("b_failed", "kill → the coordinator has b's workers `failed` (polled)"),
    ("new_round", "new round: round opened → round closed"),
    ("restart", "restart: round closed → the new world's first step"),
    ("synced", "restart, first part: round closed → every worker's state synced"),
    ("total", "**total: kill → training again (first step)**"),
    ("formed_event", "as node a's cohort-run reports it: kill → `round_formed`"),
    ("training_event", "as node a's cohort-run reports it: kill → `training`"),
]
TITLES = {
    "worker": "SIGKILL of one worker of 4 (`--kill-worker`), one launcher",
    "node": "SIGKILL of node b (its launcher and 2 workers); phases on node a",
    "node-stop": "SIGSTOP of node b (no connection closed); phases on node a",
}


def report(name, results, failures, runs):
    if name == "coordinator-leader-kill":
        import recovery_coordinator
        return recovery_coordinator.report(results, failures, runs)
    import recovery_hosts
    print(f"\n### {TITLES.get(name) or recovery_hosts.TITLES[name]}\n")
    print(f"{len(results)} of {runs} runs complete.\n")
    if results:
        print("| phase | min | median | max |")
        print("|---|---:|---:|---:|")
        rows = WORKER_ROWS if name == "worker" else NODE_ROWS
        if name == "host-heal":
            rows = rows + recovery_hosts.HEAL_ROWS
        if name == "host-kill-report":
            rows = recovery_hosts.REPORT_ROWS + rows
        for row in phase_rows(results, rows):
            print(row)
        for label, value in ANCHORS:
            print(f"| {label} | | {value} | |")
        worst = max(r["total"] for r in results)
        median = statistics.median(r["total"] for r in results)
        target = HOST_TARGET_S if name.startswith("host-") else TARGET_S
        met = "met" if worst < target else "NOT met"
        print(f"\nTarget kill → training < {target:g} s: **{met}** (worst {worst:.2f} s, median {median:.2f} s); "
              f"DLRover's 600 s window alone is {600 / median:,.0f}x the median, torchelastic's 1,800 s "
              f"{1800 / median:,.0f}x.")
        worlds = sorted({r["world_after"] for r in results if r.get("world_after")})
        if worlds:
            print(f"World size of the round after the kill: {', '.join(map(str, worlds))}.")
        if name == "worker":
            same = sum(1 for r in results if r.get("same_round"))
            print(f"The relaunched worker was in that same round in {same} of {len(results)} runs.")
        reasons = sorted({r["round_reason"] for r in results if r.get("round_reason")})
        if reasons:
            print(f"Why the coordinator opened that round: {'; '.join(reasons)}.")
    for index, why in failures:
        print(f"\nrun {index} failed: {why}")


def machine():
    load = os.getloadavg()
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} cpus, {model}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"


def main():
    parser = argparse.ArgumentParser(description="Time from a worker's SIGKILL to the job training again.")
    parser.add_argument("--build", default="build", help="the build folder (default build)")
    parser.add_argument("--runs", type=int, default=5, help="runs per scenario (default 5)")
    parser.add_argument("--scenarios", default="worker,node,node-stop",
                        help="comma-separated: worker, node, node-stop, coordinator-leader-kill, host-kill, "
                             "host-partition, host-heal, host-kill-report "
                             "(default the first three; the host ones need root)")
    parser.add_argument("--kill-at", type=float, default=5.0,
                        help="seconds after the launcher starts (worker) or at least (node) (default 5)")
    parser.add_argument("--kill-rank", type=int, default=1, help="LOCAL_RANK killed in 'worker' (default 1)")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds a run may take (default 150)")
    parser.add_argument("--train-flags", default=" ".join(TRAIN_FLAGS),
                        help=f"cohort-train's flags (default '{' '.join(TRAIN_FLAGS)}')")
    parser.add_argument("--heal-after", type=float, default=8.0,
                        help="host-heal: seconds the link stays down (default 8, past the failure timeout)")
    parser.add_argument("--rejoin-timeout", type=float, default=90.0,
                        help="host-heal: seconds host 1 may take to train again after the link is up (default 90)")
    parser.add_argument("--keep", help="keep the events files and logs in this folder")
    parser.add_argument("--analyze", metavar="EVENTS", help="only print the phases of one 'worker' events file")
    args = parser.parse_args()

    if args.analyze:
        try:
            with open(args.analyze) as f:
                phases = analyze_worker(parse_events(f.read(), args.analyze))
        except (OSError, Missing) as e:
            log(f"bench_recovery: {args.analyze}: {e}")
            return 1
        print(json.dumps(phases, indent=2))
        return 0

    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    for s in scenarios:
        if s not in TITLES and s not in HOST_SCENARIOS and s != "coordinator-leader-kill":
            parser.error(f"--scenarios: unknown scenario '{s}' (worker, node, node-stop, coordinator-leader-kill, "
                         f"{', '.join(HOST_SCENARIOS)})")
    # recovery_hosts imports this module by name: let it find this one.
    sys.modules.setdefault("bench_recovery", sys.modules[__name__])
    if any(s in HOST_SCENARIOS for s in scenarios):
        import recovery_hosts
        why = recovery_hosts.unsupported()
        if why is not None:
            log(f"bench_recovery: the host scenarios cannot run here: {why}")
            return 2
    if args.runs < 1:
        parser.error("--runs: must be at least 1")
    args.train_flags = args.train_flags.split()
    examples = os.path.join(args.build, "examples")
    args.run = os.path.abspath(os.path.join(examples, "cohort-run"))
    args.train = os.path.abspath(os.path.join(examples, "cohort-train"))
    args.coordinator = os.path.abspath(os.path.join(examples, "cohort-coordinator"))
    for path in (args.run, args.train, args.coordinator):
        if not os.access(path, os.X_OK):
            log(f"bench_recovery: {path} is missing: build the examples first (cmake --build {args.build})")
            return 2

    workdir = args.keep or tempfile.mkdtemp(prefix="bench_recovery.")
    os.makedirs(workdir, exist_ok=True)
    print("## Recovery after a SIGKILL: kill → training again\n")
    print(f"machine at the start: {machine()}  ")
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(args.run)))
    print(f"cohort-run: {args.run}, built {built}  ")
    print(f"demo: cohort-train {' '.join(args.train_flags)}; default job settings "
          f"(heartbeat 1 s, failure timeout 5 s, last call 3 s)")
    # SIGTERM unwinds as Ctrl-C does, through every finally that ends what
    # a run started (hosts.Cluster closes its hosts first).
    signal.signal(signal.SIGTERM, interrupted)
    try:
        failed_any = run_scenarios(args, scenarios, workdir)
    except KeyboardInterrupt:
        log(f"bench_recovery: interrupted; every process it started is ended; logs so far: {workdir}")
        return 130
    print(f"\nmachine at the end: {machine()}")
    if failed_any or args.keep:
        log(f"events files and logs: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed_any else 0


def interrupted(signum, frame):
    raise KeyboardInterrupt


def run_scenarios(args, scenarios, workdir):
    failed_any = False
    for name in scenarios:
        results, failures = [], []
        for i in range(1, args.runs + 1):
            log(f"{name}: run {i}/{args.runs} (load {os.getloadavg()[0]:.2f})")
            try:
                if name == "worker":
                    r = run_worker(args, workdir, i)
                elif name in HOST_SCENARIOS:
                    import recovery_hosts
                    r = recovery_hosts.run_host(args, workdir, i, name)
                elif name == "coordinator-leader-kill":
                    import recovery_coordinator
                    r = recovery_coordinator.run_leader_kill(args, workdir, i)
                else:
                    r = run_node(args, workdir, i, stop=name == "node-stop")
                results.append(r)
                log("  " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items()))
            except Missing as e:
                failures.append((i, str(e)))
                log(f"  FAILED: {e}")
        report(name, results, failures, args.runs)
        failed_any = failed_any or bool(failures)
    return failed_any


if __name__ == "__main__":
    sys.exit(main())
