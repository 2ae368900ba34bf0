#!/usr/bin/env python3
"""The shared-memory transport between separate processes: the real thing.

Starts N comm_shm_worker.py ranks that meet through a tcp:// store hosted by
rank 0 on 127.0.0.1, then judges each one's output. Cases:

  correctness_N          every collective over shm at N ranks (all-reduce for
                         every dtype x op through "shm" and "auto", sizes 0, 1,
                         7, 4097 and 1 MiB + 3 elements; broadcast, allgather,
                         reduce-scatter, async, barrier): results right and
                         bit-identical on every rank, transports "shm"
  correctness_smallslots_N  the same through 80 KiB slots
  kill_N_rankV[_OP]      SIGKILL rank V in the middle of an OP (allreduce by
                         default) over shm: every survivor fails fast, far
                         below the 30 s timeout, with PeerFailed or Closed
                         naming rank V
  stop_N_rankV[_OP]      SIGSTOP rank V instead: the others time out naming it
  mismatch_3             the last rank all-reduces one element more: an error
  kill_startup_4_rankV   SIGKILL rank V at points along construction: the
                         others fail within the connect timeout, naming it
  killall_running_4      SIGKILL every rank in the middle of all-reduces
  killall_startup_4      SIGKILL every rank at points along construction
  exit_MODE_3            every rank leaves after an all-reduce by close(), no
                         close, os._exit, an exception or SIGTERM
  exit_after_barrier_3   ranks os._exit() as their last barrier returns: no
                         other rank may fail in that barrier
  small_devshm_4         /dev/shm a 1 MiB tmpfs, shm_size 8 MiB: a clear error
  small_devshm_default_4 ... or a fallback that works; never a crash (SIGBUS)
  full_devshm_3          a 4 MiB tmpfs that a file fills to 3.5 MiB
  transports_*_3         what each peer goes through: default "shm"; with
                         COHORT_SHM_SIZE=0 "direct"; ranks in separate PID
                         namespaces (process_vm_readv denied) "shm", or "tcp"
                         with shm off, also for only the rank alone in its
                         namespace; COHORT_DIRECT_COPY=0 likewise
  differ_shm_off_3       rank 2 has shm off, the others on: all fall back
                         alike, or all fail up front; no connect timeout
  differ_shm_size_3      each rank asks another shm_size: the same
  hosts_4                ranks labelled as two hosts: shm within each,
                         "hierarchical" and "auto" right
  two_jobs_2             two 2-rank jobs at once on one host (same job id)

No case may leave a file in /dev/shm. As root the driver re-runs itself
under `unshare --mount` and mounts a fresh tmpfs on /dev/shm for each case,
so that it lists /dev/shm before and after with no other test in the way;
the cases that need that, or unshare --pid, fail (not skip) without root.
Otherwise it checks the files the ranks mapped are gone. A watchdog kills
every child and fails the case when it overruns, so the test never hangs.

    comm_shm.py CASE [CASE...]      (or 'all'; COHORT_TEST_SEED sets the seed)
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

from comm_shm_job import (PRIVATE, SEED, CaseFailed, Job, check, devshm, listing, names_rank,
                          no_leftovers, signal_name)

ERRC = {"timeout": 6, "peer_failed": 13, "closed": 15}
OP_TIMEOUT_S = 30.0          # per-operation timeout of the kill cases
DETECT_BOUND_MS = 5000       # survivors must fail this fast after the kill
EXIT_BOUND_S = 10.0          # ... and all be gone this soon after it
MIB = 1 << 20


# ------------------------------------------------------------------ checks

def all_ok(job):
    failures = []
    for r in range(job.size):
        res, code = job.results.get(r), job.procs[r].returncode
        if code is not None and code < 0:
            failures.append("rank %d died of %s" % (r, signal_name(code)))
        elif res is None:
            failures.append("rank %d printed no result (exit %s)" % (r, code))
        elif not res["ok"] or code != 0:
            failures.append("rank %d failed (exit %s) in %s: %s %s%s" % (
                r, code, res.get("op"), res.get("error_type", ""), res.get("error", ""),
                "".join("\n    " + f for f in res.get("failures", []))))
    check(not failures, "\n".join(failures), job)


def transports_are(job, expect, results=None, hosts=None):
    """Every rank lists "self" for itself and `expect` for every peer (or
    one of expect(rank, peer)), and describe() agrees and says whether shm
    is in use. results: the ranks' result lines, or their ready lines.
    hosts: the host labels the ranks were given (default: one host)."""
    failures = []
    results = job.results if results is None else results
    for r in range(job.size):
        res = results.get(r)
        if res is None:
            failures.append("rank %d told nothing about its transports" % r)
            continue
        want = [("self",) if p == r else expect(r, p) if callable(expect) else (expect,)
                for p in range(job.size)]
        d = res.get("describe") or {}
        got = res.get("transports") or []
        if len(got) != job.size or any(t not in w for t, w in zip(got, want)):
            failures.append("rank %d: transports %s, expected %s" % (r, got, " ".join("/".join(w) for w in want)))
        missing = [k for k in ("rank", "size", "hosts", "transports", "shm", "shm_unavailable") if k not in d]
        if missing:
            failures.append("rank %d: describe() lacks %s: %s" % (r, ", ".join(missing), d))
            continue
        if d["rank"] != r or d["size"] != job.size or d["transports"] != res.get("transports"):
            failures.append("rank %d: describe() disagrees: %s" % (r, d))
        if hosts is not None and d["hosts"] != hosts:
            failures.append("rank %d: hosts %s, expected %s" % (r, d["hosts"], hosts))
        elif hosts is None and (len(d["hosts"]) != job.size or len(set(d["hosts"])) != 1):
            failures.append("rank %d: hosts %s, expected one host for all %d" % (r, d["hosts"], job.size))
        if expect == "shm":
            if not (isinstance(d["shm"], dict) and "bytes" in d["shm"] and "ranks" in d["shm"]):
                failures.append("rank %d: describe()['shm'] is %r, expected a dict with bytes and ranks"
                                % (r, d["shm"]))
            if d["shm_unavailable"] is not None:
                failures.append("rank %d: shm in use but shm_unavailable is %r" % (r, d["shm_unavailable"]))
        elif not callable(expect) and d["shm"] is not None:
            failures.append("rank %d: transports %s but describe()['shm'] is %r" % (r, expect, d["shm"]))
    check(not failures, "\n".join(failures), job)


def identical(job):
    """Each result's bytes are the same on every rank."""
    keys = [set(job.results[r].get("digests", {})) for r in range(job.size)]
    failures = ["rank %d ran other operations than rank 0: %s" % (r, sorted(keys[r] ^ keys[0])[:5])
                for r in range(1, job.size) if keys[r] != keys[0]]
    for key in sorted(keys[0]):
        values = [job.results[r]["digests"].get(key) for r in range(job.size)]
        if len(set(values)) != 1:
            failures.append("%s: not bit-identical across ranks (sha256 %s)" % (key, values))
    check(not failures, "\n".join(failures[:20]), job)
    return len(keys[0])


def barriers_hold(job):
    """Nobody left barrier k before the last rank entered it."""
    rounds = len(job.results[0]["barriers"])
    for k in range(rounds):
        entered = max(job.results[r]["barriers"][k][0] for r in range(job.size))
        left = min(job.results[r]["barriers"][k][1] for r in range(job.size))
        check(left >= entered, "barrier %d: a rank left %.1f ms before the last one entered"
              % (k, (entered - left) * 1000), job)


def run_correct(size, level, expect, env=None, wrap=(), flags=(), deadline_s=240, name="job", hosts=None):
    """A correctness job that must pass on every rank over `expect`."""
    flags = ["--level", level] + list(flags) + (["--hosts", ",".join(hosts)] if hosts else [])
    job = Job(size, "correctness", flags, env=env, wrap=wrap, deadline_s=deadline_s, name=name)
    try:
        job.wait_exit()
        all_ok(job)
        transports_are(job, expect, hosts=hosts)
        shared = identical(job)
        barriers_hold(job)
        if expect == "shm":
            chosen = {r: job.results[r]["choose"] for r in range(size)}
            check(all(set(c.values()) == {"shm"} for c in chosen.values()),
                  "all ranks share a host, but \"auto\" picks %s (by bytes), not shm" % chosen[0], job)
        res = job.results[0]
        print("  %s: %d ranks ok over %s; %d checks each, %d results bit-identical across ranks; "
              "all-reduces %.1f s, all %.1f s; shm %s"
              % (name, size, expect if isinstance(expect, str) else "mixed transports", res["checks"], shared, res["allreduce_s"],
                 max(job.results[r]["total_ms"] for r in range(size)) / 1000, res["describe"]["shm"]))
        return job
    finally:
        job.close()


# ------------------------------------------------------------------- cases

def small_slots(size):
    """An odd shm_size whose slots come out at 80 KiB: a little over the
    64 KiB minimum, under the 128 KiB chunk of the pipelined all-reduce and
    no power of two (docs/collectives.md: a header page and 128 bytes a
    rank, then three slots a rank, rounded down to pages)."""
    return 3 * size * (80 * 1024 + 3001) + 2 * 4096 + 128 * size


def correctness(size, shm_size=None, level="full"):
    """With shm_size, a segment with small slots (small_slots), so most
    messages cross many slot boundaries."""
    print("correctness: %d ranks, every collective over shm, shm_size %s, seed %d"
          % (size, shm_size or "default", SEED))
    flags = ["--shm-size", str(shm_size)] if shm_size else []
    with devshm() as before:
        job = run_correct(size, level, "shm", flags=flags, deadline_s=240)
        if shm_size:
            slot = job.results[0]["describe"]["shm"].get("slot_bytes", 0)
            check(0 < slot < 128 << 10, "slots of %d bytes: not the small ones this case is for" % slot, job)
        no_leftovers(job, before)


def kill(size, victim, op="allreduce", stop=False):
    """SIGKILL (or, with stop, SIGSTOP: alive but silent) rank `victim` in
    the middle of an op: the survivors fail with an error naming it, fast
    after a death, within the timeout after a stop."""
    count = MIB
    timeout_s = 3.0 if stop else OP_TIMEOUT_S
    bound_ms = timeout_s * 1000 + 3000 if stop else DETECT_BOUND_MS
    codes = (ERRC["timeout"], ERRC["peer_failed"]) if stop else (ERRC["peer_failed"], ERRC["closed"])
    how = signal.SIGSTOP if stop else signal.SIGKILL
    flags = ["--op", op, "--count", str(count), "--timeout", str(timeout_s), "--algorithm", "shm"]
    print("%s: %d ranks, %s of %d float32 over shm, timeout %.0f s; %s rank %d"
          % ("stop" if stop else "kill", size, op, count, timeout_s, how.name, victim))
    with devshm() as before:
        job = Job(size, "loop", flags, deadline_s=90)
        survivors = [r for r in range(size) if r != victim]
        try:
            job.pump(lambda: all(job.progress(r) >= 3 for r in range(size))
                     or any(p.poll() is not None for p in job.procs.values()))
            check(all(job.progress(r) >= 3 for r in range(size)), "a rank exited before 'progress 3'", job)
            transports_are(job, "shm", job.ready)
            # Land in the middle of an operation: half a period after the
            # victim's last progress line.
            times = sorted(t for m, t in job.marks[victim].items() if m.startswith("progress "))
            period = (times[-1] - times[0]) / max(1, len(times) - 1)
            time.sleep(max(0.0, min(period / 2, 0.5) - (time.monotonic() - times[-1])))
            killed_mono, killed_unix = time.monotonic(), time.time()
            os.kill(job.procs[victim].pid, how)
            exit_bound_s = bound_ms / 1000 + EXIT_BOUND_S
            exited = job.wait_exit(survivors, limit=killed_mono + exit_bound_s)
            gone_s = time.monotonic() - killed_mono
            check(exited, "survivors still running %.1f s after rank %d got %s (timeout %.0f s): they hang"
                  % (exit_bound_s, victim, how.name, timeout_s), job)
            if stop:
                job.procs[victim].kill()
            job.procs[victim].wait(timeout=10)
            print("  %s rank %d after %d %ss (period %.1f ms); every survivor exited after %.0f ms"
                  % (how.name, victim, job.progress(victim), op, period * 1000, gone_s * 1000))
            failures = []
            for r in survivors:
                res = job.results.get(r)
                code = job.procs[r].returncode
                if code < 0:
                    failures.append("rank %d died of %s" % (r, signal_name(code)))
                    continue
                if res is None:
                    failures.append("rank %d printed no result (exit %s)" % (r, code))
                    continue
                detect_ms = res["error_unix_ms"] - killed_unix * 1000 if res.get("error_unix_ms") else float("nan")
                print("  rank %d: %s (code %s) %.0f ms after the %s: %s"
                      % (r, res.get("error_type"), res.get("code"), detect_ms, how.name, res.get("error")))
                if res["ok"]:
                    failures.append("rank %d reports ok after its peer got %s" % (r, how.name))
                    continue
                if res["code"] not in codes:
                    failures.append("rank %d: %s (code %s), expected one of codes %s"
                                    % (r, res.get("error_type"), res["code"], codes))
                # A stopped rank looks alive: a rank stuck behind another
                # that waits for it may name that one, but someone names it.
                if not stop and not names_rank(res["error"], victim):
                    failures.append("rank %d: the error does not name rank %d: %s" % (r, victim, res["error"]))
                if not detect_ms < bound_ms:
                    failures.append("rank %d: failed %.0f ms after the %s, expected < %d"
                                    % (r, detect_ms, how.name, bound_ms))
            if stop and not any(names_rank(job.results[r].get("error", ""), victim)
                                for r in survivors if r in job.results):
                failures.append("no survivor's error names rank %d, the stopped one" % victim)
            check(not failures, "\n".join(failures), job)
            no_leftovers(job, before)
        finally:
            job.close()


def mismatch(size=3):
    """Rank size-1 all-reduces one element more than the others: over
    shared memory that must be an error, never a read past a buffer."""
    last, timeout_s = size - 1, 3.0
    print("mismatch: %d ranks all-reduce 4097 float32 over shm, rank %d 4098; timeout %.0f s"
          % (size, last, timeout_s))
    with devshm() as before:
        job = Job(size, "mismatch", ["--count", "4097", "--timeout", str(timeout_s), "--algorithm", "shm"],
                  deadline_s=60)
        try:
            job.wait_exit()
            failures = []
            for r in range(size):
                res, code = job.results.get(r), job.procs[r].returncode
                if code < 0 or res is None:
                    failures.append("rank %d: exit %s, result %s" % (r, signal_name(code) if code < 0 else code, res))
                    continue
                print("  rank %d: %s (code %s) after %s ms: %s" % (
                    r, res.get("error_type"), res.get("code"), res.get("failed_after_ms"), res.get("error")))
                if res["ok"]:
                    failures.append("rank %d reports ok" % r)
                elif res["code"] not in (14, ERRC["timeout"], ERRC["peer_failed"], ERRC["closed"]):
                    failures.append("rank %d: code %s, expected Mismatch (14) or Timeout (6)" % (r, res["code"]))
                elif r != last and not names_rank(res["error"], last):
                    failures.append("rank %d: the error does not name rank %d" % (r, last))
                elif res["failed_after_ms"] > timeout_s * 1000 + 3000:
                    failures.append("rank %d: failed after %.0f ms, timeout %.0f s"
                                    % (r, res["failed_after_ms"], timeout_s))
            check(not failures, "\n".join(failures), job)
            no_leftovers(job, before)
        finally:
            job.close()


def killall_running(size=4):
    print("killall_running: %d ranks in all-reduces over shm; SIGKILL every rank at once" % size)
    with devshm() as before:
        job = Job(size, "loop", ["--count", str(MIB // 4), "--algorithm", "shm"], deadline_s=80)
        try:
            job.pump(lambda: all(job.progress(r) >= 3 for r in range(size))
                     or any(p.poll() is not None for p in job.procs.values()))
            check(all(job.progress(r) >= 3 for r in range(size)), "a rank exited before 'progress 3'", job)
            for proc in job.procs.values():
                os.kill(proc.pid, signal.SIGKILL)
            check(job.wait_exit(limit=time.monotonic() + EXIT_BOUND_S), "SIGKILLed ranks still running", job)
            print("  killed all %d ranks after %s all-reduces" % (size, [job.progress(r) for r in range(size)]))
            no_leftovers(job, before)
        finally:
            job.close()


def reach(job, delay, before):
    """Waits for one moment of a construction sweep: `delay` s after every
    rank began constructing, "ready" (all constructed) or "segment" (a file
    appeared in /dev/shm: the segment is made but not yet mapped by all)."""
    size = job.size
    mark = "ready" if delay == "ready" else "constructing"
    job.pump(lambda: all(mark in job.marks[r] for r in range(size))
             or any(p.poll() is not None for p in job.procs.values()))
    check(all(mark in job.marks[r] for r in range(size)), "a rank exited before '%s'" % mark, job)
    if delay == "segment":
        job.pump(lambda: set(listing()) != set(before) or all("ready" in job.marks[r] for r in range(size))
                 or any(p.poll() is not None for p in job.procs.values()), poll_s=0.0002)
    elif delay != "ready":
        time.sleep(delay)


def killall_startup(size=4):
    """Construction is when segments are created and named: killing every
    rank at any point of it must leave nothing behind."""
    # When the segment appears, then every 3 ms through the first 60 (where
    # it is made and joined on an idle machine), then later for a loaded one.
    delays = ("segment",) * 3 + tuple(round(i * 0.003, 3) for i in range(21)) + (0.1, 0.2, 0.4, "ready")
    print("killall_startup: %d ranks, SIGKILL every rank when the segment appears or %s s after all began constructing"
          % (size, ", ".join(str(d) for d in delays)))
    problems = []
    for delay in delays:
        with devshm() as before:
            job = Job(size, "loop", ["--count", "4097", "--algorithm", "auto"], deadline_s=60,
                      name="round %s" % delay)
            try:
                reach(job, delay, before)
                for proc in job.procs.values():
                    os.kill(proc.pid, signal.SIGKILL)
                check(job.wait_exit(limit=time.monotonic() + EXIT_BOUND_S), "SIGKILLed ranks still running", job)
                ready = sum("ready" in job.marks[r] for r in range(size))
                new = sorted(set(listing()) - set(before)) if PRIVATE else []
                print("  after %s s: %d of %d ranks had constructed; left in /dev/shm: %s"
                      % (delay, ready, size, new or "nothing"))
                if new:
                    problems.append("killed %s s into construction (%d of %d ranks constructed): left %s"
                                    % (delay, ready, size, ", ".join(new)))
            finally:
                job.close()
    if problems:
        raise CaseFailed("\n".join(problems))


def kill_startup(size, victim):
    """SIGKILL one rank at points along construction (where the segment is
    created, announced and mapped): the others fail within the connect
    timeout, one at least naming it, and nothing is left in /dev/shm."""
    connect_s = 5.0
    delays = ("segment",) * 3 + tuple(round(i * 0.008, 3) for i in range(8)) + (0.1, 0.2, "ready")
    print("kill_startup: %d ranks, SIGKILL rank %d %s s after all began constructing; connect timeout %.0f s"
          % (size, victim, ", ".join(str(d) for d in delays), connect_s))
    problems = []
    survivors = [r for r in range(size) if r != victim]
    for delay in delays:
        with devshm() as before:
            job = Job(size, "loop", ["--count", "4097", "--algorithm", "auto", "--timeout", "5",
                                     "--connect-timeout", str(connect_s)], deadline_s=60, name="round %s" % delay)
            try:
                reach(job, delay, before)
                os.kill(job.procs[victim].pid, signal.SIGKILL)
                check(job.wait_exit(survivors, limit=time.monotonic() + connect_s + EXIT_BOUND_S),
                      "survivors still running %.0f s after rank %d was killed (connect timeout %.0f s)"
                      % (connect_s + EXIT_BOUND_S, victim, connect_s), job)
                job.wait_exit()
                ready = sum("ready" in job.marks[r] for r in range(size))
                errors = {r: job.results.get(r, {}) for r in survivors}
                crashed = [r for r in survivors if job.procs[r].returncode < 0]
                # Rank 0 hosts the store: losing it is said as such. A rank
                # stuck behind another that waits for the dead one may name
                # that one, but some rank must name the dead one.
                named = [r for r, res in errors.items()
                         if re.search(r"\branks?(\(s\))? (\d+, )*%d\b" % victim, res.get("error", ""))]
                store = [r for r, res in errors.items() if re.search(r"\bstore tcp://", res.get("error", ""))]
                unnamed = [] if named or len(store) == len(errors) else sorted(errors)
                new = sorted(set(listing()) - set(before)) if PRIVATE else []
                print("  after %s s: %d of %d constructed; left: %s; errors: %s" % (
                    delay, ready, size, new or "nothing", "; ".join(
                        "rank %d in %s: %s %s" % (r, res.get("op"), res.get("error_type"), res.get("error", "")[:160])
                        for r, res in errors.items())))
                what = "killed %s s into construction (%d of %d ranks constructed)" % (delay, ready, size)
                if crashed:
                    problems.append("%s: ranks %s died of a signal" % (what, crashed))
                if unnamed:
                    problems.append("%s: no rank's error names rank %d: %s" % (
                        what, victim, [errors[r].get("error") for r in unnamed]))
                if new:
                    problems.append("%s: left %s" % (what, ", ".join(new)))
            finally:
                job.close()
    if problems:
        raise CaseFailed("\n".join(problems))


EXIT_CODES = {"close": 0, "noclose": 0, "os_exit": 3, "exception": 1, "sigterm": -signal.SIGTERM}


def exit_mode(mode, size=3):
    """Every rank leaves by `mode` once all are through a last barrier (the
    driver says go), and nothing is left in /dev/shm."""
    print("exit: %d ranks leave after an all-reduce over shm by %s" % (size, mode))
    with devshm() as before:
        job = Job(size, "exit", ["--exit-mode", mode, "--algorithm", "shm", "--wait-go"], deadline_s=60)
        try:
            job.pump(lambda: len(job.results) == size or any(p.poll() is not None for p in job.procs.values()))
            check(all(r in job.results and job.results[r]["ok"] for r in range(size)),
                  "a rank failed before it could leave", job)
            job.release()
            job.wait_exit()
            codes = [job.procs[r].returncode for r in range(size)]
            check(codes == [EXIT_CODES[mode]] * size, "exit statuses %s, expected %d each"
                  % (codes, EXIT_CODES[mode]), job)
            transports_are(job, "shm")
            no_leftovers(job, before)
        finally:
            job.close()


def exit_after_barrier(size=3, rounds=30):
    """Each rank os._exit()s the moment its last barrier returns, as a
    script that ends with a barrier does: that barrier returned, so every
    rank had arrived, and no other rank may fail in it."""
    print("exit_after_barrier: %d rounds of %d ranks that os._exit() right after a barrier over shm"
          % (rounds, size))
    failed = []
    with devshm() as before:
        for i in range(rounds):
            job = Job(size, "exit", ["--exit-mode", "os_exit", "--algorithm", "shm"], deadline_s=60,
                      name="round %d" % i)
            try:
                job.wait_exit()
                bad = {r: job.results.get(r, {}).get("error", "no result") for r in range(size)
                       if not job.results.get(r, {}).get("ok")}
                if bad:
                    failed.append("round %d: %s" % (i, "; ".join("rank %d: %s" % kv for kv in bad.items())))
                no_leftovers(job, before, " after round %d" % i)
            finally:
                job.close()
    print("  %d of %d rounds had a rank fail in a barrier that a peer had left" % (len(failed), rounds))
    if failed:
        raise CaseFailed("\n".join(failed))


def small_devshm(size, tmpfs, filler=0, shm_size=None):
    """A /dev/shm too small for the segment: every rank either fails with an
    error that says so, or falls back (shm_unavailable says why) and works;
    no rank dies of a signal (SIGBUS when a sparse file runs out of pages)."""
    flags = ["--level", "quick"] + (["--shm-size", str(shm_size)] if shm_size is not None else [])
    print("small /dev/shm: %d ranks, a %s tmpfs%s, shm_size %s"
          % (size, tmpfs, " holding a %d-byte file" % filler if filler else "",
             shm_size if shm_size is not None else "default"))
    with devshm(tmpfs, filler) as before:
        job = Job(size, "correctness", flags, deadline_s=90)
        try:
            job.wait_exit()
            crashed = [(r, signal_name(job.procs[r].returncode)) for r in range(size)
                       if job.procs[r].returncode < 0]
            check(not crashed, "ranks crashed: %s" % crashed, job)
            check(all(r in job.results for r in range(size)), "a rank printed no result", job)
            failed = [r for r in range(size) if not job.results[r]["ok"]]
            for r in range(size):
                res = job.results[r]
                print("  rank %d: %s" % (r, "ok, transports %s, shm %s, shm_unavailable %r" % (
                    res["transports"], res["describe"]["shm"], res["describe"]["shm_unavailable"])
                    if res["ok"] else "%s in %s: %s" % (res.get("error_type"), res.get("op"), res.get("error"))))
            if failed:
                check(len(failed) == size, "ranks %s failed but %s went on" % (
                    failed, [r for r in range(size) if r not in failed]), job)
                clear = [r for r in failed if job.results[r].get("op") == "construct"
                         and re.search(r"/dev/shm|shared.memory|\bshm", job.results[r].get("error", ""), re.I)]
                check(clear, "no rank's error says that /dev/shm is too small", job)
                check(all(job.results[r].get("op") == "construct" for r in failed),
                      "ranks failed after construction, not with a clear error up front", job)
            else:
                all_ok(job)
                identical(job)
                uses_shm = {r: job.results[r]["transports"].count("shm") > 0 for r in range(size)}
                if any(uses_shm.values()):
                    # Shrunk to fit is a fallback too, if the segment truly fits.
                    transports_are(job, "shm")
                    nbytes = job.results[0]["describe"]["shm"]["bytes"]
                    print("  shm kept, %d bytes in a %s tmpfs" % (nbytes, tmpfs))
                else:
                    reasons = [job.results[r]["describe"]["shm_unavailable"] for r in range(size)]
                    check(all(isinstance(x, str) and x for x in reasons),
                          "shm not used but shm_unavailable does not say why: %s" % reasons, job)
                    transports_are(job, "direct")  # the next best, process_vm_readv, is allowed
            no_leftovers(job, before)
        finally:
            job.close()


PID_NAMESPACE = ("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "--")


def transports(expect, env=None, pidns=False, size=3):
    """Which transport each pair of ranks picks when process_vm_readv and
    shm are on or off, and that collectives work over it."""
    print("transports: %d ranks%s, %s: expect %r" % (
        size, " each in its own PID namespace" if pidns else "", env or "default environment", expect))
    with devshm() as before:
        job = run_correct(size, "quick", expect, env=env, wrap=PID_NAMESPACE if pidns else (), deadline_s=90)
        for r in range(size):
            d = job.results[r]["describe"]
            if d.get("shm_unavailable"):
                print("  rank %d: shm_unavailable %r" % (r, d["shm_unavailable"]))
        no_leftovers(job, before)


def transports_mixed():
    """Ranks 0 and 1 share a PID namespace, rank 2 has its own, shm off:
    0 and 1 copy directly; rank 2 sees neither (though its parent namespace
    sees it), so both sides of each pair with it take TCP."""
    def expect(r, p):
        return ("direct",) if {r, p} == {0, 1} else ("tcp",)

    print("transports: 3 ranks, rank 2 in its own PID namespace, COHORT_SHM_SIZE=0")
    with devshm() as before:
        job = run_correct(3, "quick", expect, env=NOSHM, wrap=lambda r: PID_NAMESPACE if r == 2 else (),
                          deadline_s=90)
        print("  transports: %s" % [job.results[r]["transports"] for r in range(3)])
        no_leftovers(job, before)


def host_labels():
    """4 ranks labelled as two hosts (a, a, b, b): shm within each label,
    something else across; "hierarchical" and "auto" right on every rank."""
    hosts = ["a", "a", "b", "b"]

    def expect(r, p):
        return ("shm",) if hosts[r] == hosts[p] else ("direct", "tcp")

    print("host labels: 4 ranks as hosts %s" % hosts)
    with devshm() as before:
        job = run_correct(4, "full", expect, hosts=hosts, deadline_s=180)
        mates = {r: job.results[r]["describe"]["shm"] for r in range(4)}
        print("  transports: %s; shm %s" % ([job.results[r]["transports"] for r in range(4)], mates))
        check(all(m is not None and m["ranks"] == [p for p in range(4) if hosts[p] == hosts[r]]
                  for r, m in mates.items()), "describe()['shm']['ranks'] is not each rank's label-mates", job)
        no_leftovers(job, before)


def settings_differ(name, size=3):
    """The ranks of a host disagree on shared memory: rank 2 has it off
    (COHORT_SHM_SIZE=0 in its environment), or each asks another shm_size.
    Either every rank falls back alike and works, or every rank fails up
    front with an error about shm; nobody waits out the connect timeout."""
    connect_s = 20.0
    if name == "one_off":
        env, flags = (lambda r: NOSHM if r == size - 1 else {}), (lambda r: [])
        what = "rank %d with COHORT_SHM_SIZE=0, the others shm on" % (size - 1)
    else:
        env, flags = None, (lambda r: ["--shm-size", str((1 << 20) << r)])
        what = "shm_size 1, 2 and 4 MiB"
    print("settings differ: %d ranks, %s; connect timeout %.0f s" % (size, what, connect_s))
    with devshm() as before:
        job = Job(size, "correctness", lambda r: ["--level", "quick", "--connect-timeout", str(connect_s)] + flags(r),
                  env=env, deadline_s=100)
        try:
            job.wait_exit()
            results = [job.results.get(r, {}) for r in range(size)]
            for r, res in enumerate(results):
                print("  rank %d: %s" % (r, "ok, transports %s, shm_unavailable %r" % (
                    res["transports"], res["describe"]["shm_unavailable"]) if res.get("ok") else
                    "%s in %s after %.1f s: %s" % (res.get("error_type"), res.get("op"),
                                                   res.get("total_ms", 0) / 1000, res.get("error"))))
            crashed = [r for r in range(size) if job.procs[r].returncode < 0]
            check(not crashed, "ranks %s died of a signal" % crashed, job)
            waited = [r for r, res in enumerate(results) if res.get("code") == ERRC["timeout"]]
            check(not waited, "ranks %s waited out the %.0f s connect timeout instead of seeing that the "
                  "ranks disagree on shared memory" % (waited, connect_s), job)
            if all(res.get("ok") for res in results):
                table = [res["transports"] for res in results]
                check(all(table[r][p] == table[p][r] for r in range(size) for p in range(size)),
                      "the ranks disagree on the transport between them: %s" % table, job)
                identical(job)
            else:
                check(all(not res.get("ok") and res.get("op") == "construct"
                          and re.search(r"shm|shared.memory", res.get("error", ""), re.I) for res in results),
                      "some ranks failed, but not all at construction with an error about shared memory", job)
            no_leftovers(job, before)
        finally:
            job.close()


def two_jobs(size=2):
    """Two jobs with the default job id on one host must not share segments."""
    print("two_jobs: two %d-rank jobs at once, both with job id 'cohort'" % size)
    with devshm() as before:
        results = {}

        def one(name):
            try:
                results[name] = run_correct(size, "quick", "shm", deadline_s=180, name=name)
            except BaseException as e:  # reported below
                results[name] = e

        threads = [threading.Thread(target=one, args=(n,)) for n in ("job A", "job B")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(200)
        problems = ["%s: %s" % (n, r) for n, r in results.items() if isinstance(r, BaseException)]
        if len(results) != 2 or problems:
            raise CaseFailed("\n".join(problems) or "a job did not finish")
        for job in results.values():
            no_leftovers(job, before)


NOSHM = {"COHORT_SHM_SIZE": "0"}
NODIRECT = {"COHORT_DIRECT_COPY": "0"}

# name -> (function, needs a private mount namespace or PID namespaces: root)
CASES = {
    "correctness_2": (lambda: correctness(2), False),
    "correctness_3": (lambda: correctness(3), False),
    "correctness_4": (lambda: correctness(4), False),
    "correctness_8": (lambda: correctness(8), False),
    "correctness_smallslots_3": (lambda: correctness(3, shm_size=small_slots(3)), False),
    "correctness_smallslots_8": (lambda: correctness(8, shm_size=small_slots(8), level="quick"), False),
    "kill_2_rank1": (lambda: kill(2, 1), False),
    "kill_2_rank0": (lambda: kill(2, 0), False),
    "kill_3_rank0": (lambda: kill(3, 0), False),
    "kill_4_rank2": (lambda: kill(4, 2), False),
    "kill_8_rank5": (lambda: kill(8, 5), False),
    "kill_4_rank1_barrier": (lambda: kill(4, 1, "barrier"), False),
    "kill_3_rank2_allgather": (lambda: kill(3, 2, "allgather"), False),
    "kill_3_rank0_broadcast": (lambda: kill(3, 0, "broadcast"), False),
    "stop_3_rank1": (lambda: kill(3, 1, stop=True), False),
    "stop_4_rank0_barrier": (lambda: kill(4, 0, "barrier", stop=True), False),
    "mismatch_3": (mismatch, False),
    "kill_startup_4_rank0": (lambda: kill_startup(4, 0), True),
    "kill_startup_4_rank2": (lambda: kill_startup(4, 2), True),
    "killall_running_4": (killall_running, True),
    "killall_startup_4": (killall_startup, True),
    "exit_close_3": (lambda: exit_mode("close"), True),
    "exit_noclose_3": (lambda: exit_mode("noclose"), True),
    "exit_os_exit_3": (lambda: exit_mode("os_exit"), True),
    "exit_exception_3": (lambda: exit_mode("exception"), True),
    "exit_sigterm_3": (lambda: exit_mode("sigterm"), True),
    "exit_after_barrier_3": (exit_after_barrier, True),
    "small_devshm_4": (lambda: small_devshm(4, "1m", shm_size=8 * MIB), True),
    "small_devshm_default_4": (lambda: small_devshm(4, "1m"), True),
    "full_devshm_3": (lambda: small_devshm(3, "4m", filler=7 * MIB // 2, shm_size=2 * MIB), True),
    "transports_default_3": (lambda: transports("shm"), False),
    "transports_noshm_3": (lambda: transports("direct", NOSHM), False),
    "transports_nodirect_3": (lambda: transports("shm", NODIRECT), False),
    "transports_nodirect_noshm_3": (lambda: transports("tcp", dict(NOSHM, **NODIRECT)), False),
    "transports_pidns_3": (lambda: transports("shm", pidns=True), True),
    "transports_pidns_noshm_3": (lambda: transports("tcp", NOSHM, pidns=True), True),
    "transports_pidns_mixed_noshm_3": (transports_mixed, True),
    "hosts_4": (host_labels, False),
    "differ_shm_off_3": (lambda: settings_differ("one_off"), False),
    "differ_shm_size_3": (lambda: settings_differ("sizes"), False),
    "two_jobs_2": (two_jobs, False),
}


def enter_private_namespace(names):
    """As root, re-runs this script in a mount namespace of its own (the
    same process: exec), where each case mounts its own /dev/shm."""
    if PRIVATE:
        return
    needs_root = [n for n in names if CASES[n][1]]
    if os.geteuid() != 0 or not shutil.which("unshare"):
        if needs_root:
            sys.exit("FAIL %s: these cases need root and unshare(1) (util-linux) to mount a private "
                     "/dev/shm and start ranks in PID namespaces; run ctest as root (CI does)"
                     % ", ".join(needs_root))
        print("not root: /dev/shm is shared with other tests, so only the files the ranks mapped are checked")
        return
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True, text=True, timeout=20)
    if probe.returncode != 0:
        if needs_root:
            sys.exit("FAIL %s: unshare --mount failed: %s" % (", ".join(needs_root), probe.stderr.strip()))
        print("unshare --mount failed (%s): /dev/shm is shared with other tests" % probe.stderr.strip())
        return
    sys.stdout.flush()
    env = dict(os.environ, COHORT_SHM_TEST_PRIVATE="1")
    os.execvpe("unshare", ["unshare", "--mount", "--propagation", "private", "--", sys.executable,
                           os.path.abspath(__file__)] + sys.argv[1:], env)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1, help="run each case this many times")
    parser.add_argument("cases", nargs="+", help="case names, or 'all': " + ", ".join(CASES))
    args = parser.parse_args()
    names = list(CASES) if args.cases == ["all"] else args.cases
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error("unknown case(s) %s; known: %s" % (", ".join(unknown), ", ".join(CASES)))
    try:
        import numpy  # noqa: F401  (the ranks' references)
    except ImportError:
        sys.exit("FAIL: %s has no numpy, which the ranks compute their references with; configure with "
                 "-DPython3_EXECUTABLE=/usr/bin/python3 (as scripts/test.sh does) or install numpy"
                 % sys.executable)
    enter_private_namespace(names)
    failed = 0
    for name in names:
        for _ in range(args.repeat):
            start = time.monotonic()
            try:
                CASES[name][0]()
                print("PASS %s (%.1f s)" % (name, time.monotonic() - start))
            except CaseFailed as e:
                failed += 1
                print("FAIL %s (%.1f s): %s" % (name, time.monotonic() - start, e))
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
