#!/usr/bin/env python3
"""What is left when cohort-run dies by SIGKILL, which no handler can see.
Cases:

  sigkill      cohort-run --standalone --port P with 2 workers (sleep):
               each worker holds only descriptors 0, 1 and 2 (none of the
               launcher's: not the coordinator's listening socket, not the
               events file); SIGKILL to cohort-run: every worker is gone
               within 1 s; then a new cohort-run --standalone --port P
               starts (the port is free) and runs its job to exit 0
  coordinator  a cohort-coordinator of its own and cohort-run --coordinator
               with 2 cohort-train workers; once they train, SIGKILL to
               cohort-run: the workers are gone within 1 s, and
               GET /v1/jobs/{job} shows both members failed within
               failure_timeout + one heartbeat interval (+ slack)

    orphans.py --run PATH --train PATH [--coordinator PATH] [CASE...]

A watchdog kills every child and fails the case when it overruns, so the
test never hangs. Standard library only.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

import case_runner
import launcher as lt
from coordinator_http import CaseFailed, check, free_port, request

CASE_DEADLINE_S = 90.0
HEARTBEAT_S = 0.2
FAILURE_TIMEOUT_S = 1.5
# Workers must die within this of their launcher (the bound).
ORPHAN_LIMIT_S = 1.0

servers = []  # cohort-coordinator processes, for the clean-up


def alive(pid):
    """Whether `pid` runs: a zombie (dead, not yet reaped by whoever
    inherited it) counts as gone, it holds no descriptors."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def worker_pids(launcher, count):
    launcher.wait_event(lambda e: len(launcher.of("worker_started")) >= count, f"{count} worker_started events", 45)
    pids = [e["pid"] for e in launcher.of("worker_started")]
    check(all(isinstance(p, int) and p > 0 for p in pids), f"{launcher.name}: bad pids {pids}{launcher.describe()}")
    return pids


def check_descriptors(launcher, pids):
    """Each worker holds 0, 1 and 2 only: cohort opens everything
    close-on-exec, and cohort-run passes nothing else on."""
    for pid in pids:
        try:
            fds = {}
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    fds[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    pass
        except OSError as e:
            raise CaseFailed(f"{launcher.name}: cannot list worker {pid}'s descriptors: {e}") from None
        extra = {fd: target for fd, target in fds.items() if fd > 2}
        check(not extra, f"{launcher.name}: worker {pid} inherited descriptors {extra} (only 0, 1, 2 expected)"
                         f"{launcher.describe()}")


def kill_and_time_orphans(launcher, pids):
    """SIGKILL to cohort-run; seconds until the last of `pids` is gone."""
    launcher.proc.kill()
    launcher.proc.wait(10)
    dead_at = time.monotonic()
    while any(alive(p) for p in pids) and time.monotonic() - dead_at < 5:
        time.sleep(0.01)
    took = time.monotonic() - dead_at
    left = [p for p in pids if alive(p)]
    for p in left:  # not to outlive the test whatever the verdict
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    check(not left, f"{launcher.name}: workers {left} still run 5 s after cohort-run was killed{launcher.describe()}")
    check(took <= ORPHAN_LIMIT_S, f"{launcher.name}: the workers took {took:.2f} s to die (limit {ORPHAN_LIMIT_S} s)")
    return took


def case_sigkill(tools, workdir):
    port = free_port()
    flags = ["--port", str(port), "--nproc-per-node", "2", "--min-workers", "2", *lt.JOB_FLAGS]
    first = lt.Launcher(tools, workdir, "first", flags, ["sleep", "300"])
    pids = worker_pids(first, 2)
    first.wait_event(lambda e: e.get("event") == "coordinator", "coordinator event", 10)
    check_descriptors(first, pids)
    took = kill_and_time_orphans(first, pids)
    print(f"sigkill: workers {pids} held only 0, 1, 2 and were gone {took:.3f} s after cohort-run", flush=True)

    second, status = lt.run_to_end(tools, workdir, "second", ["--port", str(port), "--nproc-per-node", "1",
                                                              *lt.JOB_FLAGS], ["true"], timeout=60)
    second.events()  # learns its url
    check(status == 0, f"second: a new cohort-run on port {port} exited {status}, expected 0{second.describe()}")
    check(second.url and second.url.endswith(f":{port}"),
          f"second: its coordinator is at {second.url}, expected port {port}{second.describe()}")
    print(f"sigkill: a new cohort-run --standalone --port {port} started and exited 0", flush=True)


def job_members(url, job):
    status, state = request(url, "GET", f"/v1/jobs/{job}", timeout=5)
    check(status == 200 and isinstance(state, dict), f"GET /v1/jobs/{job}: {status} {state}")
    return {m.get("id"): m.get("state") for m in state.get("members", [])}


def case_coordinator(tools, workdir):
    with open(os.path.join(workdir, "coordinator.err"), "wb") as err:
        server = subprocess.Popen([tools.coordinator, "--port", "0"], stdout=subprocess.PIPE, stderr=err,
                                  stdin=subprocess.DEVNULL)
    servers.append(server)
    url = server.stdout.readline().decode().strip()
    check(url.startswith("http://"), f"coordinator: cohort-coordinator did not start (exit {server.poll()})")
    job = "orphans"
    program = [tools.train, "--epochs", "1000", "--shards", "64", "--step-ms", "50"]
    node = lt.Launcher(tools, workdir, "node", ["--job", job, "--nproc-per-node", "2", "--min-workers", "2",
                                                *lt.JOB_FLAGS], program, coordinator=url)
    pids = worker_pids(node, 2)
    node.wait_event(lambda e: e.get("event") == "training", "training event", 45)
    members = job_members(url, job)
    check(sorted(s for s in members.values()) == ["active", "active"],
          f"coordinator: before the kill the members are {members}, expected 2 active{node.describe()}")
    took = kill_and_time_orphans(node, pids)
    killed_at = time.monotonic() - took
    # Their heartbeats stop with them; the coordinator declares each failed
    # failure_timeout after its last one, at most an interval before the kill.
    limit = FAILURE_TIMEOUT_S + HEARTBEAT_S + 0.5
    while True:
        members = job_members(url, job)
        if all(s == "failed" for s in members.values()):
            break
        check(time.monotonic() - killed_at < limit + 5,
              f"coordinator: members {members} 5 s past the limit, expected all failed{node.describe()}")
        time.sleep(0.05)
    seen = time.monotonic() - killed_at
    check(seen <= limit, f"coordinator: the members were failed {seen:.2f} s after the kill (limit {limit:.1f} s)")
    check(server.poll() is None, "coordinator: cohort-coordinator exited")
    print(f"coordinator: workers gone {took:.3f} s and members {sorted(members)} failed {seen:.2f} s after the "
          f"launcher's SIGKILL", flush=True)


CASES = {"sigkill": case_sigkill, "coordinator": case_coordinator}


def clean_up():
    lt.clean_up()
    for server in servers:
        if server.poll() is None:
            server.kill()
        server.wait()
        server.stdout.close()
    servers.clear()


def kill_all():
    case_runner.kill_live([launcher.proc for launcher in lt.launchers])
    case_runner.kill_live(servers)


def run_case(tools, name):
    return case_runner.run_case(name, lambda workdir: CASES[name](tools, workdir),
                                prefix=f"cohort-orphans-{name}-", deadline_s=CASE_DEADLINE_S,
                                kill_all=kill_all, clean_up=clean_up, expected=(CaseFailed,))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="*", help=f"cases to run (default all: {', '.join(CASES)})")
    parser.add_argument("--run", required=True, help="cohort-run")
    parser.add_argument("--train", required=True, help="cohort-train")
    parser.add_argument("--coordinator", help="cohort-coordinator (default: next to cohort-run)")
    args = parser.parse_args()
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r} (expected {', '.join(CASES)})")
    args.coordinator = args.coordinator or os.path.join(os.path.dirname(args.run), "cohort-coordinator")
    for flag, path in (("--run", args.run), ("--train", args.train), ("--coordinator", args.coordinator)):
        if not os.access(path, os.X_OK):
            parser.error(f"{flag}: no executable at {path!r}")
    results = [run_case(args, c) for c in (args.cases or list(CASES))]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
