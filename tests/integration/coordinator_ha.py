#!/usr/bin/env python3
"""The etcd-backed coordinator under faults (docs/coordinator.md, "High
availability").

Starts a real etcd (one member, or three for `etcd_member`) on free loopback
ports and three `cohort-coordinator --etcd` replicas, then runs a job of 3
members against them: each member heartbeats every 0.2 s, leases and
completes shards, and one member waits on a store key that another sets
later. The members speak plain HTTP through FailoverClient, which does what
the library's client does: it follows X-Cohort-Leader, moves to the next
replica on a refused connection or a 503 without a leader, and sends every
change but a heartbeat with one Idempotency-Key on all its attempts.

Cases:
  leader_killed   kill -9 of the leader mid-job, heartbeats, a store wait and
                  shard leases in flight: a follower leads within 3 s of the
                  kill (measured to its first answered write), no round
                  opens, no rank changes, no member fails, every shard is
                  done exactly once, and the wait gets its value
  follower_killed kill -9 of a follower: nothing changes for the members
  etcd_member     one member of a 3-member etcd cluster killed: the job goes
                  on, no new leader
  etcd_down       etcd killed: changes get 503 naming etcd, reads and
                  heartbeats are answered; etcd started again on its data:
                  the same leader carries on by itself, and a change that
                  got 503 is answered by its retry
  leader_paused   SIGSTOP of the leader for longer than its lease: a follower
                  is elected; a change sent to the old leader while it was
                  stopped is refused when it wakes (not_leader), is not in
                  etcd, and the old leader follows

    coordinator_ha.py --coordinator PATH [--repeat N] CASE [CASE...]

A watchdog kills every child when a case overruns. Standard library only.
"""

import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

import case_runner

ETCD = "/usr/bin/etcd"
CASE_DEADLINE_S = 120.0
SHARDS = 60
FAILOVER_TARGET_S = 3.0


class CaseFailed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise CaseFailed(message)


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


CHILDREN = []  # every process started, for the watchdog


def spawn(args, log_path):
    log = open(log_path, "ab")
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log)
    p.log_path = log_path
    CHILDREN.append(p)
    return p


def log_of(p):
    with open(p.log_path, "rb") as f:
        return f.read().decode(errors="replace")


class Etcd:
    """1 or 3 etcd members on free loopback ports; a member can be killed
    and started again on its data."""

    def __init__(self, workdir, members=1):
        self.workdir, self.n = workdir, members
        ports = free_ports(2 * members)
        self.client_ports, self.peer_ports = ports[:members], ports[members:]
        self.procs = [None] * members
        for i in range(members):
            self.start(i)
        self.wait_healthy()

    def endpoint(self, i):
        return f"127.0.0.1:{self.client_ports[i]}"

    def endpoints(self):
        return ",".join(self.endpoint(i) for i in range(self.n))

    def start(self, i):
        initial = ",".join(f"m{j}=http://127.0.0.1:{self.peer_ports[j]}" for j in range(self.n))
        self.procs[i] = spawn(
            [ETCD, f"--name=m{i}", f"--data-dir={self.workdir}/etcd-m{i}",
             f"--listen-client-urls=http://{self.endpoint(i)}",
             f"--advertise-client-urls=http://{self.endpoint(i)}",
             f"--listen-peer-urls=http://127.0.0.1:{self.peer_ports[i]}",
             f"--initial-advertise-peer-urls=http://127.0.0.1:{self.peer_ports[i]}",
             f"--initial-cluster={initial}", "--initial-cluster-state=new",
             f"--initial-cluster-token=t{self.peer_ports[0]}",
             "--heartbeat-interval=50", "--election-timeout=500"],
            f"{self.workdir}/etcd-m{i}.log")

    def kill(self, i):
        p = self.procs[i]
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()

    def healthy(self, i):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.client_ports[i], timeout=1)
            c.request("GET", "/health")
            return b'"true"' in c.getresponse().read()
        except OSError:
            return False

    def wait_healthy(self, members=None, within=15):
        deadline = time.monotonic() + within
        members = range(self.n) if members is None else members
        while time.monotonic() < deadline:
            if all(self.healthy(i) for i in members):
                return
            time.sleep(0.1)
        raise CaseFailed("etcd did not become healthy: " + log_of(self.procs[0])[-2000:])

    def get(self, key):
        """The key's value through the v3 gateway, or None."""
        import base64
        c = http.client.HTTPConnection("127.0.0.1", self.client_ports[0], timeout=3)
        c.request("POST", "/v3/kv/range", json.dumps({"key": base64.b64encode(key.encode()).decode()}))
        kvs = json.loads(c.getresponse().read()).get("kvs", [])
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


class Replica:
    def __init__(self, exe, etcd, prefix, workdir, name, port):
        self.name, self.port = name, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc = spawn([exe, "--port", str(port), "--etcd", etcd.endpoints(), "--etcd-prefix", prefix,
                           "--replica-id", name], f"{workdir}/{name}.log")
        line = self.proc.stdout.readline().decode().strip()
        check(line == self.url, f"{name} did not start ({line!r}): {log_of(self.proc)}")

    def view(self):
        status, answer, _ = call(self.url, "GET", "/v1/replica", timeout=2)
        check(status == 200, f"{self.name}: GET /v1/replica: {status} {answer}")
        return answer

    def role(self):
        try:
            return self.view()["role"]
        except (OSError, http.client.HTTPException):
            return "down"


def call(url, method, path, body=None, raw=None, timeout=5, key=None):
    """(status, JSON or bytes, X-Cohort-Leader) of one request."""
    parsed = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=timeout)
    headers = {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    elif raw is not None:
        data = raw
    if key is not None:
        headers["Idempotency-Key"] = key
    try:
        c.request(method, path, body=data, headers=headers)
        r = c.getresponse()
        payload = r.read()
        ctype = r.getheader("Content-Type", "")
        leader = r.getheader("X-Cohort-Leader", "")
    finally:
        c.close()
    return r.status, (json.loads(payload) if "json" in ctype else payload), leader


class FailoverClient:
    """Requests to a set of replicas, as the library's client makes them."""

    def __init__(self, urls, deadline_s=20.0):
        self.urls = list(urls)
        self.current = self.urls[0]
        self.deadline_s = deadline_s
        self.lock = threading.Lock()

    def request(self, method, path, body=None, raw=None, change=True, timeout=5, expect_fail=False):
        key = f"{random.getrandbits(64):016x}" if change else None
        deadline = time.monotonic() + self.deadline_s
        tried = 0
        last = None
        while True:
            with self.lock:
                url = self.current
            try:
                status, answer, leader = call(url, method, path, body, raw, timeout=timeout, key=key)
                if status != 503:
                    return status, answer
                last = (status, answer)
                if expect_fail:
                    return status, answer
                with self.lock:
                    if leader:
                        self.current = leader
                        continue_at_once = True
                    else:
                        self.current = self.urls[(self.urls.index(url) + 1) % len(self.urls)] \
                            if url in self.urls else self.urls[0]
                        continue_at_once = False
            except (OSError, http.client.HTTPException) as e:
                last = repr(e)
                with self.lock:
                    if self.current == url:
                        self.current = self.urls[(self.urls.index(url) + 1) % len(self.urls)] \
                            if url in self.urls else self.urls[0]
                continue_at_once = False
            tried += 1
            if time.monotonic() > deadline:
                raise CaseFailed(f"{method} {path}: no answer within {self.deadline_s} s; last: {last}")
            if not continue_at_once:
                time.sleep(min(0.05 * (1 + tried), 0.25))


class Member(threading.Thread):
    """Heartbeats every 0.2 s; records anything but 200 (a 'rendezvous'
    answer means a new round)."""

    def __init__(self, client, member, generation):
        super().__init__(daemon=True)
        self.client, self.member, self.generation = client, member, generation
        self.stop = threading.Event()
        self.bad = []
        self.beats = 0

    def run(self):
        while not self.stop.wait(0.2):
            try:
                status, answer = self.client.request(
                    "POST", "/v1/jobs/train/heartbeat", {"member": self.member, "generation": self.generation},
                    change=False, timeout=2)
            except CaseFailed as e:
                self.bad.append(str(e))
                continue
            if status == 200 and not answer.get("rendezvous"):
                self.beats += 1
            else:
                self.bad.append((status, answer))


class Shards(threading.Thread):
    """Leases and completes shards until none is left; counts each shard
    whose done was 'counted'."""

    def __init__(self, client, member, pause_s):
        super().__init__(daemon=True)
        self.client, self.member, self.pause_s = client, member, pause_s
        self.counted = []
        self.errors = []

    def run(self):
        try:
            while True:
                status, lease = self.client.request("POST", "/v1/jobs/train/shards/next", {"member": self.member})
                if status != 200:
                    self.errors.append(("next", status, lease))
                    return
                if not lease.get("granted"):
                    if lease.get("finished"):
                        return
                    time.sleep(0.05)  # every shard left is leased by others: ask again
                    continue
                time.sleep(self.pause_s)
                status, outcome = self.client.request(
                    "POST", "/v1/jobs/train/shards/done", {"member": self.member, "lease": lease["lease"]})
                if status != 200 or outcome.get("outcome") != "counted":
                    self.errors.append(("done", status, outcome))
                    return
                self.counted.append(lease["shard_id"])
        except CaseFailed as e:
            self.errors.append(str(e))


def leader_of(replicas, within=10.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        leaders = [r for r in replicas if r.proc.poll() is None and r.role() == "leader"]
        if len(leaders) == 1:
            return leaders[0]
        time.sleep(0.05)
    raise CaseFailed("no single leader among " + ", ".join(f"{r.name}={r.role()}" for r in replicas))


class Job:
    """A 3-member job with a dataset, formed through `client`."""

    def __init__(self, client):
        self.client = client
        settings = {"min_nodes": 3, "max_nodes": 3, "last_call": 0, "heartbeat_interval": 0.2,
                    "failure_timeout": 2.0}
        status, answer = client.request("POST", "/v1/jobs", {"name": "train", "settings": settings})
        check(status in (200, 201), f"create: {status} {answer}")
        self.members = ["m0", "m1", "m2"]
        for i, m in enumerate(self.members):
            status, answer = client.request("POST", "/v1/jobs/train/join",
                                            {"id": m, "host": f"h{i}", "address": f"127.0.0.1:{9100 + i}"})
            check(status == 200, f"join {m}: {status} {answer}")
        self.ranks = {}
        deadline = time.monotonic() + 10
        while len(self.ranks) < 3:
            check(time.monotonic() < deadline, "the world did not form")
            for m in self.members:
                status, w = client.request("GET", f"/v1/jobs/train/world?member={m}", change=False)
                if status == 200 and w.get("state") == "active":
                    self.ranks[m] = w["rank"]
                    self.generation = w["generation"]
            time.sleep(0.05)
        plan = {"shards": [{"id": f"s{i}"} for i in range(SHARDS)], "epochs": 1, "lease_duration": 60}
        status, answer = client.request("POST", "/v1/jobs/train/dataset", plan)
        check(status in (200, 201), f"dataset: {status} {answer}")
        self.beats = [Member(client, m, self.generation) for m in self.members]
        for b in self.beats:
            b.start()
        self.workers = [Shards(client, m, 0.1) for m in self.members]
        for w in self.workers:
            w.start()
        self.store = f"/v1/jobs/train/store/{self.generation}"
        self.waited = {}
        self.waiter = threading.Thread(target=self._wait_for_key, daemon=True)
        self.waiter.start()

    def _wait_for_key(self):
        # A store get parked on the leader; after a failover the retry parks
        # on the new one (a wait changes nothing: no key needed).
        try:
            status, value = self.client.request("GET", f"{self.store}/late?timeout_ms=30000", change=False,
                                                timeout=35)
            self.waited["answer"] = (status, value)
        except CaseFailed as e:
            self.waited["answer"] = str(e)

    def set_late_key(self):
        status, answer = self.client.request("PUT", f"{self.store}/late", raw=b"after-the-fault")
        check(status in (200, 201), f"store set: {status} {answer}")

    def finish(self):
        """Waits for the shards and the store wait, stops the heartbeats and
        checks the job as the case requires."""
        for w in self.workers:
            w.join(60)
        self.set_late_key()
        self.waiter.join(40)
        for b in self.beats:
            b.stop.set()
        for b in self.beats:
            b.join(10)
        errors = [e for w in self.workers for e in w.errors]
        check(not errors, f"shard errors: {errors[:3]}")
        counted = sorted(s for w in self.workers for s in w.counted)
        check(counted == sorted(f"s{i}" for i in range(SHARDS)),
              f"shards counted {len(counted)} (duplicates {len(counted) - len(set(counted))}), want each of "
              f"{SHARDS} once")
        check(self.waited.get("answer") == (200, b"after-the-fault"), f"store wait: {self.waited.get('answer')}")
        bad = [(b.member, b.bad[:2]) for b in self.beats if b.bad]
        check(not bad, f"heartbeats answered otherwise than 200: {bad}")
        status, state = self.client.request("GET", "/v1/jobs/train", change=False)
        check(status == 200, f"job state: {status}")
        check(state["generation"] == self.generation,
              f"a new round opened: generation {state['generation']}, was {self.generation}")
        for m in self.members:
            status, w = self.client.request("GET", f"/v1/jobs/train/world?member={m}", change=False)
            check(status == 200 and w.get("state") == "active" and w["rank"] == self.ranks[m],
                  f"{m}: {status} {w}, rank was {self.ranks[m]}")
        epoch = state["shards"]["epochs"][0]
        check((epoch["todo"], epoch["leased"], epoch["done"]) == (0, 0, SHARDS), f"shards: {epoch}")


def first_write_after(client, since):
    """Seconds from `since` to the first change the replicas answer."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            status, answer = client.request("POST", "/v1/jobs", {"name": "probe"}, timeout=1, expect_fail=False)
            if status in (200, 201):
                return time.monotonic() - since
        except CaseFailed:
            pass
    raise CaseFailed("no write answered within 20 s")


def setup(exe, workdir, etcd_members=1):
    etcd = Etcd(workdir, etcd_members)
    prefix = "/cohort/ha-test"
    ports = free_ports(3)
    replicas = [Replica(exe, etcd, prefix, workdir, f"r{i}", ports[i]) for i in range(3)]
    leader = leader_of(replicas)
    client = FailoverClient([r.url for r in replicas])
    return etcd, replicas, leader, client


def case_leader_killed(exe, workdir):
    etcd, replicas, leader, client = setup(exe, workdir)
    job = Job(client)
    time.sleep(1.0)  # shards, heartbeats and the wait in flight
    killed = time.monotonic()
    leader.proc.kill()
    leader.proc.wait()
    took = first_write_after(FailoverClient([r.url for r in replicas if r is not leader], 20), killed)
    new = leader_of([r for r in replicas if r is not leader])
    print(f"leader_killed: {leader.name} killed; {new.name} answered a write {took:.2f} s later", flush=True)
    check(took <= FAILOVER_TARGET_S, f"failover took {took:.2f} s, more than {FAILOVER_TARGET_S} s")
    job.finish()
    check("leading" in log_of(new.proc), f"{new.name}'s log: {log_of(new.proc)[-500:]}")


def case_follower_killed(exe, workdir):
    etcd, replicas, leader, client = setup(exe, workdir)
    job = Job(client)
    time.sleep(0.5)
    follower = next(r for r in replicas if r is not leader)
    follower.proc.kill()
    follower.proc.wait()
    time.sleep(1.0)
    check(leader.role() == "leader", f"{leader.name} stopped leading after a follower died")
    job.finish()


def case_etcd_member(exe, workdir):
    etcd, replicas, leader, client = setup(exe, workdir, etcd_members=3)
    job = Job(client)
    time.sleep(0.5)
    etcd.kill(0)  # the replicas' first endpoint
    time.sleep(1.0)
    job.finish()
    check(leader.role() == "leader", f"{leader.name} lost the lead when one etcd member of 3 died")
    others = [r.role() for r in replicas if r is not leader]
    check(others == ["follower", "follower"], f"followers: {others}")


def case_etcd_down(exe, workdir):
    etcd, replicas, leader, client = setup(exe, workdir)
    job = Job(client)
    time.sleep(0.5)
    etcd.kill(0)
    time.sleep(3.0)  # longer than the lease
    # Reads and heartbeats are answered by the leader.
    status, state = call(leader.url, "GET", "/v1/jobs/train")[:2]
    check(status == 200, f"read while etcd is down: {status} {state}")
    status, answer = call(leader.url, "POST", "/v1/jobs/train/heartbeat",
                          {"member": "m0", "generation": job.generation})[:2]
    check(status == 200, f"heartbeat while etcd is down: {status} {answer}")
    key = "etcd-down-change"
    status, answer, _ = call(leader.url, "PUT", f"{job.store}/during", raw=b"v", key=key)
    # Held until etcd_write_timeout, then told why and that the retry with
    # the same Idempotency-Key is safe.
    said = json.dumps(answer)
    check(status == 503 and "etcd" in said and "cannot be reached" in said and "Idempotency-Key" in said,
          f"a change while etcd is down: {status} {answer}")
    etcd.start(0)
    etcd.wait_healthy()
    # The same leader carries on; the retry of the refused change is answered.
    deadline = time.monotonic() + 10
    while True:
        status, answer, _ = call(leader.url, "PUT", f"{job.store}/during", raw=b"v", key=key)
        if status in (200, 201) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    check(status in (200, 201), f"after etcd came back: {status} {answer}")
    check(leader.role() == "leader", f"{leader.name} is {leader.role()} after etcd came back")
    job.finish()


def wait_stopped(pid, within=5.0):
    """Until /proc says every thread of `pid` is stopped (state T)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass
        if states and all(s in ("T", "t") for s in states):
            return
        time.sleep(0.005)
    raise CaseFailed(f"process {pid} did not stop within {within} s")


def case_leader_paused(exe, workdir):
    etcd, replicas, leader, client = setup(exe, workdir)
    job = Job(client)
    time.sleep(0.5)
    # A connection to the leader opened before the pause: its request is
    # read only when the leader wakes.
    conn = http.client.HTTPConnection("127.0.0.1", leader.port, timeout=30)
    leader.proc.send_signal(signal.SIGSTOP)
    wait_stopped(leader.proc.pid)  # else the request may be served before the stop lands
    stopped = time.monotonic()
    try:
        conn.request("PUT", f"{job.store}/from-the-old-leader", body=b"stale",
                     headers={"Idempotency-Key": "old-leader"})
        new = leader_of([r for r in replicas if r is not leader], within=10)
        took = time.monotonic() - stopped
        print(f"leader_paused: {new.name} leads {took:.2f} s after {leader.name} stopped", flush=True)
        time.sleep(0.5)
    finally:
        leader.proc.send_signal(signal.SIGCONT)
    r = conn.getresponse()
    body = r.read()
    check(r.status == 503 and b"not_leader" in body, f"the woken old leader answered {r.status} {body[:300]}")
    deadline = time.monotonic() + 5
    while leader.role() != "follower" and time.monotonic() < deadline:
        time.sleep(0.05)
    check(leader.role() == "follower", f"the old leader is {leader.role()}, not a follower")
    status, _ = client.request("GET", f"{job.store}/from-the-old-leader", change=False)
    check(status == 404, f"the old leader's change reached etcd: {status}")
    job.finish()


CASES = {
    "leader_killed": case_leader_killed,
    "follower_killed": case_follower_killed,
    "etcd_member": case_etcd_member,
    "etcd_down": case_etcd_down,
    "leader_paused": case_leader_paused,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--coordinator", required=True)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("cases", nargs="+", choices=sorted(CASES))
    args = parser.parse_args()
    failed = 0
    for name in args.cases:
        for i in range(args.repeat):
            def kill_all():
                for p in CHILDREN:
                    if p.poll() is None:
                        p.send_signal(signal.SIGCONT)
                        p.kill()

            def clean_up():
                kill_all()
                for p in CHILDREN:
                    p.wait()
                CHILDREN.clear()

            label = name if args.repeat == 1 else f"{name} #{i + 1}"
            if not case_runner.run_case(label, lambda d: CASES[name](args.coordinator, d), prefix="cohort-ha-",
                                        deadline_s=CASE_DEADLINE_S, kill_all=kill_all, clean_up=clean_up,
                                        expected=(CaseFailed, AssertionError)):
                failed += 1
    print(f"{failed} failed" if failed else "all passed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
