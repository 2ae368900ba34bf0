"""One case of an integration driver, under a deadline.

The drivers (train_demo.py, torchrun.py, coordinator_*.py) each start
processes for a case; if a case overruns, a watchdog kills them so that the
case fails with a reason instead of hanging until ctest's TIMEOUT, which
would report nothing. Whatever happens, the case's processes are reaped
and its working directory removed.
"""

import shutil
import sys
import tempfile
import threading
import time


def run_case(name, body, *, prefix, deadline_s, kill_all, clean_up=None, expected=(AssertionError,), keep=None):
    """Runs body(workdir) and prints '<name>: passed in S s' or
    '<name>: FAILED: why'; returns True when it passed. kill_all() kills the
    case's processes (the watchdog calls it from its own thread);
    clean_up() reaps them afterwards (default kill_all). An exception of a
    type in `expected` is a failure the case described; any other is a
    crash of the test, reported by its repr. With `keep` (a directory that
    does not exist yet), a failed case's working directory is copied there
    first (its logs, events and data), for a post-mortem."""
    workdir = tempfile.mkdtemp(prefix=prefix)
    timed_out = threading.Event()

    def watchdog():
        timed_out.set()
        kill_all()

    timer = threading.Timer(deadline_s, watchdog)
    timer.start()
    started = time.monotonic()
    passed = False
    try:
        body(workdir)
        print(f"{name}: passed in {time.monotonic() - started:.1f} s", flush=True)
        passed = True
        return True
    except expected as e:
        why = f"watchdog fired after {deadline_s} s; " if timed_out.is_set() else ""
        print(f"{name}: FAILED: {why}{e}", file=sys.stderr, flush=True)
        return False
    except Exception as e:  # noqa: BLE001 - a crash of the test is a failure too
        why = f"watchdog fired after {deadline_s} s" if timed_out.is_set() else repr(e)
        print(f"{name}: FAILED: {why}", file=sys.stderr, flush=True)
        return False
    finally:
        timer.cancel()
        (clean_up or kill_all)()
        if keep and not passed:
            try:
                shutil.copytree(workdir, keep, symlinks=True)
                print(f"{name}: its working directory is kept in {keep}", file=sys.stderr, flush=True)
            except OSError as e:
                print(f"{name}: cannot keep its working directory in {keep}: {e}", file=sys.stderr, flush=True)
        shutil.rmtree(workdir, ignore_errors=True)


def kill_live(procs):
    """SIGKILLs every process of `procs` still running (a watchdog's kill_all)."""
    for p in list(procs):
        if p.poll() is None:
            p.kill()


def reap(procs):
    """Kills what still runs of `procs`, waits for all of them and empties the list."""
    kill_live(procs)
    for p in procs:
        p.wait()
    procs.clear()
