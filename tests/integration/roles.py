#!/usr/bin/env python3
"""Role groups under cohort-run (docs/training.md, "Role groups"): several
--role NAME:NPROC in one launcher, each role a world of its own. The
workers are role_worker.py (cohort's Python binding: Membership from the
environment, an all-reduce per step); judged by the exit status, the events
file (each role's launcher appends its events with a "role" field) and what
each worker wrote. Cases:

  standalone   cohort-run --standalone --role worker:2 --role evaluator:1,
               the evaluator SIGKILLed after 1.5 s (--kill-worker
               evaluator:0@1.5): the workers' world forms once (one
               round_formed of role worker), every worker step is in
               generation 1 of a world of 2 with the sum 3, no worker
               failed; the evaluator is relaunched (worker_failed and
               relaunched of role evaluator), its new start joins the
               evaluators' next round alone (sum 1); ROLE_NAME, ROLE_RANK,
               ROLE_WORLD_SIZE, RANK, WORLD_SIZE, COHORT_JOB/COHORT_ROLE
               and the member ids as documented, each role its own
               MASTER_PORT and checkpoint directory; exit 0, no process left
  coordinator  a cohort-coordinator and cohort-run --coordinator with the
               two roles (a role's own command in --role NAME:N:COMMAND):
               jobs J and J.evaluator, exit 0
  torch_env    2 workers and 2 evaluators forming torch process groups
               with init_method="env://": each role a gloo world of 2 of
               its own (rank, size and all-reduce checked per role)
  restart_all  the same under --restart all with 2 evaluators, one
               SIGKILLed: the evaluators' group restarts (a `restarting`
               event of role evaluator, new ids NODE-evaluator-R.1 in a new
               generation), the workers' does not (no `restarting`, one
               round, every step in generation 1); exit 0
  role_fails   an evaluator that always exits 3 (--max-restarts 0) fails
               the group: the worker's launcher is stopped, exit 1, the
               `done` event names the role
  sigterm      SIGTERM to a running group: every role's launcher stops its
               workers, exit 143, no process left
  single_role  --role evaluator alone: a launcher whose workers are
               job.evaluator's, ids NODE-evaluator-R, ROLE_NAME evaluator
  bad_flags    bad --role specs: exit 2 naming the spec, nothing started

    roles.py --run PATH --coordinator PATH [CASE...]

COHORT_LIBRARY and PYTHONPATH must let this Python import cohort (ctest
sets them). torch_env needs torch for this Python: without it the case
fails. A watchdog kills what a case started when it overruns.
"""

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import case_runner  # noqa: E402
import launcher as runs  # noqa: E402  (the cohort-run driver of launcher.py)
from coordinator_http import CaseFailed, check  # noqa: E402

CASE_DEADLINE_S = 150.0
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "role_worker.py")
JOB_FLAGS = ["--heartbeat-interval", "0.2", "--failure-timeout", "2", "--last-call", "0.5", "--progress", "0",
             "--grace", "3", "--relaunch-delay", "0.2", "--node-id", "h1"]
servers = []


def worker(workdir, steps=40, step_seconds=0.1, extra=()):
    return [sys.executable, WORKER, "--out", workdir, "--steps", str(steps), "--step-seconds", str(step_seconds),
            *extra]


def records(workdir):
    """What each finished worker wrote, by member id (a list: a relaunch
    keeps the id)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(workdir, "*.json"))):
        with open(path) as f:
            r = json.load(f)
        out.setdefault(r["env"]["COHORT_MEMBER"], []).append(r)
    return out


def started_envs(launcher):
    """The ROLE-ENV line of every start, in order."""
    envs = []
    for line in launcher.output().splitlines():
        at = line.find("ROLE-ENV ")
        if at >= 0:
            try:
                envs.append(json.loads(line[at + len("ROLE-ENV "):]))
            except ValueError:
                pass  # a line run into another process's output
    return envs


def of_role(launcher, kind, role):
    return [e for e in launcher.of(kind) if e.get("role") == role]


def check_group_done(launcher, status, expected):
    check(status == expected, f"{launcher.name}: exit {status}, expected {expected}{launcher.describe()}")
    events = launcher.events()
    group_done = [e for e in events if e.get("event") == "done" and "role" not in e]
    check(len(group_done) == 1 and events[-1] is group_done[0],
          f"{launcher.name}: the group's `done` is not the one last event{launcher.describe()}")
    check(group_done[0].get("exit_code") == expected,
          f"{launcher.name}: `done` says exit_code {group_done[0].get('exit_code')}{launcher.describe()}")
    check_nothing_left(launcher)
    return events


def check_nothing_left(launcher):
    """No worker (COHORT_COORDINATOR=url in its environment) nor role
    launcher (the url on its command line) outlives the group."""
    url = launcher.url or next((e.get("url") for e in launcher.events() if e.get("event") == "coordinator"), None)
    check(url, f"{launcher.name}: no coordinator event{launcher.describe()}")
    deadline = time.monotonic() + 5
    while True:
        left = runs.leftover_processes(url)
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if url.encode() in f.read().split(b"\0") and int(entry) != launcher.proc.pid:
                        left.append(int(entry))
            except OSError:
                pass
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    check(not left, f"{launcher.name}: processes left after the group exited: {left}{launcher.describe()}")


def start_coordinator(tools, workdir):
    with open(os.path.join(workdir, "coordinator.err"), "wb") as err:
        server = subprocess.Popen([tools.coordinator, "--port", "0"], stdout=subprocess.PIPE, stderr=err,
                                  stdin=subprocess.DEVNULL)
    servers.append(server)
    url = server.stdout.readline().decode().strip()
    check(url.startswith("http://"), f"the coordinator did not start (exit {server.poll()})")
    return url


# ------------------------------------------------------------------ cases

def case_standalone(tools, workdir):
    launcher = runs.Launcher(tools, workdir, "group",
                             [*JOB_FLAGS, "--job", "rg", "--role", "worker:2", "--role", "evaluator:1",
                              "--kill-worker", "evaluator:0@1.5"],
                             worker(workdir, steps=70))
    status = launcher.wait(120)
    check_group_done(launcher, status, 0)
    describe = launcher.describe()
    started = launcher.of("role_started")
    check(sorted((e["role"], e["job"], e["nproc"]) for e in started) == [("evaluator", "rg.evaluator", 1),
                                                                          ("worker", "rg", 2)],
          f"role_started events: {started}{describe}")
    exited = launcher.of("role_exited")
    check(sorted((e["role"], e["exit_code"]) for e in exited) == [("evaluator", 0), ("worker", 0)],
          f"role_exited events: {exited}{describe}")

    # The workers: one world, never disturbed.
    rounds = of_role(launcher, "round_formed", "worker")
    check(len(rounds) == 1 and rounds[0]["generation"] == 1 and rounds[0]["world_size"] == 2,
          f"the workers' rounds: {rounds}, expected only generation 1 of 2{describe}")
    check(not of_role(launcher, "worker_failed", "worker") and not of_role(launcher, "relaunched", "worker"),
          f"a worker failed or was relaunched{describe}")
    done = records(workdir)
    for member in ("h1-0", "h1-1"):
        check(len(done.get(member, [])) == 1, f"worker {member} did not finish once: {done.get(member)}{describe}")
        r = done[member][0]
        check(r["job"] == "rg" and r["role"] == "worker", f"{member}: job {r['job']}, role {r['role']}")
        check(len(r["steps"]) == 70 and not r["errors"], f"{member}: {len(r['steps'])} steps, errors {r['errors']}")
        bad = [s for s in r["steps"] if (s["generation"], s["world_size"], s["sum"]) != (1, 2, 3)]
        check(not bad, f"{member}: steps outside generation 1 of 2 with sum 3: {bad[:3]}{describe}")

    # The evaluator: killed, relaunched, alone in its next round.
    killed = launcher.of("worker_killed")
    check(len(killed) == 1 and killed[0].get("role") == "evaluator" and killed[0]["worker"] == "h1-evaluator-0",
          f"worker_killed: {killed}{describe}")
    failed = of_role(launcher, "worker_failed", "evaluator")
    check(len(failed) == 1 and failed[0]["signal"] == 9, f"the evaluator's failure: {failed}{describe}")
    check(len(of_role(launcher, "relaunched", "evaluator")) == 1, f"the evaluator was not relaunched{describe}")
    evaluator = done.get("h1-evaluator-0", [])
    check(len(evaluator) == 1, f"the evaluator finished {len(evaluator)} times, expected once (its relaunch)")
    e = evaluator[0]
    check(e["job"] == "rg.evaluator" and e["role"] == "evaluator" and e["env"]["COHORT_RESTART_COUNT"] == "1",
          f"the relaunched evaluator: {e['job']}, {e['role']}, restart {e['env']['COHORT_RESTART_COUNT']}")
    gens = {s["generation"] for s in e["steps"]}
    check(e["steps"] and min(gens) > 1 and all((s["world_size"], s["sum"]) == (1, 1) for s in e["steps"]),
          f"the relaunched evaluator's steps: generations {gens}, {e['steps'][:2]}{describe}")
    check(max(r["generation"] for r in of_role(launcher, "round_formed", "evaluator")) > 1,
          f"the evaluators' group formed no new round{describe}")

    # The variables of each first start.
    envs = {(x["COHORT_MEMBER"], x["COHORT_RESTART_COUNT"]): x for x in started_envs(launcher)}
    for member, rank_world in (("h1-0", None), ("h1-1", None), ("h1-evaluator-0", ("0", "1"))):
        x = envs.get((member, "0"))
        check(x is not None, f"no ROLE-ENV line of {member}'s first start{describe}")
        role = "evaluator" if "evaluator" in member else "worker"
        check(x["ROLE_NAME"] == role and x["COHORT_ROLE"] == role and x["COHORT_JOB"] == "rg",
              f"{member}: {x}")
        check(x["ROLE_RANK"] == x["RANK"] and x["ROLE_WORLD_SIZE"] == x["WORLD_SIZE"] and x["LOCAL_RANK"] is not None,
              f"{member}: ROLE_RANK/ROLE_WORLD_SIZE are not its role's RANK/WORLD_SIZE: {x}")
        if rank_world:
            check((x["RANK"], x["WORLD_SIZE"]) == rank_world, f"{member}: {x}")
        else:
            check(x["WORLD_SIZE"] == "2" and x["LOCAL_WORLD_SIZE"] == "2", f"{member}: {x}")
        check(x["COHORT_CHECKPOINT_DIR"].endswith("/" + role), f"{member}: {x['COHORT_CHECKPOINT_DIR']}")
        check((x["GROUP_RANK"], x["GROUP_WORLD_SIZE"]) == ("0", "1"), f"{member}: one host: {x}")
    check({envs[("h1-0", "0")]["RANK"], envs[("h1-1", "0")]["RANK"]} == {"0", "1"}, f"worker ranks: {envs}")
    check(envs[("h1-0", "0")]["MASTER_PORT"] != envs[("h1-evaluator-0", "0")]["MASTER_PORT"],
          f"the roles share MASTER_PORT: {envs}")
    print(f"standalone: workers in generation 1 throughout ({len(done['h1-0'][0]['steps'])} steps each); the "
          f"evaluator killed, relaunched into generations {sorted(gens)} of its own", flush=True)


def case_restart_all(tools, workdir):
    launcher = runs.Launcher(tools, workdir, "all",
                             [*JOB_FLAGS, "--restart", "all", "--role", "worker:2", "--role", "evaluator:2",
                              "--kill-worker", "evaluator:1@1.5"],
                             worker(workdir, steps=60))
    status = launcher.wait(120)
    check_group_done(launcher, status, 0)
    describe = launcher.describe()
    check(len(of_role(launcher, "restarting", "evaluator")) == 1 and not of_role(launcher, "restarting", "worker"),
          f"restarting events: {launcher.of('restarting')}{describe}")
    rounds = of_role(launcher, "round_formed", "worker")
    check([r["generation"] for r in rounds] == [1], f"the workers' rounds: {rounds}{describe}")
    done = records(workdir)
    for member in ("h1-0", "h1-1"):
        steps = done[member][0]["steps"]
        check(len(steps) == 60 and all(s["generation"] == 1 and s["sum"] == 3 for s in steps),
              f"{member}: steps outside generation 1: {[s for s in steps if s['generation'] != 1][:3]}{describe}")
    for member in ("h1-evaluator-0.1", "h1-evaluator-1.1"):
        check(member in done, f"{member} did not finish: {sorted(done)}{describe}")
        gens = {s["generation"] for s in done[member][0]["steps"]}
        check(min(gens) > 1 and all(s["sum"] == 3 for s in done[member][0]["steps"]),
              f"{member}: generations {gens}{describe}")
    print("restart_all: the evaluators restarted as a group into a new generation; the workers stayed in 1",
          flush=True)


def case_coordinator(tools, workdir):
    url = start_coordinator(tools, workdir)
    launcher = runs.Launcher(tools, workdir, "remote",
                             [*JOB_FLAGS, "--job", "rc", "--role", "worker:2",
                              "--role", f"evaluator:1:{sys.executable} {WORKER} --out '{workdir}' --steps 5"],
                             worker(workdir, steps=10), coordinator=url)
    status = launcher.wait(120)
    check_group_done(launcher, status, 0)
    done = records(workdir)
    check(sorted(done) == ["h1-0", "h1-1", "h1-evaluator-0"], f"finished: {sorted(done)}{launcher.describe()}")
    check(len(done["h1-evaluator-0"][0]["steps"]) == 5 and len(done["h1-0"][0]["steps"]) == 10,
          f"the roles did not run their own commands{launcher.describe()}")
    check(done["h1-evaluator-0"][0]["job"] == "rc.evaluator", f"{done['h1-evaluator-0'][0]['job']}")
    print("coordinator: jobs rc and rc.evaluator on a running coordinator, each role its own command", flush=True)


def case_torch_env(tools, workdir):
    launcher = runs.Launcher(tools, workdir, "torch",
                             [*JOB_FLAGS, "--role", "trainer:2", "--role", "evaluator:2"],
                             worker(workdir, extra=("--torch",)))
    status = launcher.wait(140)
    check_group_done(launcher, status, 0)
    done = records(workdir)
    check(len(done) == 4, f"finished: {sorted(done)}{launcher.describe()}")
    for role in ("trainer", "evaluator"):
        mine = [r[0] for m, r in done.items() if r[0]["env"]["ROLE_NAME"] == role]
        check(sorted(r["torch"]["rank"] for r in mine) == [0, 1], f"{role}: torch ranks {mine}")
        check(all(r["torch"]["world_size"] == 2 and r["torch"]["sum"] == 3.0 for r in mine),
              f"{role}: not a world of 2 of its own: {[r['torch'] for r in mine]}")
    ports = {r[0]["env"]["ROLE_NAME"]: r[0]["env"]["MASTER_PORT"] for r in done.values()}
    check(ports["trainer"] != ports["evaluator"], f"one MASTER_PORT for both roles: {ports}")
    print(f"torch_env: two gloo worlds of 2, MASTER_PORT {ports}", flush=True)


def case_role_fails(tools, workdir):
    launcher = runs.Launcher(tools, workdir, "fails",
                             [*JOB_FLAGS, "--max-restarts", "0", "--role", "worker:1:sleep 60",
                              "--role", "evaluator:1:sh -c 'exit 3'"], [])
    status = launcher.wait(60)
    events = check_group_done(launcher, status, 1)
    check("role evaluator failed" in events[-1]["reason"], f"done: {events[-1]}{launcher.describe()}")
    exited = {e["role"]: e["exit_code"] for e in launcher.of("role_exited")}
    check(exited == {"evaluator": 1, "worker": 143}, f"role_exited: {exited}{launcher.describe()}")
    print(f"role_fails: {exited}, exit 1", flush=True)


def case_sigterm(tools, workdir):
    launcher = runs.Launcher(tools, workdir, "term", [*JOB_FLAGS, "--role", "worker:2", "--role", "ps:1"],
                             worker(workdir, steps=100000))
    launcher.wait_event(lambda e: e.get("event") == "round_formed" and e.get("role") == "ps", "the ps round", 60)
    launcher.wait_event(lambda e: e.get("event") == "round_formed" and e.get("role") == "worker",
                        "the workers' round", 60)
    launcher.proc.send_signal(signal.SIGTERM)
    status = launcher.wait(40)
    check_group_done(launcher, status, 143)
    exited = {e["role"]: e["exit_code"] for e in launcher.of("role_exited")}
    check(exited == {"worker": 143, "ps": 143}, f"role_exited: {exited}{launcher.describe()}")
    print("sigterm: both roles stopped, exit 143", flush=True)


def case_single_role(tools, workdir):
    launcher = runs.Launcher(tools, workdir, "single", [*JOB_FLAGS, "--job", "s", "--role", "evaluator:2"],
                             worker(workdir, steps=5))
    status = launcher.wait(90)
    runs.check_done(launcher, status, 0)
    done = records(workdir)
    check(sorted(done) == ["h1-evaluator-0", "h1-evaluator-1"], f"finished: {sorted(done)}{launcher.describe()}")
    for r in done.values():
        r = r[0]
        check(r["job"] == "s.evaluator" and r["env"]["ROLE_NAME"] == "evaluator" and r["env"]["COHORT_JOB"] == "s",
              f"{r['env']}")
        check(all(s["sum"] == 3 for s in r["steps"]), f"{r['steps']}")
    check(all(e.get("role") == "evaluator" for e in launcher.events()), f"events without the role{launcher.describe()}")
    print("single_role: job s.evaluator, ids h1-evaluator-R", flush=True)


def case_bad_flags(tools, workdir):
    bad = [
        (["--role", "a.b:1"], "--role 'a.b:1': 'a.b' is not a role name"),
        (["--role", "w:0"], "'0' is not a number of workers"),
        (["--role", "w:2", "--role", "e"], "--role e: with several roles each needs its workers"),
        (["--role", "w:2", "--role", "w:1"], "--role w: given twice"),
        (["--role", "w:1", "--role", "e:1", "--kill-worker", "0@1"], "--kill-worker: with several roles say which"),
        (["--role", "w:1", "--role", "e:1:sh -c 'x"], "is never closed"),
    ]
    for i, (flags, named) in enumerate(bad):
        events_path = os.path.join(workdir, f"bad{i}.events.jsonl")
        argv = [tools.run, "--standalone", "--events", events_path, *flags, "--", "/bin/true"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        check(r.returncode == 2, f"{argv}: exit {r.returncode}, expected 2; stderr {r.stderr!r}")
        check(named in r.stderr, f"{argv}: stderr does not name {named!r}: {r.stderr!r}")
        check(not os.path.exists(events_path), f"{argv}: bad flags, yet it wrote an events file")
    print(f"bad_flags: {len(bad)} bad specs -> exit 2 naming them", flush=True)


CASES = {"standalone": case_standalone, "restart_all": case_restart_all, "coordinator": case_coordinator, "torch_env": case_torch_env,
         "role_fails": case_role_fails, "sigterm": case_sigterm, "single_role": case_single_role,
         "bad_flags": case_bad_flags}


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
                                prefix=f"cohort-roles-{name}-", deadline_s=CASE_DEADLINE_S,
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
    results = [run_case(args, c) for c in (args.cases or list(CASES))]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
