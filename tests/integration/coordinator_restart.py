#!/usr/bin/env python3
"""The coordinator's durable state: kill -9 it mid-job, start it again on the
same data directory, and nothing is lost.

Starts the cohort-coordinator executable with --data-dir in a temporary
folder and talks plain HTTP to it (urllib). Cases:

  restart   a 3-node job with store keys and a dataset, some shards done and
            one lease outstanding; kill -9 the coordinator, keep it down
            longer than the failure timeout while the members heartbeat
            with retries, start it again on the same directory and port:
            job, members, generation, ranks, store keys and shard
            accounting are back, no member failed, and the members finish
            the dataset with every shard counted exactly once
  lock      a second coordinator on the same directory fails with a message
            naming the directory; SIGTERM stops the first cleanly and leaves
            a snapshot
  torn      a torn last journal line (the file cut short by a few bytes) is
            dropped with a warning; everything before it is back
  corrupt   garbage in the middle of the journal stops start-up with a
            message naming the file and the byte offset
  lost      the newest journal emptied, then deleted, then its complete
            last line damaged: each stops start-up with a message naming
            the file and what to do; put back, everything is there
  private   under umask 0 the data directory is 0700 and every file in it
            (lock, journal, snapshot, manifest) 0600
  keys      a store add sent again with its Idempotency-Key is answered
            with the first answer and not applied; after kill -9 and a
            restart the key is forgotten (keys are not journaled:
            docs/coordinator.md, "Retries") and the add applies again, as
            it does once --idempotency-window has passed

    coordinator_restart.py --coordinator PATH CASE [CASE...]

A watchdog kills every child and fails the case when it overruns, so the
test never hangs. Standard library only.
"""

import argparse
import glob
import http.client
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import case_runner  # beside this file, so on sys.path when run as a script
import urllib.error
import urllib.parse

from coordinator_http import CaseFailed, check, free_port, ok, request

CASE_DEADLINE_S = 90.0
FAILURE_TIMEOUT_S = 2.0      # the job's; the outage lasts longer than this
OUTAGE_S = 3.0
SHARDS = 12


class Coordinator:
    """One cohort-coordinator process; its stderr goes to a file."""

    children = []  # every process started, for the watchdog

    def __init__(self, exe, data_dir, port, workdir, name, extra=()):
        self.stderr_path = os.path.join(workdir, name + ".stderr")
        self.stderr_file = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [exe, "--port", str(port), "--data-dir", data_dir, *extra],
            stdout=subprocess.PIPE, stderr=self.stderr_file)
        Coordinator.children.append(self.proc)
        self.url = None

    def started(self):
        """Waits for the URL line; None when the process exits first."""
        line = self.proc.stdout.readline().decode().strip()
        if not line:
            self.proc.wait()
            return None
        self.url = line
        return line

    def stderr(self):
        self.stderr_file.flush()
        with open(self.stderr_path, "rb") as f:
            return f.read().decode(errors="replace")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def terminate(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)


def start(exe, data_dir, port, workdir, name, extra=()):
    c = Coordinator(exe, data_dir, port, workdir, name, extra)
    url = c.started()
    check(url is not None, f"{name}: the coordinator did not start (exit {c.proc.returncode}): {c.stderr()}")
    return c


class Heartbeats(threading.Thread):
    """A member heartbeating every 0.25 s, retrying through the outage.
    Records every answer that is neither 200 nor a connection error."""

    def __init__(self, url, member, generation):
        super().__init__(daemon=True)
        self.url, self.member, self.generation = url, member, generation
        self.stop = threading.Event()
        self.bad = []
        self.ok = 0
        self.retries = 0

    def run(self):
        while not self.stop.wait(0.25):
            try:
                status, answer = request(self.url, "POST", "/v1/jobs/train/heartbeat",
                                         {"member": self.member, "generation": self.generation}, timeout=2)
            except (urllib.error.URLError, http.client.HTTPException, OSError):
                self.retries += 1  # the coordinator is down: try again
                continue
            if status == 200 and not answer.get("rendezvous"):
                self.ok += 1
            else:
                self.bad.append((status, answer))


def job_state(url):
    return ok(url, "GET", "/v1/jobs/train")


def shard_progress(state):
    epoch = state["shards"]["epochs"][0]
    return epoch["todo"], epoch["leased"], epoch["done"]


def case_restart(exe, workdir):
    data = os.path.join(workdir, "data")
    port = free_port()
    a = start(exe, data, port, workdir, "first")
    url = a.url
    settings = {"min_nodes": 3, "max_nodes": 3, "last_call": 0, "heartbeat_interval": 0.25,
                "failure_timeout": FAILURE_TIMEOUT_S}
    ok(url, "POST", "/v1/jobs", {"name": "train", "settings": settings})
    members = ["m0", "m1", "m2"]
    for i, m in enumerate(members):
        ok(url, "POST", "/v1/jobs/train/join", {"id": m, "host": f"host{i}", "address": f"127.0.0.1:{9000 + i}"})
    worlds = {}
    deadline = time.monotonic() + 10
    while len(worlds) < 3:
        check(time.monotonic() < deadline, "the world did not form within 10 s")
        for m in members:
            w = ok(url, "GET", f"/v1/jobs/train/world?member={m}", expect=(200, 503))
            if w.get("state") == "active":
                worlds[m] = w
        time.sleep(0.05)
    generation = worlds["m0"]["generation"]
    ranks = {m: w["rank"] for m, w in worlds.items()}
    check(sorted(ranks.values()) == [0, 1, 2], f"ranks {ranks}")
    beats = [Heartbeats(url, m, generation) for m in members]
    for b in beats:
        b.start()

    store = f"/v1/jobs/train/store/{generation}"
    for m in members:
        ok(url, "PUT", f"{store}/{urllib.parse.quote('addr/' + str(ranks[m]), safe='')}", raw=f"{m}:1234".encode())
    for _ in range(3):
        ok(url, "POST", f"{store}/counter/add", {"delta": 2})

    plan = {"shards": [{"id": f"shard-{i}"} for i in range(SHARDS)], "epochs": 1, "lease_duration": 120}
    ok(url, "POST", "/v1/jobs/train/dataset", plan)
    done_before = []
    for i in range(5):
        lease = ok(url, "POST", "/v1/jobs/train/shards/next", {"member": members[i % 3]})
        check("lease" in lease, f"no lease: {lease}")
        outcome = ok(url, "POST", "/v1/jobs/train/shards/done", {"member": members[i % 3], "lease": lease["lease"]})
        check(outcome["outcome"] == "counted", f"done: {outcome}")
        done_before.append(lease["shard_id"])
    outstanding = ok(url, "POST", "/v1/jobs/train/shards/next", {"member": "m1"})
    check("lease" in outstanding, f"no lease: {outstanding}")
    before = job_state(url)
    check(shard_progress(before) == (SHARDS - 6, 1, 5), f"shards before: {before['shards']}")

    a.kill9()
    print(f"restart: killed the coordinator (pid {a.proc.pid}) with 9; down for {OUTAGE_S} s", flush=True)
    time.sleep(OUTAGE_S)
    b = start(exe, data, port, workdir, "second")
    check(b.url == url, f"restarted at {b.url}, not {url}")
    time.sleep(2 * FAILURE_TIMEOUT_S)  # long enough for a failure, were the outage counted

    after = job_state(url)
    for b_thread in beats:
        b_thread.stop.set()
    for b_thread in beats:
        b_thread.join()
    check(after["generation"] == generation, f"generation {after['generation']}, was {generation}")
    check(after["phase"] == "running", f"phase {after['phase']}")
    states = {m["id"]: (m["state"], m.get("rank")) for m in after["members"]}
    check(states == {m: ("active", ranks[m]) for m in members}, f"members after the restart: {states}")
    for hb in beats:
        check(not hb.bad, f"{hb.member}: heartbeats answered {hb.bad[:3]}")
        check(hb.retries > 0, f"{hb.member}: no heartbeat met the outage")
    for m in members:
        w = ok(url, "GET", f"/v1/jobs/train/world?member={m}")
        check(w["rank"] == ranks[m] and w["generation"] == generation, f"world of {m}: {w}")
        key = urllib.parse.quote("addr/" + str(ranks[m]), safe="")
        status, value = request(url, "GET", f"{store}/{key}")
        check(status == 200 and value == f"{m}:1234".encode(), f"store {key}: {status} {value}")
    counter = ok(url, "POST", f"{store}/counter/add", {"delta": 0})
    check(counter["value"] == 6, f"counter {counter}")
    check(shard_progress(after) == (SHARDS - 6, 1, 5), f"shards after: {after['shards']}")
    check(after["shards"]["leases"] == 1, f"leases after: {after['shards']}")

    # The outstanding lease is still m1's; the members finish the dataset.
    outcome = ok(url, "POST", "/v1/jobs/train/shards/done", {"member": "m1", "lease": outstanding["lease"]})
    check(outcome["outcome"] == "counted", f"outstanding lease: {outcome}")
    done_after = [outstanding["shard_id"]]
    finished = False
    turn = 0
    while not finished:
        check(turn < 10 * SHARDS, "the dataset does not finish")
        m = members[turn % 3]
        turn += 1
        lease = ok(url, "POST", "/v1/jobs/train/shards/next", {"member": m})
        if lease.get("finished"):
            finished = True
            break
        check("lease" in lease, f"next: {lease}")
        outcome = ok(url, "POST", "/v1/jobs/train/shards/done", {"member": m, "lease": lease["lease"]})
        check(outcome["outcome"] == "counted", f"done: {outcome}")
        done_after.append(lease["shard_id"])
    every = done_before + done_after
    check(sorted(every) == sorted(f"shard-{i}" for i in range(SHARDS)), f"shards done: {sorted(every)}")
    final = job_state(url)
    check(shard_progress(final) == (0, 0, SHARDS), f"final shards: {final['shards']}")
    check(final["shards"]["duplicate_reports"] == 0 and final["shards"]["finished"], f"final: {final['shards']}")
    check(b.terminate() == 0, f"SIGTERM: exit {b.proc.returncode}: {b.stderr()}")
    print(f"restart: ok ({sum(h.retries for h in beats)} heartbeats retried through the outage)", flush=True)


def case_lock(exe, workdir):
    data = os.path.join(workdir, "data")
    a = start(exe, data, free_port(), workdir, "first")
    ok(a.url, "POST", "/v1/jobs", {"name": "train"})
    b = Coordinator(exe, data, free_port(), workdir, "second")
    check(b.started() is None, "a second coordinator started on the same data directory")
    message = b.stderr()
    check(b.proc.returncode != 0, f"second coordinator: exit {b.proc.returncode}")
    check(data in message and "another coordinator holds" in message, f"second coordinator said: {message!r}")
    check(a.proc.poll() is None, "the first coordinator stopped")
    ok(a.url, "GET", "/v1/jobs/train")
    check(a.terminate() == 0, f"SIGTERM: exit {a.proc.returncode}: {a.stderr()}")
    check(glob.glob(os.path.join(data, "snapshot-*.json")), f"no snapshot after a clean stop: {os.listdir(data)}")
    c = start(exe, data, free_port(), workdir, "third")
    ok(c.url, "GET", "/v1/jobs/train")
    check(c.terminate() == 0, "SIGTERM of the third")
    print(f"lock: ok ({message.strip()})", flush=True)


def newest_journal(data):
    journals = sorted(glob.glob(os.path.join(data, "journal-*.jsonl")))
    check(journals, f"no journal in {data}: {os.listdir(data)}")
    return journals[-1]


def three_jobs_then_kill(exe, data, workdir):
    a = start(exe, data, free_port(), workdir, "first")
    for name in ("a", "b", "c"):
        ok(a.url, "POST", "/v1/jobs", {"name": name})
    a.kill9()
    return newest_journal(data)


def job_names(url):
    return sorted(j["name"] for j in ok(url, "GET", "/v1/jobs")["jobs"])


def case_torn(exe, workdir):
    data = os.path.join(workdir, "data")
    journal = three_jobs_then_kill(exe, data, workdir)
    with open(journal, "rb") as f:
        text = f.read()
    check(b'"c"' in text.splitlines()[-1], f"the last line is not job c's: {text.splitlines()[-1]!r}")
    size = len(text)
    os.truncate(journal, size - 5)
    b = start(exe, data, free_port(), workdir, "second")
    message = b.stderr()
    check("warning" in message and os.path.basename(journal) in message,
          f"no warning about the torn line: {message!r}")
    check(job_names(b.url) == ["a", "b"], f"jobs after a torn last line: {job_names(b.url)}")
    check(b.terminate() == 0, "SIGTERM")
    print(f"torn: ok ({message.strip()})", flush=True)


def case_corrupt(exe, workdir):
    data = os.path.join(workdir, "data")
    journal = three_jobs_then_kill(exe, data, workdir)
    with open(journal, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    check(len(lines) >= 3, f"{journal}: {len(lines)} lines")
    offset = len(lines[0])
    with open(journal, "wb") as f:
        f.write(lines[0] + b"this is not a journal line\n" + b"".join(lines[1:]))
    b = Coordinator(exe, data, free_port(), workdir, "second")
    check(b.started() is None, "the coordinator started on a corrupt journal")
    message = b.stderr()
    check(b.proc.returncode != 0, f"exit {b.proc.returncode}")
    check(journal in message and f"byte {offset}" in message,
          f"the message does not name {journal} at byte {offset}: {message!r}")
    print(f"corrupt: ok ({message.strip()})", flush=True)


def refused(exe, data, workdir, name, *expected):
    c = Coordinator(exe, data, free_port(), workdir, name)
    check(c.started() is None, f"{name}: the coordinator started")
    message = c.stderr()
    check(c.proc.returncode != 0, f"{name}: exit {c.proc.returncode}")
    for e in expected:
        check(e in message, f"{name}: the message does not say {e!r}: {message!r}")
    print(f"lost: {name}: ok ({message.strip()})", flush=True)


def case_lost(exe, workdir):
    data = os.path.join(workdir, "data")
    journal = three_jobs_then_kill(exe, data, workdir)
    with open(journal, "rb") as f:
        good = f.read()
    manifest = os.path.join(data, "manifest.json")
    os.truncate(journal, 0)
    refused(exe, data, workdir, "empty", journal + ": the journal is empty", "remove " + manifest)
    os.remove(journal)
    refused(exe, data, workdir, "missing", journal + ": the journal is missing", "remove " + manifest)
    lines = good.splitlines(keepends=True)
    last = bytearray(lines[-1])
    last[len(last) // 2] ^= 1
    with open(journal, "wb") as f:
        f.write(b"".join(lines[:-1]) + bytes(last))
    offset = len(good) - len(lines[-1])
    refused(exe, data, workdir, "checksum", f"{journal}: byte {offset}: checksum mismatch",
            f"truncate this file to {offset} bytes")
    with open(journal, "wb") as f:
        f.write(good)
    b = start(exe, data, free_port(), workdir, "restored")
    check(job_names(b.url) == ["a", "b", "c"], f"jobs after putting the journal back: {job_names(b.url)}")
    check(b.terminate() == 0, "SIGTERM")


def case_private(exe, workdir):
    data = os.path.join(workdir, "data")
    saved = os.umask(0)
    try:
        a = start(exe, data, free_port(), workdir, "first")
    finally:
        os.umask(saved)
    ok(a.url, "POST", "/v1/jobs", {"name": "a"})
    check(a.terminate() == 0, "SIGTERM")  # a clean stop writes a snapshot
    modes = {name: stat.S_IMODE(os.stat(os.path.join(data, name)).st_mode) for name in os.listdir(data)}
    check(stat.S_IMODE(os.stat(data).st_mode) == 0o700, f"{data}: {oct(os.stat(data).st_mode)}")
    check({"lock", "manifest.json"} <= set(modes) and any(n.startswith("snapshot-") for n in modes),
          f"files in {data}: {sorted(modes)}")
    bad = {n: oct(m) for n, m in modes.items() if m != 0o600}
    check(not bad, f"files not 0600: {bad}")
    print(f"private: ok ({len(modes)} files 0600, the directory 0700)", flush=True)


def case_keys(exe, workdir):
    data = os.path.join(workdir, "data")
    port = free_port()
    window_s = 4
    window = ["--idempotency-window", str(window_s), "--idempotency-keys", "100"]
    a = start(exe, data, port, workdir, "first", window)
    ok(a.url, "POST", "/v1/jobs", {"name": "k", "settings": {"min_nodes": 1, "max_nodes": 1, "last_call": 0}})
    generation = ok(a.url, "POST", "/v1/jobs/k/join", {"id": "a", "host": "h"})["generation"]
    path = f"/v1/jobs/k/store/{generation}/n/add"

    def add(url, key):
        status, answer = request(url, "POST", path, {"delta": 2}, headers={"Idempotency-Key": key})
        check(status == 200, f"add with key {key}: {status} {answer}")
        return answer["value"]

    check(add(a.url, "first") == 2, "the first add")
    kept_at = time.monotonic()
    check(add(a.url, "first") == 2, "the same key again: answered from memory, not applied")
    # kill -9 after the answer: the retry of a client that never read it
    # must not be applied again. The key was journaled with the change.
    a.kill9()
    b = start(exe, data, port, workdir, "restarted", window)
    check(time.monotonic() - kept_at < window_s - 0.5, "the restart took most of the window; the case proves nothing")
    check(add(b.url, "first") == 2, "after a kill -9 and a restart the key is still known: not applied again")
    time.sleep(max(0.0, kept_at + window_s + 0.3 - time.monotonic()))
    check(add(b.url, "first") == 4, "past --idempotency-window the key is forgotten: applied again")
    check(add(b.url, "first") == 4, "and remembered again")
    metrics = request(b.url, "GET", "/metrics")[1].decode()
    check("cohort_coordinator_idempotent_replays_total 2\n" in metrics, "two replays counted in /metrics")
    status, answer = request(b.url, "POST", path, {"delta": 3}, headers={"Idempotency-Key": "first"})
    check(status == 422 and answer.get("error") == "idempotency_key_reused", f"key reused: {status} {answer}")
    check(b.terminate() == 0, "SIGTERM")
    print("keys: ok (a retry answered from memory, also after kill -9 and a restart; forgotten by the window)",
          flush=True)


CASES = {"restart": case_restart, "lock": case_lock, "torn": case_torn, "corrupt": case_corrupt,
         "lost": case_lost, "private": case_private, "keys": case_keys}


def run_case(exe, name):
    return case_runner.run_case(name, lambda workdir: CASES[name](exe, workdir),
                                prefix=f"cohort-coordinator-{name}-", deadline_s=CASE_DEADLINE_S,
                                kill_all=lambda: case_runner.kill_live(Coordinator.children),
                                clean_up=lambda: case_runner.reap(Coordinator.children), expected=(CaseFailed,))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--coordinator", required=True, help="the cohort-coordinator executable")
    parser.add_argument("cases", nargs="+", choices=sorted(CASES))
    args = parser.parse_args()
    failed = [c for c in args.cases if not run_case(args.coordinator, c)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
