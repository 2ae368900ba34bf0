#!/usr/bin/env python3
"""Collectives between separate processes: the real thing.

Starts N cohort_comm_worker processes (tests/fixtures/comm_worker.cpp) that
meet through a tcp:// store hosted by rank 0 on 127.0.0.1 (or a file:// store
in a temporary folder), then checks each one's JSON result line. Cases:

  correctness_N        every dtype x op x algorithm, broadcast, allgather,
                       reduce_scatter and barrier at N ranks: all ok
  correctness_file_3   the same over a file:// store
  kill_N_rankV         SIGKILL rank V in the middle of a large all-reduce:
                       every survivor fails fast (far below the 30 s
                       operation timeout) with peer_failed or closed,
                       naming rank V
  skip_N_MODE          rank N-1 skips an all-reduce (calls barrier, or
                       sleeps): the others fail with mismatch or timeout
                       naming rank N-1
  job_3                rank 2 has another job id: the others time out at
                       construction naming rank 2

    comm_processes.py --worker PATH CASE [CASE...]

A watchdog kills every child and fails the case when it overruns, so the
test never hangs. Standard library only.
"""

import argparse
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ERRC = {"timeout": 6, "peer_failed": 13, "mismatch": 14, "closed": 15}
OP_TIMEOUT_MS = 30000        # per-operation timeout of the kill cases
DETECT_BOUND_MS = 5000       # survivors must fail this fast after the kill
EXIT_BOUND_S = 10.0          # ... and all be gone this soon after it


class CaseFailed(Exception):
    pass


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Job:
    """N workers, their output lines as they come, and a watchdog."""

    def __init__(self, worker, size, flags, store=None, per_rank=None, start_order=None, deadline_s=60.0):
        self.size = size
        self.deadline_s = deadline_s
        self.deadline = time.monotonic() + deadline_s
        self.eof = {r: 0 for r in range(size)}
        self.events = queue.Queue()  # (rank, monotonic time, line or None at EOF, from stderr)
        self.lines = {r: [] for r in range(size)}
        self.stderr = {r: [] for r in range(size)}
        self.progress_at = {r: {} for r in range(size)}
        self.results = {}
        self.procs = {}
        self.tmp = None
        if store is None:
            store = "tcp://127.0.0.1:%d" % free_port()
        elif store == "file":
            self.tmp = tempfile.mkdtemp(prefix="cohort-comm-")
            store = "file://" + self.tmp
            flags = flags + ["--address", "127.0.0.1"]
        self.store = store
        order = start_order if start_order is not None else list(range(size))
        try:
            for i, rank in enumerate(order):
                if i > 0 and start_order is not None:
                    time.sleep(0.3)
                argv = [worker, "--rank", str(rank), "--size", str(size), "--store", store] + flags
                if per_rank and rank in per_rank:
                    argv += per_rank[rank]
                proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                self.procs[rank] = proc
                for stream, is_err in ((proc.stdout, False), (proc.stderr, True)):
                    threading.Thread(target=self._read, args=(rank, stream, is_err), daemon=True).start()
        except BaseException:
            self.close()
            raise

    def _read(self, rank, stream, is_err):
        for line in stream:
            self.events.put((rank, time.monotonic(), line.rstrip("\n"), is_err))
        self.events.put((rank, time.monotonic(), None, is_err))

    def _handle(self, event):
        rank, at, line, is_err = event
        if line is None:
            self.eof[rank] += 1
            return
        if is_err:
            self.stderr[rank].append(line)
            return
        self.lines[rank].append(line)
        if line.startswith("progress "):
            self.progress_at[rank][int(line.split()[1])] = at
        elif line.startswith("{"):
            try:
                self.results[rank] = json.loads(line)
            except ValueError:
                pass

    def pump(self, until, limit=None):
        """Handles output until `until()` holds; False when `limit` (a
        monotonic time) passes first. The watchdog deadline fails the case."""
        while not until():
            now = time.monotonic()
            if limit is not None and now >= limit:
                return False
            if now >= self.deadline:
                self.kill_all()
                raise CaseFailed("watchdog: the case ran past its %.0f s deadline; killed every worker\n%s"
                                 % (self.deadline_s, self.dump()))
            stop = self.deadline if limit is None else min(self.deadline, limit)
            try:
                self._handle(self.events.get(timeout=max(0.001, min(0.05, stop - now))))
            except queue.Empty:
                pass
        return True

    def wait_exit(self, ranks, limit=None):
        """Until every rank in `ranks` exited and its output was read."""
        ranks = list(ranks)
        return self.pump(lambda: all(self.procs[r].poll() is not None and self.eof[r] == 2 for r in ranks), limit)

    def kill_all(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def close(self):
        self.kill_all()
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def dump(self):
        parts = ["store %s" % self.store]
        for r in range(self.size):
            proc = self.procs.get(r)
            parts.append("--- rank %d (exit %s): %s" % (
                r, proc.poll() if proc else "?", proc.args if proc else ""))
            parts.extend("  out: " + l for l in self.lines[r][-20:])
            parts.extend("  err: " + l for l in self.stderr[r][-20:])
        return "\n".join(parts)


def names_rank(text, rank):
    return re.search(r"\brank %d\b" % rank, text) is not None


def check(condition, message, job):
    if not condition:
        raise CaseFailed(message + "\n" + job.dump())


# ------------------------------------------------------------------ cases

def correctness(worker, size, count, store=None):
    host_group = 2 if size > 2 else 1  # hierarchical gets several hosts
    seed = int(os.environ.get("COHORT_TEST_SEED", "7"))
    flags = ["--scenario", "correctness", "--count", str(count), "--timeout-ms", "20000",
             "--connect-timeout-ms", "20000", "--seed", str(seed), "--host-group", str(host_group)]
    print("correctness: %d ranks, C=%d, store %s, seed %d (COHORT_TEST_SEED)" % (size, count, store or "tcp", seed))
    job = Job(worker, size, flags, store=store, deadline_s=90)
    try:
        job.wait_exit(range(size))
        for r in range(size):
            res = job.results.get(r)
            check(res is not None, "rank %d printed no result" % r, job)
            check(res["ok"] and job.procs[r].returncode == 0,
                  "rank %d failed: %s" % (r, res.get("error")), job)
            check(res["checks"] > 0, "rank %d checked nothing" % r, job)
        print("  all %d ranks ok: %s checks each, %.0f ms"
              % (size, job.results[0]["checks"], max(job.results[r]["total_ms"] for r in range(size))))
    finally:
        job.close()


def kill(worker, size, victim, count=16 << 20):
    flags = ["--scenario", "loop", "--count", str(count), "--iterations", "100000",
             "--timeout-ms", str(OP_TIMEOUT_MS), "--connect-timeout-ms", "20000"]
    print("kill: %d ranks, all-reduce of %d float32 (%d MiB), timeout %d ms; SIGKILL rank %d"
          % (size, count, count * 4 >> 20, OP_TIMEOUT_MS, victim))
    job = Job(worker, size, flags, deadline_s=100)
    survivors = [r for r in range(size) if r != victim]
    try:
        job.pump(lambda: all(2 in job.progress_at[r] for r in range(size))
                 or any(p.poll() is not None for p in job.procs.values()))
        check(all(2 in job.progress_at[r] for r in range(size)), "a worker exited before 'progress 2'", job)
        # Land in the middle of an all-reduce: half an iteration after the
        # victim's last progress line.
        times = sorted(job.progress_at[victim].items())
        period = (times[-1][1] - times[0][1]) / max(1, len(times) - 1)
        last = job.progress_at[victim][max(job.progress_at[victim])]
        time.sleep(max(0.0, min(period / 2, 0.5) - (time.monotonic() - last)))
        killed_at_iteration = max(job.progress_at[victim]) + 1
        killed_mono, killed_unix = time.monotonic(), time.time()
        os.kill(job.procs[victim].pid, signal.SIGKILL)
        exited = job.wait_exit(survivors, limit=killed_mono + EXIT_BOUND_S)
        gone_s = time.monotonic() - killed_mono
        check(exited, "survivors still running %.1f s after rank %d was killed (timeout %d ms): they hang"
              % (EXIT_BOUND_S, victim, OP_TIMEOUT_MS), job)
        job.procs[victim].wait(timeout=5)
        check(job.procs[victim].returncode == -signal.SIGKILL, "the victim was not killed by SIGKILL", job)
        print("  killed rank %d during iteration %d (period %.0f ms); every survivor exited after %.0f ms"
              % (victim, killed_at_iteration, period * 1000, gone_s * 1000))
        failures = []
        for r in survivors:
            res = job.results.get(r)
            if res is None:
                failures.append("rank %d printed no result (exit %s)" % (r, job.procs[r].returncode))
                continue
            detect_ms = res["error_unix_ms"] - killed_unix * 1000 if res.get("error_unix_ms") else float("nan")
            print("  rank %d: code %d, failed_after_ms %s, %.0f ms after the kill: %s"
                  % (r, res["code"], res["failed_after_ms"], detect_ms, res["error"]))
            if res["ok"]:
                failures.append("rank %d reports ok after its peer died" % r)
            if job.procs[r].returncode != 1:
                failures.append("rank %d exited %s, not 1" % (r, job.procs[r].returncode))
            if res["code"] not in (ERRC["peer_failed"], ERRC["closed"]):
                failures.append("rank %d: code %d, expected peer_failed (13) or closed (15)" % (r, res["code"]))
            if not names_rank(res["error"], victim):
                failures.append("rank %d: the error does not name rank %d: %s" % (r, victim, res["error"]))
            if res["failed_after_ms"] is None or res["failed_after_ms"] >= DETECT_BOUND_MS:
                failures.append("rank %d: failed_after_ms %s, expected < %d"
                                % (r, res["failed_after_ms"], DETECT_BOUND_MS))
            if not detect_ms < DETECT_BOUND_MS:
                failures.append("rank %d: failed %.0f ms after the kill, expected < %d"
                                % (r, detect_ms, DETECT_BOUND_MS))
        check(not failures, "\n".join(failures), job)
    finally:
        job.close()


def skip(worker, size, mode):
    timeout_ms = 1000
    flags = ["--scenario", "skip", "--skip-mode", mode, "--count", "5000", "--timeout-ms", str(timeout_ms),
             "--connect-timeout-ms", "20000"]
    last = size - 1
    print("skip: %d ranks, rank %d %s instead of an all-reduce, timeout %d ms"
          % (size, last, "calls barrier" if mode == "barrier" else "sleeps", timeout_ms))
    job = Job(worker, size, flags, deadline_s=60)
    others = list(range(last))
    try:
        job.wait_exit(others)
        failures = []
        for r in others:
            res = job.results.get(r)
            if res is None:
                failures.append("rank %d printed no result (exit %s)" % (r, job.procs[r].returncode))
                continue
            print("  rank %d: code %d after %s ms: %s" % (r, res["code"], res["failed_after_ms"], res["error"]))
            if res["ok"]:
                failures.append("rank %d reports ok" % r)
            if res["code"] not in (ERRC["mismatch"], ERRC["timeout"]):
                failures.append("rank %d: code %d, expected mismatch (14) or timeout (6)" % (r, res["code"]))
            if not names_rank(res["error"], last):
                failures.append("rank %d: the error does not name rank %d: %s" % (r, last, res["error"]))
            if res["failed_after_ms"] is None or res["failed_after_ms"] > timeout_ms + 3000:
                failures.append("rank %d: failed after %s ms, timeout %d ms" % (r, res["failed_after_ms"], timeout_ms))
        job.wait_exit([last])
        res = job.results.get(last)
        if res is None or res["ok"]:
            failures.append("rank %d (the skipper) should fail too: %s" % (last, res))
        else:
            print("  rank %d (skipper): code %d: %s" % (last, res["code"], res["error"]))
        check(not failures, "\n".join(failures), job)
    finally:
        job.close()


def other_job(worker, size=3):
    connect_ms = 2000
    rogue = size - 1
    flags = ["--scenario", "correctness", "--count", "10", "--connect-timeout-ms", str(connect_ms)]
    print("job: %d ranks, rank %d started with job id 'other', connect timeout %d ms" % (size, rogue, connect_ms))
    # Rank 0 hosts the store, so it starts last: the others' deadlines pass
    # first and their waits end in the timeout, not in a vanished store.
    job = Job(worker, size, flags, per_rank={rogue: ["--job", "other"]},
              start_order=list(range(size - 1, -1, -1)), deadline_s=40)
    others = list(range(rogue))
    try:
        job.wait_exit(range(size))
        failures = []
        for r in others:
            res = job.results.get(r)
            if res is None:
                failures.append("rank %d printed no result (exit %s)" % (r, job.procs[r].returncode))
                continue
            print("  rank %d: code %d after %s ms: %s" % (r, res["code"], res["failed_after_ms"], res["error"]))
            if res["ok"] or res["code"] != ERRC["timeout"]:
                failures.append("rank %d: expected a timeout (6), got code %d" % (r, res["code"]))
            if not re.search(r"rank\(s\) %d of %d never registered" % (rogue, size), res["error"]):
                failures.append("rank %d: the error does not name rank %d as missing: %s" % (r, rogue, res["error"]))
            if not res["op"].startswith("connect"):
                failures.append("rank %d failed in %s, not while connecting" % (r, res["op"]))
        res = job.results.get(rogue)
        if res is None or res["ok"]:
            failures.append("rank %d (other job) should fail too: %s" % (rogue, res))
        else:
            print("  rank %d (other job): code %d: %s" % (rogue, res["code"], res["error"]))
        check(not failures, "\n".join(failures), job)
    finally:
        job.close()


def over_tcp(case):
    """The case with direct copies off, so large messages go through TCP too."""
    def run(worker):
        os.environ["COHORT_DIRECT_COPY"] = "0"
        try:
            case(worker)
        finally:
            del os.environ["COHORT_DIRECT_COPY"]
    return run


CASES = {
    "correctness_2": lambda w: correctness(w, 2, 100003),
    "correctness_3": lambda w: correctness(w, 3, 100003),
    "correctness_4": lambda w: correctness(w, 4, 65537),
    "correctness_8": lambda w: correctness(w, 8, 9001),
    "correctness_file_3": lambda w: correctness(w, 3, 20011, store="file"),
    "kill_4_rank2": lambda w: kill(w, 4, 2),
    "kill_2_rank1": lambda w: kill(w, 2, 1),
    "kill_2_rank0": lambda w: kill(w, 2, 0),
    "kill_3_rank2": lambda w: kill(w, 3, 2),
    "kill_3_rank0": lambda w: kill(w, 3, 0),
    "skip_4_barrier": lambda w: skip(w, 4, "barrier"),
    "skip_2_sleep": lambda w: skip(w, 2, "sleep"),
    "job_3": lambda w: other_job(w, 3),
    "correctness_tcp_3": over_tcp(lambda w: correctness(w, 3, 100003)),
    "kill_tcp_4_rank2": over_tcp(lambda w: kill(w, 4, 2)),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", required=True, help="path of cohort_comm_worker")
    parser.add_argument("--repeat", type=int, default=1, help="run each case this many times")
    parser.add_argument("cases", nargs="+", help="case names, or 'all': " + ", ".join(CASES))
    args = parser.parse_args()
    names = list(CASES) if args.cases == ["all"] else args.cases
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error("unknown case(s) %s; known: %s" % (", ".join(unknown), ", ".join(CASES)))
    failed = 0
    for name in names:
        for i in range(args.repeat):
            start = time.monotonic()
            try:
                CASES[name](args.worker)
                print("PASS %s (%.1f s)" % (name, time.monotonic() - start))
            except CaseFailed as e:
                failed += 1
                print("FAIL %s (%.1f s): %s" % (name, time.monotonic() - start, e))
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
