#!/usr/bin/env python3
"""An unmodified torchrun script (torchrun_script.py: env://, LOCAL_RANK,
RANK, WORLD_SIZE, DDP, its own checkpoint) under cohort-run, judged by the
launchers' exit status, their events files and the script's output. Cases:

  one_launcher       one cohort-run --standalone, --nproc-per-node 2: ranks 0
                     and 1 of 2, MASTER_ADDR 127.0.0.1, both finish with one
                     parameter checksum; exit 0
  two_launchers      a cohort-coordinator and two cohort-run --coordinator
                     --nnodes 2, one worker each: one launcher publishes rank
                     0's address and port in the store, both read the same
                     (a `master` event each), ranks 0 and 1 of 2, one checksum
  restart_all        --restart all, LOCAL_RANK 1 killed (-9) as it starts
                     epoch 1: one group restart, both workers started again
                     in a new generation with a new MASTER_PORT and
                     TORCHELASTIC_RESTART_COUNT 1, both resume from the
                     checkpoint at epoch 1 and end with the checksum of the
                     same job run without the kill
  restart_all_two    two launchers with --restart all; the worker of launcher
                     a dies before it forms its process group, so the worker
                     of b waits in init_process_group and only its launcher
                     can save it: b sees a's worker fail in the job's state
                     (`world_changed`), restarts its worker too, and both
                     finish in the new world
  budget             --restart all --max-restarts 1, two workers that always
                     exit 3: one group restart, then the launcher gives up
                     (the budget named), stops its workers and exits 1
  bad_flags          --restart and --master-addr with bad values: exit 2, the
                     flag named on stderr, nothing started

    torchrun.py --run PATH --coordinator PATH [CASE...]

torch must be importable by this Python: without it every case fails (the
workers are this interpreter running torchrun_script.py). A watchdog kills
every process the case started when it overruns; after each case no
process with the case's coordinator address in its environment is left.
"""

import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import case_runner  # noqa: E402 - found through the line above
import launcher as runs  # noqa: E402  (the cohort-run driver of launcher.py)
from coordinator_http import CaseFailed, check  # noqa: E402

CASE_DEADLINE_S = 200.0
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchrun_script.py")
# Quick rounds and failure detection, no progress lines; a torch worker
# needs seconds to import torch, which the launcher heartbeats through.
JOB_FLAGS = ["--heartbeat-interval", "0.2", "--failure-timeout", "3", "--last-call", "1", "--progress", "0",
             "--grace", "3", "--relaunch-delay", "0.2"]
EPOCHS = 3
# The workers share the launcher's stdout: a line may run into the next
# one's start, so nothing here relies on line ends.
CHECKSUM = re.compile(r"rank (\d+): finished (\d+) epochs in a world of (\d+), parameter checksum (-?\d+\.\d+)")

servers = []  # cohort-coordinator processes, for the clean-up


def program(workdir, name="ckpt"):
    return [sys.executable, SCRIPT, "--checkpoint-file", os.path.join(workdir, f"{name}.pt"),
            "--epochs", str(EPOCHS), "--step-seconds", "0.01"]


def start_coordinator(tools, workdir):
    with open(os.path.join(workdir, "coordinator.err"), "wb") as err:
        server = subprocess.Popen([tools.coordinator, "--port", "0"], stdout=subprocess.PIPE, stderr=err,
                                  stdin=subprocess.DEVNULL)
    servers.append(server)
    url = server.stdout.readline().decode().strip()
    check(url.startswith("http://"), f"the coordinator did not start (exit {server.poll()})")
    return url


def finished(launchers, world_size):
    """Every rank of the world printed its checksum, and all agree: the
    checksum."""
    found = {}
    for launcher in launchers:
        for m in CHECKSUM.finditer(launcher.output()):
            rank, epochs, world, checksum = int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)
            check(epochs == EPOCHS and world == world_size,
                  f"{launcher.name}: rank {rank} finished {epochs} epochs in a world of {world}, expected "
                  f"{EPOCHS} in {world_size}{launcher.describe()}")
            found[rank] = checksum
    described = "".join(l.describe() for l in launchers)
    check(sorted(found) == list(range(world_size)),
          f"ranks {sorted(found)} finished, expected 0..{world_size - 1}{described}")
    check(len(set(found.values())) == 1, f"the ranks end with different checksums: {found}{described}")
    return found[0]


def with_env(env, fn):
    """Runs fn() with `env` added to os.environ (a launcher passes its
    environment to its workers)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return fn()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def one_launcher_run(tools, workdir, name, flags, env=None):
    def start():
        return runs.Launcher(tools, workdir, name, ["--nproc-per-node", "2", *JOB_FLAGS, "--node-id", name, *flags],
                             program(workdir, name))
    launcher = with_env(env or {}, start)
    status = launcher.wait(150)
    runs.check_done(launcher, status, 0)
    return launcher


# ------------------------------------------------------------------ cases

def case_one_launcher(tools, workdir):
    launcher = one_launcher_run(tools, workdir, "one", [])
    out = launcher.output()
    check("rank 0 of 2" in out and "rank 1 of 2" in out, f"one: not ranks 0 and 1 of 2{launcher.describe()}")
    check("master 127.0.0.1:" in out, f"one: MASTER_ADDR is not 127.0.0.1{launcher.describe()}")
    checksum = finished([launcher], 2)
    print(f"one_launcher: 2 ranks, checksum {checksum}", flush=True)


def case_two_launchers(tools, workdir):
    url = start_coordinator(tools, workdir)
    flags = [*JOB_FLAGS, "--nnodes", "2", "--nproc-per-node", "1", "--min-workers", "2", "--job", "torch"]
    nodes = [runs.Launcher(tools, workdir, node, [*flags, "--node-id", node], program(workdir), coordinator=url)
             for node in ("a", "b")]
    statuses = [n.wait(150) for n in nodes]
    for n, status in zip(nodes, statuses):
        runs.check_done(n, status, 0)
    masters = [n.of("master") for n in nodes]
    check(all(len(m) == 1 for m in masters), f"two: expected one `master` event per launcher: {masters}")
    addresses = {(m[0]["master_addr"], m[0]["master_port"]) for m in masters}
    check(len(addresses) == 1, f"two: the launchers read different masters: {addresses}")
    check(sorted(m[0]["published"] for m in masters) == [False, True],
          f"two: not exactly one launcher published rank 0's address: {masters}")
    addr, port = addresses.pop()
    for n in nodes:
        check(f"master {addr}:{port}" in n.output(), f"two: {n.name}'s worker did not get {addr}:{port}"
              f"{n.describe()}")
    checksum = finished(nodes, 2)
    print(f"two_launchers: MASTER {addr}:{port} from the store; 2 ranks, checksum {checksum}", flush=True)


def case_restart_all(tools, workdir):
    reference = finished([one_launcher_run(tools, workdir, "ref", ["--restart", "all"])], 2)
    launcher = one_launcher_run(tools, workdir, "crash", ["--restart", "all"], {"TORCHRUN_SCRIPT_CRASH": "1@1"})
    out = launcher.output()
    check("crashing at epoch 1" in out, f"crash: the worker did not crash{launcher.describe()}")
    check(len(launcher.of("restarting")) == 1, f"crash: expected one group restart{launcher.describe()}")
    started = launcher.of("worker_started")
    check(len(started) == 4, f"crash: expected 4 worker starts (2 per world){launcher.describe()}")
    first, second = started[:2], started[2:]
    check(all(e["restart"] == 0 for e in first) and all(e["restart"] == 1 for e in second),
          f"crash: the restart counts are not 0 then 1{launcher.describe()}")
    check(len({e["generation"] for e in second}) == 1 and second[0]["generation"] > first[0]["generation"],
          f"crash: the restarted workers are not in one newer generation{launcher.describe()}")
    check(sorted(e["rank"] for e in second) == [0, 1] and all(e["world_size"] == 2 for e in second),
          f"crash: the new world is not ranks 0 and 1 of 2{launcher.describe()}")
    masters = launcher.of("master")
    check(len(masters) == 2 and masters[0]["master_port"] != masters[1]["master_port"],
          f"crash: expected a new MASTER_PORT for the new world: {masters}{launcher.describe()}")
    for r in (0, 1):
        check(f"rank {r}: resumed from checkpoint" in out and re.search(rf"rank {r} of 2 \(local rank \d, restart 1",
                                                                         out),
              f"crash: rank {r} did not resume from the checkpoint at restart 1{launcher.describe()}")
    check("at epoch 1" in out, f"crash: the resume is not at epoch 1{launcher.describe()}")
    checksum = finished([launcher], 2)
    check(checksum == reference, f"crash: checksum {checksum} after the restart, {reference} without the kill"
          f"{launcher.describe()}")
    print(f"restart_all: killed at epoch 1, the group restarted once into generation {second[0]['generation']} "
          f"(MASTER_PORT {masters[0]['master_port']} -> {masters[1]['master_port']}), resumed at epoch 1; checksum "
          f"{checksum} as without the kill", flush=True)


def case_restart_all_two(tools, workdir):
    url = start_coordinator(tools, workdir)
    flags = [*JOB_FLAGS, "--nnodes", "2", "--nproc-per-node", "1", "--min-workers", "2", "--job", "torch",
             "--restart", "all"]
    # -1: before init_process_group; the peer then waits in it for good.
    a = with_env({"TORCHRUN_SCRIPT_CRASH": "0@-1"},
                 lambda: runs.Launcher(tools, workdir, "a", [*flags, "--node-id", "a"], program(workdir),
                                       coordinator=url))
    b = runs.Launcher(tools, workdir, "b", [*flags, "--node-id", "b"], program(workdir), coordinator=url)
    statuses = [n.wait(150) for n in (a, b)]
    for n, status in zip((a, b), statuses):
        runs.check_done(n, status, 0)
    check("crashing at epoch -1" in a.output(), f"two: a's worker did not crash{a.describe()}")
    changed = b.of("world_changed")
    check(changed and changed[0].get("member") == "a-0" and changed[0].get("failure"),
          f"two: b did not see a's worker fail{b.describe()}")
    check(not b.of("worker_failed"), f"two: b's own worker failed; it should have been restarted{b.describe()}")
    for n in (a, b):
        check(len(n.of("restarting")) == 1 and len(n.of("worker_started")) == 2,
              f"two: {n.name} did not restart its worker once{n.describe()}")
        check(re.search(r"rank \d of 2 \(local rank 0, restart 1", n.output()),
              f"two: {n.name}'s worker did not run again at restart 1{n.describe()}")
    checksum = finished((a, b), 2)
    print(f"restart_all_two: a's worker died before init_process_group; b saw it ({changed[0]['reason']}) and "
          f"restarted its own; both finished, checksum {checksum}", flush=True)


def case_budget(tools, workdir):
    launcher = runs.Launcher(tools, workdir, "budget",
                             ["--nproc-per-node", "2", *JOB_FLAGS, "--node-id", "budget", "--restart", "all",
                              "--max-restarts", "1"],
                             ["/bin/sh", "-c", "exit 3"])
    status = launcher.wait(60)
    events = runs.check_done(launcher, status, 1)
    check(len(launcher.of("restarting")) == 1, f"budget: expected one group restart{launcher.describe()}")
    done = events[-1].get("reason", "")
    check("gave up" in done and "budget 1 used up" in done,
          f"budget: `done` does not say the budget is used up: {done!r}{launcher.describe()}")
    check(len(launcher.of("worker_started")) == 4, f"budget: expected 2 worlds of 2 workers{launcher.describe()}")
    print(f"budget: one restart, then exit 1: {done}", flush=True)


def case_bad_flags(tools, workdir):
    bad = [
        (["--restart", "sometimes"], "--restart: 'sometimes' is not a mode"),
        (["--restart"], "--restart"),
        (["--master-addr", ""], "--master-addr: '' is not a host name"),
        (["--master-addr", "a b"], "--master-addr: 'a b' is not a host name"),
    ]
    for i, (flags, named) in enumerate(bad):
        events_path = os.path.join(workdir, f"bad{i}.events.jsonl")
        argv = [tools.run, "--standalone", "--events", events_path, *flags, "--", "/bin/true"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        check(r.returncode == 2, f"{argv}: exit {r.returncode}, expected 2; stderr {r.stderr!r}")
        check(named in r.stderr, f"{argv}: stderr does not name {named!r}: {r.stderr!r}")
        check(not os.path.exists(events_path), f"{argv}: bad flags, yet it wrote an events file")
    r = subprocess.run([tools.run, "--help"], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0 and "--restart MODE" in r.stdout and "--master-addr ADDR" in r.stdout,
          f"--help does not describe --restart and --master-addr: {r.stdout!r}")
    print(f"bad_flags: {len(bad)} bad values -> exit 2 naming the flag", flush=True)


CASES = {"one_launcher": case_one_launcher, "two_launchers": case_two_launchers, "restart_all": case_restart_all,
         "restart_all_two": case_restart_all_two, "budget": case_budget, "bad_flags": case_bad_flags}


def clean_up():
    runs.clean_up()
    for server in servers:
        server.kill()
        server.wait()
        server.stdout.close()
    servers.clear()


def kill_launchers():
    case_runner.kill_live([launcher.proc for launcher in runs.launchers])


def run_case(tools, name):
    return case_runner.run_case(name, lambda workdir: CASES[name](tools, workdir),
                                prefix=f"cohort-torchrun-{name}-", deadline_s=CASE_DEADLINE_S,
                                kill_all=kill_launchers, clean_up=clean_up, expected=(CaseFailed,))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="*", help=f"cases to run (default all: {', '.join(CASES)})")
    parser.add_argument("--run", required=True, help="cohort-run")
    parser.add_argument("--coordinator", required=True, help="cohort-coordinator")
    args = parser.parse_args()
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r} (expected {', '.join(CASES)})")
    for flag, path in (("--run", args.run), ("--coordinator", args.coordinator)):
        if not os.access(path, os.X_OK):
            parser.error(f"{flag}: no executable at {path!r}")
    try:
        import torch  # noqa: F401
    except ImportError as e:
        # A failure, not a skip: these cases are the proof that torch scripts run.
        print(f"torchrun.py: FAILED: torch is not importable by {sys.executable} ({e}); the workers run "
              f"torchrun_script.py with this interpreter: install torch for it (Debian: python3-torch)",
              file=sys.stderr, flush=True)
        return 1
    results = [run_case(args, c) for c in (args.cases or list(CASES))]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
