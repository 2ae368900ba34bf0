#!/usr/bin/env python3
"""The coordinator's member lifecycle, across processes: the real
cohort-coordinator executable and one process per member
(coordinator_member_worker.py, which joins, heartbeats at the job's
interval, joins again when told a round is open and prints one JSON line per
event). Cases:

  form_4        min = max = 4: four members form generation 1 with ranks
                0..3 and the same peers
  kill_member   four members formed (min 3, max 4, heartbeat 0.2 s, failure
                timeout 1 s, last_call 0.5 s); kill -9 one: within
                failure_timeout + 2 intervals every survivor is told of the
                new round, and last_call (+ 2 ticks) later they are in a
                new generation of 3, rank 0 on the same node and the
                survivors in the same order
  late_joiner   min 2, max 3: two members form generation 1; a third that
                starts later gets all three into generation 2 (rejoin
                "auto"), the first two in their old order
  leave         three members; one leaves (POST leave) and exits: the other
                two are in a new generation of 2 well before failure_timeout
  bad_requests  a coordinator with --token-file: malformed JSON, a body
                over the 1 MiB limit, a wrong or missing token, an unknown
                job, a heartbeat with the wrong generation, a wrongly typed
                field: each a 4xx with {"error", "detail"} naming what is
                wrong; the server stays up and its members undisturbed

    coordinator_members.py --coordinator PATH CASE [CASE...]

A watchdog kills every child and fails the case when it overruns, so the
test never hangs. Standard library only.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import case_runner  # beside this file, so on sys.path when run as a script
import urllib.parse

from coordinator_http import CaseFailed, check, ok, request

CASE_DEADLINE_S = 60.0
WAIT_S = 15.0  # the longest wait for a world
# A round that more members than min_nodes should make waits this long after
# the last arrival: longer than the spread of the members' heartbeats (one
# interval), through which they learn of the round and join again. With 0,
# a round closes as soon as min_nodes wait, without the members whose
# heartbeat comes a little later, and they start the next round.
LAST_CALL_S = 0.5
TICK_S = 0.1  # the coordinator's: how often it looks for failures and due rounds
HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "coordinator_member_worker.py")

children = []  # every process started, for the watchdog


class Coordinator:
    """One cohort-coordinator process on a free port; stderr to a file."""

    def __init__(self, exe, workdir, args=()):
        self.stderr_path = os.path.join(workdir, "coordinator.stderr")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen([exe, "--port", "0", *args], stdout=subprocess.PIPE, stderr=err)
        children.append(self.proc)
        self.url = self.proc.stdout.readline().decode().strip()
        check(self.url.startswith("http://"),
              f"the coordinator did not start (exit {self.proc.poll()}): {self.stderr()}")

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode(errors="replace")


class Worker:
    """One member process; its JSON lines are collected by a thread."""

    def __init__(self, url, job, member, workdir, token_file=None, index=0):
        command = [sys.executable, WORKER, "--url", url, "--job", job, "--id", member,
                   "--host", f"host{index}", "--address", f"127.0.0.1:{29500 + index}"]
        if token_file:
            command += ["--token-file", token_file]
        self.id = member
        self.stderr_path = os.path.join(workdir, f"{member}.stderr")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        children.append(self.proc)
        self.events = []
        self.lock = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            event = json.loads(line)
            with self.lock:
                self.events.append(event)
                self.lock.notify_all()
        with self.lock:
            self.events.append({"event": "exit", "id": self.id, "t": time.time()})
            self.lock.notify_all()

    def of_kind(self, kind):
        with self.lock:
            return [e for e in self.events if e["event"] == kind]

    def world(self):
        """The last world it printed, or None."""
        worlds = self.of_kind("world")
        return worlds[-1] if worlds else None

    def errors(self):
        return self.of_kind("error")

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode(errors="replace")

    def leave(self):
        self.proc.stdin.write(b"leave\n")
        self.proc.stdin.flush()

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def describe(self):
        with self.lock:
            tail = self.events[-6:]
        return f"{self.id}: last events {tail}; stderr {self.stderr()[-500:]!r}"


def wait_until(workers, condition, what, timeout=WAIT_S):
    """Waits until condition(worker) holds for every worker; fails naming
    what and the workers' last events otherwise, or as soon as one prints
    an error."""
    deadline = time.monotonic() + timeout
    while True:
        for w in workers:
            check(not w.errors(), f"waiting for {what}: {w.describe()}")
        if all(condition(w) for w in workers):
            return
        if time.monotonic() > deadline:
            missing = [w.describe() for w in workers if not condition(w)]
            raise CaseFailed(f"no {what} within {timeout} s: " + " | ".join(missing))
        time.sleep(0.01)


def in_world(size, after=0):
    """The worker's last world has this size and a generation after `after`."""
    def condition(w):
        world = w.world()
        return world is not None and world["size"] == size and world["generation"] > after
    return condition


def same_world(workers, size):
    """Checks that the workers' last worlds are one world of `size` and
    returns (generation, {id: rank})."""
    worlds = {w.id: w.world() for w in workers}
    generations = {x["generation"] for x in worlds.values()}
    check(len(generations) == 1, f"the members are in different generations: {worlds}")
    peers = {json.dumps(x["peers"]) for x in worlds.values()}
    check(len(peers) == 1, f"the members see different peers: {worlds}")
    ranks = {m: x["rank"] for m, x in worlds.items()}
    check(sorted(ranks.values()) == list(range(size)), f"ranks {ranks}, expected 0..{size - 1}")
    listed = {p[1]: p[0] for p in next(iter(worlds.values()))["peers"]}
    check(listed == ranks, f"peers {listed} do not match the members' own ranks {ranks}")
    return generations.pop(), ranks


def start_job(url, name, settings, token=None):
    ok(url, "POST", "/v1/jobs", {"name": name, "settings": settings}, token=token)


def start_members(url, job, count, workdir, token_file=None, first=0):
    return [Worker(url, job, f"m{i}", workdir, token_file, i) for i in range(first, first + count)]


def job_members(url, job, token=None):
    state = ok(url, "GET", f"/v1/jobs/{job}", token=token)
    return state, {m["id"]: m for m in state["members"]}


def order(ranks, members):
    return sorted(members, key=lambda m: ranks[m])


# ------------------------------------------------------------------ cases

def case_form_4(exe, workdir):
    c = Coordinator(exe, workdir)
    start_job(c.url, "train", {"min_nodes": 4, "max_nodes": 4, "heartbeat_interval": 0.2, "failure_timeout": 2})
    workers = start_members(c.url, "train", 4, workdir)
    wait_until(workers, in_world(4), "world of 4")
    generation, ranks = same_world(workers, 4)
    check(generation == 1, f"generation {generation}, expected 1")
    addresses = {p[1]: p[2] for p in workers[0].world()["peers"]}
    check(addresses == {f"m{i}": f"127.0.0.1:{29500 + i}" for i in range(4)}, f"peer addresses {addresses}")
    time.sleep(1.0)  # five heartbeats more: the world holds
    for w in workers:
        check(len(w.of_kind("world")) == 1 and not w.of_kind("rendezvous") and not w.of_kind("conflict"),
              f"the world did not hold: {w.describe()}")
    state, members = job_members(c.url, "train")
    check(state["phase"] == "running" and state["generation"] == 1 and state["world_size"] == 4, f"job {state}")
    check(all(m["state"] == "active" and m["heartbeats"] >= 3 for m in members.values()), f"members {members}")
    print(f"form_4: ok (generation 1, ranks {ranks})", flush=True)


def first_after(worker, kinds, t):
    """The time of the worker's first event of these kinds after t, or None."""
    with worker.lock:
        return next((e["t"] for e in worker.events if e["event"] in kinds and e["t"] >= t), None)


def case_kill_member(exe, workdir):
    interval, failure_timeout = 0.2, 1.0
    c = Coordinator(exe, workdir)
    start_job(c.url, "train", {"min_nodes": 3, "max_nodes": 4, "last_call": LAST_CALL_S,
                               "heartbeat_interval": interval, "failure_timeout": failure_timeout})
    workers = start_members(c.url, "train", 4, workdir)
    # Three may form a world before the fourth arrives, which then grows it.
    wait_until(workers, in_world(4), "world of 4")
    wait_until(workers, lambda w: w.world()["generation"] == max(x.world()["generation"] for x in workers),
               "one generation")
    generation, ranks = same_world(workers, 4)
    victim = next(w for w in workers if ranks[w.id] == 1)
    survivors = [w for w in workers if w is not victim]
    t_kill = time.time()
    victim.kill9()
    wait_until(survivors, in_world(3, generation), "new world of 3 after the kill")
    new_generation, new_ranks = same_world(survivors, 3)
    told = {w.id: first_after(w, ("rendezvous", "conflict"), t_kill) - t_kill for w in survivors}
    seen = {w.id: next(e["t"] for e in w.of_kind("world") if e["generation"] == new_generation) - t_kill
            for w in survivors}
    detection, formed = max(told.values()), max(seen.values())
    print(f"kill_member: killed {victim.id} (rank 1 of generation {generation}) with 9; every survivor told of the "
          f"new round after {detection:.3f} s, in generation {new_generation} after {formed:.3f} s "
          f"(failure_timeout {failure_timeout} s, interval {interval} s, last_call {LAST_CALL_S} s; per member: "
          f"{', '.join(f'{m} {told[m]:.3f}/{seen[m]:.3f} s' for m in sorted(seen))})", flush=True)
    check(detection <= failure_timeout + 2 * interval,
          f"the survivors learnt of the new round after {detection:.3f} s, more than failure_timeout + 2 intervals")
    check(detection >= failure_timeout - interval, f"a new round after only {detection:.3f} s")
    # The round closes last_call after the last survivor joined again, at
    # the coordinator's next tick; the members see it at their next look.
    check(formed <= failure_timeout + 2 * interval + LAST_CALL_S + 2 * TICK_S,
          f"the survivors saw the new world after {formed:.3f} s, more than failure_timeout + 2 intervals + "
          f"last_call + 2 ticks")
    old_rank0 = next(m for m, r in ranks.items() if r == 0)
    check(new_ranks[old_rank0] == 0, f"rank 0 moved from {old_rank0}: {new_ranks}")
    ids = [w.id for w in survivors]
    check(order(new_ranks, ids) == order(ranks, ids), f"survivors reordered: {ranks} -> {new_ranks}")
    _, members = job_members(c.url, "train")
    check(members[victim.id]["state"] == "failed", f"{victim.id}: {members[victim.id]}")
    print(f"kill_member: ok (ranks {ranks} -> {new_ranks})", flush=True)


def case_late_joiner(exe, workdir):
    c = Coordinator(exe, workdir)
    start_job(c.url, "train", {"min_nodes": 2, "max_nodes": 3, "last_call": LAST_CALL_S,
                               "heartbeat_interval": 0.2, "failure_timeout": 2})
    first = start_members(c.url, "train", 2, workdir)
    wait_until(first, in_world(2), "world of 2")
    generation, ranks = same_world(first, 2)
    check(generation == 1, f"generation {generation}, expected 1")
    time.sleep(0.6)  # a few heartbeats in generation 1
    late = Worker(c.url, "train", "m2", workdir, index=2)
    workers = first + [late]
    wait_until(workers, in_world(3, generation), "world of 3 with the late joiner")
    new_generation, new_ranks = same_world(workers, 3)
    check(new_generation == 2, f"generation {new_generation}, expected 2")
    ids = [w.id for w in first]
    check(order(new_ranks, ids) == order(ranks, ids), f"the first two reordered: {ranks} -> {new_ranks}")
    old_rank0 = next(m for m, r in ranks.items() if r == 0)
    check(new_ranks[old_rank0] == 0, f"rank 0 moved from {old_rank0}: {new_ranks}")
    for w in first:
        check(w.of_kind("rendezvous"), f"{w.id} was not told of the round: {w.describe()}")
    state, _ = job_members(c.url, "train")
    check(state["generation"] == 2 and state["world_size"] == 3, f"job {state}")
    print(f"late_joiner: ok (generation 1 {ranks} -> generation 2 {new_ranks})", flush=True)


def case_leave(exe, workdir):
    interval, failure_timeout = 0.2, 3.0
    c = Coordinator(exe, workdir)
    start_job(c.url, "train", {"min_nodes": 2, "max_nodes": 3, "last_call": LAST_CALL_S,
                               "heartbeat_interval": interval, "failure_timeout": failure_timeout})
    workers = start_members(c.url, "train", 3, workdir)
    wait_until(workers, in_world(3), "world of 3")
    wait_until(workers, lambda w: w.world()["generation"] == max(x.world()["generation"] for x in workers),
               "one generation")
    generation, ranks = same_world(workers, 3)
    leaver = next(w for w in workers if ranks[w.id] == 1)
    survivors = [w for w in workers if w is not leaver]
    t_leave = time.time()
    leaver.leave()
    wait_until(survivors, in_world(2, generation), "new world of 2 after the leave")
    check(leaver.proc.wait(timeout=10) == 0, f"{leaver.id} exited {leaver.proc.returncode}: {leaver.describe()}")
    check(leaver.of_kind("left"), f"{leaver.id} did not leave: {leaver.describe()}")
    new_generation, new_ranks = same_world(survivors, 2)
    seen = max(next(e["t"] for e in w.of_kind("world") if e["generation"] == new_generation) for w in survivors)
    took = seen - t_leave
    print(f"leave: {leaver.id} left generation {generation}; both survivors in generation {new_generation} "
          f"after {took:.3f} s (failure_timeout {failure_timeout} s)", flush=True)
    check(took < failure_timeout / 2, f"the survivors saw the new world after {took:.3f} s")
    ids = [w.id for w in survivors]
    check(order(new_ranks, ids) == order(ranks, ids), f"survivors reordered: {ranks} -> {new_ranks}")
    _, members = job_members(c.url, "train")
    check(members[leaver.id]["state"] == "left", f"{leaver.id}: {members[leaver.id]}")
    print(f"leave: ok (ranks {ranks} -> {new_ranks})", flush=True)


def oversized_post(url, path, size, token):
    """POSTs a JSON body of `size` bytes on a raw socket; (status, JSON
    answer). The server may answer and close before it has all of it."""
    parsed = urllib.parse.urlsplit(url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as s:
        head = (f"POST {path} HTTP/1.1\r\nHost: {parsed.netloc}\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n").encode()
        s.sendall(head)
        body = b'{"id": "' + b"x" * (size - 10) + b'"}'
        body += b" " * (size - len(body))
        try:
            s.sendall(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before all of it was read
        answer = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
        except ConnectionResetError:
            pass
    check(answer.startswith(b"HTTP/1.1 "), f"oversized body: answer {answer[:200]!r}")
    head, _, payload = answer.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    return status, json.loads(payload)


def case_bad_requests(exe, workdir):
    token = "s3cret-token"
    token_file = os.path.join(workdir, "token")
    with open(token_file, "w") as f:
        f.write(token + "\n")
    c = Coordinator(exe, workdir, ["--token-file", token_file])
    start_job(c.url, "train", {"min_nodes": 2, "max_nodes": 2, "heartbeat_interval": 0.2, "failure_timeout": 2},
              token=token)
    workers = start_members(c.url, "train", 2, workdir, token_file)
    wait_until(workers, in_world(2), "world of 2")
    generation, _ = same_world(workers, 2)

    def expect(what, status, answer, want_status, want_error, *named):
        check(isinstance(answer, dict) and set(answer) >= {"error", "detail"},
              f"{what}: answer {status} {answer!r} is not JSON with error and detail")
        check(status == want_status and answer["error"] == want_error,
              f"{what}: {status} {answer}, expected {want_status} {want_error}")
        for name in named:
            check(name in answer["detail"], f"{what}: the detail does not name {name!r}: {answer['detail']!r}")
        print(f"bad_requests: {what}: {status} {answer['error']}: {answer['detail']}", flush=True)

    heartbeat = "/v1/jobs/train/heartbeat"
    status, answer = request(c.url, "POST", heartbeat, raw=b'{"member": "m0", "generation": ', token=token,
                             headers={"Content-Type": "application/json"})
    expect("malformed JSON", status, answer, 400, "malformed_json", "byte")
    status, answer = request(c.url, "POST", "/v1/jobs", raw=b'{"name": train}', token=token,
                             headers={"Content-Type": "application/json"})
    expect("malformed JSON (job)", status, answer, 400, "malformed_json", "byte")
    status, answer = oversized_post(c.url, "/v1/jobs/train/join", 2 * 1024 * 1024, token)
    expect("2 MiB body", status, answer, 413, "body_too_large", str(1024 * 1024))
    status, answer = request(c.url, "GET", "/v1/jobs/train", token="wrong-token")
    expect("wrong token", status, answer, 401, "unauthorized")
    status, answer = request(c.url, "GET", "/v1/jobs/train")
    expect("no token", status, answer, 401, "unauthorized")
    status, answer = request(c.url, "GET", "/v1/jobs/no-such-job", token=token)
    expect("unknown job", status, answer, 404, "not_found", "no-such-job")
    status, answer = request(c.url, "POST", "/v1/jobs/no-such-job/heartbeat", {"member": "m0", "generation": 1},
                             token=token)
    expect("unknown job (heartbeat)", status, answer, 404, "not_found", "no-such-job")
    wrong = generation + 7
    status, answer = request(c.url, "POST", heartbeat, {"member": "m0", "generation": wrong}, token=token)
    expect("wrong generation", status, answer, 409, "conflict", str(wrong), str(generation))
    status, answer = request(c.url, "POST", "/v1/jobs/train/join", {"id": 42}, token=token)
    expect("wrongly typed field", status, answer, 400, "invalid_argument", "id")

    check(c.proc.poll() is None, f"the coordinator exited ({c.proc.returncode}): {c.stderr()}")
    state, members = job_members(c.url, "train", token=token)
    check(state["generation"] == generation and state["phase"] == "running", f"job after the bad requests: {state}")
    time.sleep(0.6)  # the members heartbeat on, undisturbed
    for w in workers:
        check(w.proc.poll() is None and len(w.of_kind("world")) == 1 and not w.of_kind("rendezvous")
              and not w.of_kind("conflict"), f"disturbed: {w.describe()}")
    check(all(m["state"] == "active" for m in members.values()), f"members {members}")
    print("bad_requests: ok (the coordinator is still up and answers)", flush=True)


CASES = {"form_4": case_form_4, "kill_member": case_kill_member, "late_joiner": case_late_joiner,
         "leave": case_leave, "bad_requests": case_bad_requests}


def run_case(exe, name):
    return case_runner.run_case(name, lambda workdir: CASES[name](exe, workdir),
                                prefix=f"cohort-members-{name}-", deadline_s=CASE_DEADLINE_S,
                                kill_all=lambda: case_runner.kill_live(children),
                                clean_up=lambda: case_runner.reap(children), expected=(CaseFailed,))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--coordinator", required=True, help="the cohort-coordinator executable")
    parser.add_argument("cases", nargs="+", choices=sorted(CASES))
    args = parser.parse_args()
    failed = [c for c in args.cases if not run_case(args.coordinator, c)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
