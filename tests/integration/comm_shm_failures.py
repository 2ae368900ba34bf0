"""The comm_shm.py cases about failure and exit: a rank SIGKILLed or
SIGSTOPped in the middle of an operation, mismatched sizes, SIGKILL of one
or every rank along construction or while running, and each way a rank can
leave. The survivors must fail fast with an error naming the rank, and no
case may leave a file in /dev/shm."""

import os
import re
import signal
import time

from comm_shm_job import (ERRC, PRIVATE, CaseFailed, Job, check, devshm, listing, names_rank, no_leftovers,
                          signal_name, transports_are)

OP_TIMEOUT_S = 30.0          # per-operation timeout of the kill cases
DETECT_BOUND_MS = 5000       # survivors must fail this fast after the kill
EXIT_BOUND_S = 10.0          # ... and all be gone this soon after it
MIB = 1 << 20


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


def exit_after_barrier(size=3, rounds=30, env=None):
    """Each rank os._exit()s the moment its last barrier returns, as a
    script that ends with a barrier does: that barrier returned, so every
    rank had arrived, and no other rank may fail in it. env: shm off, for
    the transports it falls back to."""
    print("exit_after_barrier: %d rounds of %d ranks that os._exit() right after a barrier over %s"
          % (rounds, size, "shm" if env is None else env))
    failed = []
    algorithm = "shm" if env is None else "auto"
    with devshm() as before:
        for i in range(rounds):
            job = Job(size, "exit", ["--exit-mode", "os_exit", "--algorithm", algorithm], env=env, deadline_s=60,
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
