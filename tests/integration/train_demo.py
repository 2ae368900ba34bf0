#!/usr/bin/env python3
"""The end-to-end training demo across processes: a real cohort-coordinator
and cohort-train (or examples/train_numpy.py) workers started by hand with
the variables a launcher sets. Cases:

  three    three workers on a fresh job: all exit 0, rank 0's check says OK
           and its weights equal `cohort-train --reference`'s within 1e-9;
           every shard of every epoch done
  kill     three workers (min 2, max 3); once the first epoch is in, kill -9
           the rank-1 worker and start a replacement (a new member id,
           COHORT_RESTART_COUNT=1): the survivors and the replacement finish,
           the replacement got the state from the sync, rank 0's weights
           equal the reference's within 1e-9, and the job's shard progress
           (GET /v1/jobs/JOB) shows every shard of every epoch done, none
           leased, the killed worker's lease requeued
  checkpoint  one worker with --checkpoint FILE: a file that is not a
           checkpoint, one written with other flags (--seed), one of an
           earlier job of the same name (deleted and created again) and one
           cut off are each ignored with a line saying why; the runs that
           train still end with the reference's weights
  python   two train_numpy.py workers: the same weights as cohort-train's
           reference within 1e-9 (fails, naming what is missing, without
           numpy or the shared library: a test that cannot run is a failure)
  python_restart  two train_numpy.py workers with checkpoints; once two
           epochs are in, kill -9 both and start two new ones (new member
           ids, the same LOCAL_RANKs, COHORT_RESTART_COUNT=1): both resume
           from their checkpoint files, finish, and rank 0's weights equal
           the reference's within 1e-9; every shard of every epoch done

    train_demo.py BUILD_DIR [CASE...]
    train_demo.py --train PATH --coordinator PATH [--library PATH] [CASE...]

BUILD_DIR holds examples/cohort-train, examples/cohort-coordinator and
libcohort.so (for the Python case). A watchdog kills every child and fails
the case when it overruns, so the test never hangs. Standard library only,
but for the Python workers, which need numpy (--python picks the
interpreter; default: this one if it has numpy, else /usr/bin/python3).
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

import case_runner  # beside this file, so on sys.path when run as a script

from coordinator_http import CaseFailed, check, ok

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
NUMPY_DEMO = os.path.join(SOURCE, "examples", "train_numpy.py")
CASE_DEADLINE_S = 120.0
TOLERANCE = 1e-9
SETTINGS = {"heartbeat_interval": 0.2, "failure_timeout": 1.5, "last_call": 0.5}

children = []  # every process started, for the watchdog


class Coordinator:
    def __init__(self, exe, workdir):
        self.stderr_path = os.path.join(workdir, "coordinator.stderr")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen([exe, "--port", "0"], stdout=subprocess.PIPE, stderr=err)
        children.append(self.proc)
        self.url = self.proc.stdout.readline().decode().strip()
        check(self.url.startswith("http://"), f"the coordinator did not start (exit {self.proc.poll()})")


class Worker:
    """One training process; stdout and stderr go to files in workdir."""

    def __init__(self, command, url, member, local_rank, workdir, restart=0, env=None):
        self.member = member
        self.out_path = os.path.join(workdir, f"{member}.out")
        self.err_path = os.path.join(workdir, f"{member}.err")
        self.weights_path = os.path.join(workdir, f"{member}.weights.json")
        full_env = dict(os.environ, COHORT_COORDINATOR=url, COHORT_JOB="train", COHORT_MEMBER=member,
                        LOCAL_RANK=str(local_rank), COHORT_RESTART_COUNT=str(restart), **(env or {}))
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(command + ["--weights-out", self.weights_path], stdout=out,
                                         stderr=err, env=full_env)
        children.append(self.proc)

    def output(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def describe(self):
        with open(self.err_path, errors="replace") as f:
            err = f.read()
        return f"{self.member} (exit {self.proc.poll()}): stdout {self.output()[-1500:]!r} stderr {err[-800:]!r}"

    def first_rank(self):
        m = re.search(r"world \d+: rank (\d+) of", self.output())
        return int(m.group(1)) if m else None


def wait_for(condition, what, workers, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        for w in workers:
            check(w.proc.poll() in (None, 0), f"while waiting for {what}: {w.describe()}")
        if time.monotonic() > deadline:
            raise CaseFailed(f"no {what} within {timeout} s: " + " | ".join(w.describe() for w in workers))
        time.sleep(0.02)


def wait_all(workers, timeout=90.0):
    deadline = time.monotonic() + timeout
    for w in workers:
        try:
            w.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise CaseFailed(f"{w.member} did not finish within {timeout} s: {w.describe()}") from None
        check(w.proc.returncode == 0, f"{w.member} failed: {w.describe()}")


def reference(train, workdir, flags):
    path = os.path.join(workdir, "reference.json")
    subprocess.run([train, "--reference", "--weights-out", path, *flags], check=True,
                   stdout=subprocess.DEVNULL, timeout=60)
    with open(path) as f:
        return json.load(f)


def checked_result(workers, ref):
    """Rank 0 of the last world: the one that printed the check. Its check
    passed and its weights file equals the reference's."""
    finishers = [w for w in workers if "max |w - w_ref|" in w.output()]
    check(len(finishers) == 1, f"expected one worker to print the check, got {[w.member for w in finishers]}")
    w = finishers[0]
    check(re.search(r"max \|w - w_ref\| = \S+ \(tolerance 1e-9\): OK", w.output()),
          f"the check did not pass: {w.describe()}")
    with open(w.weights_path) as f:
        got = json.load(f)
    values = got["weights"] + [got["bias"]]
    expected = ref["weights"] + [ref["bias"]]
    check(len(values) == len(expected), f"{len(values)} weights, expected {len(expected)}")
    diff = max(abs(a - b) for a, b in zip(values, expected))
    check(diff <= TOLERANCE, f"{w.member}'s weights differ from the reference by {diff} (> {TOLERANCE})")
    return w, diff


def check_shards(url, epochs, shards):
    state = ok(url, "GET", "/v1/jobs/train")
    progress = state["shards"]
    check(progress is not None, f"the job has no dataset plan: {state}")
    check(progress["finished"] and progress["leases"] == 0, f"shards not finished: {progress}")
    check(len(progress["epochs"]) == epochs, f"{len(progress['epochs'])} epochs, expected {epochs}: {progress}")
    for e in progress["epochs"]:
        check(e["done"] == e["total"] == shards and e["todo"] == 0 and e["leased"] == 0,
              f"epoch {e['epoch']}: {e} (expected all {shards} done)")
    return progress


def start_job(url, min_nodes, max_nodes):
    ok(url, "POST", "/v1/jobs", {"name": "train", "settings": dict(SETTINGS, min_nodes=min_nodes,
                                                                     max_nodes=max_nodes)})


# ------------------------------------------------------------------ cases

def case_three(tools, workdir):
    flags = ["--epochs", "3", "--shards", "48", "--step-ms", "20"]
    ref = reference(tools.train, workdir, flags)
    c = Coordinator(tools.coordinator, workdir)
    start_job(c.url, 3, 3)
    workers = [Worker([tools.train, *flags], c.url, f"w{i}", i, workdir) for i in range(3)]
    wait_all(workers)
    w, diff = checked_result(workers, ref)
    progress = check_shards(c.url, 3, 48)
    print(f"three: ok ({w.member} checked, max diff {diff:.3g}; {progress['granted']} leases)", flush=True)


def member_state(url, member):
    state = ok(url, "GET", "/v1/jobs/train")
    return next((m["state"] for m in state["members"] if m["id"] == member), None)


def case_kill(tools, workdir):
    flags = ["--epochs", "3", "--shards", "48", "--step-ms", "100"]
    ref = reference(tools.train, workdir, flags)
    c = Coordinator(tools.coordinator, workdir)
    start_job(c.url, 2, 3)
    workers = [Worker([tools.train, *flags], c.url, f"w{i}", i, workdir) for i in range(3)]
    wait_for(lambda: all(w.first_rank() is not None for w in workers), "a world of 3", workers)
    victim = next(w for w in workers if w.first_rank() == 1)
    survivors = [w for w in workers if w is not victim]
    wait_for(lambda: any("epoch 1/3" in w.output() for w in workers), "the first epoch", workers)
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait()
    check("done:" not in victim.output(), f"the victim finished before it was killed: {victim.describe()}")
    # The survivors go on as a world of 2 until the coordinator finds the
    # victim failed and gives its leases to them; then a replacement comes.
    wait_for(lambda: all(re.search(r"world \d+: rank \d+ of 2", s.output()) for s in survivors),
             "the survivors' world of 2", survivors)
    wait_for(lambda: member_state(c.url, victim.member) == "failed", "the victim found failed", survivors)
    replacement = Worker([tools.train, *flags], c.url, "w3", 1, workdir, restart=1)
    everyone = survivors + [replacement]
    wait_all(everyone)
    w, diff = checked_result(everyone, ref)
    synced = re.findall(r"state from rank \d+: epoch (\d+), step (\d+)", replacement.output())
    check(synced and int(synced[0][1]) > 0 and re.search(r"world \d+: rank \d+ of 3", replacement.output()),
          f"the replacement did not join a world of 3 with the synced state: {replacement.describe()}")
    progress = check_shards(c.url, 3, 48)
    check(progress["requeued"] >= 1, f"the killed worker's lease was not requeued: {progress}")
    # The victim's last shard was in the state but not yet reported: whoever
    # leased it again found it there and only reported it.
    found = sum(x.output().count("in the state already") for x in everyone)
    check(found >= 1, "no worker found a requeued shard in the state already: "
          + " | ".join(x.describe() for x in everyone))
    print(f"kill: ok ({victim.member} killed, w3 joined at step {synced[0][1]}; {w.member} checked, "
          f"max diff {diff:.3g}; {progress['requeued']} leases requeued, {found} found in the state)", flush=True)


def python_env(tools):
    """The environment of train_numpy.py workers; CaseFailed naming what is
    missing."""
    check(tools.python is not None, "no Python with numpy for train_numpy.py: install python3-numpy "
          "(scripts/deps.sh does) or give --python")
    library = tools.library
    check(library and os.path.exists(library),
          f"no shared libcohort for the Python workers ({library}; give --library)")
    return {"COHORT_LIBRARY": library, "PYTHONDONTWRITEBYTECODE": "1"}


def case_python(tools, workdir):
    env = python_env(tools)
    flags = ["--epochs", "3", "--shards", "32", "--step-ms", "10"]
    ref = reference(tools.train, workdir, flags)
    c = Coordinator(tools.coordinator, workdir)
    start_job(c.url, 2, 2)
    workers = [Worker([tools.python, NUMPY_DEMO, *flags], c.url, f"p{i}", i, workdir, env=env)
               for i in range(2)]
    wait_all(workers)
    w, diff = checked_result(workers, ref)
    check_shards(c.url, 3, 32)
    print(f"python: ok ({w.member} checked, max diff from cohort-train's reference {diff:.3g})", flush=True)


def case_python_restart(tools, workdir):
    """Every worker killed at once: only the checkpoint files keep the
    state the coordinator counted shards into."""
    env = python_env(tools)
    env["COHORT_CHECKPOINT_DIR"] = os.path.join(workdir, "checkpoints")
    os.mkdir(env["COHORT_CHECKPOINT_DIR"])
    flags = ["--epochs", "4", "--shards", "32", "--step-ms", "30"]
    ref = reference(tools.train, workdir, flags)
    c = Coordinator(tools.coordinator, workdir)
    start_job(c.url, 2, 2)
    first = [Worker([tools.python, NUMPY_DEMO, *flags], c.url, f"p{i}", i, workdir, env=env) for i in range(2)]
    wait_for(lambda: any("epoch 2/4" in w.output() for w in first), "the second epoch", first)
    for w in first:
        w.proc.send_signal(signal.SIGKILL)
    for w in first:
        w.proc.wait()
        check("done:" not in w.output(), f"{w.member} finished before it was killed: {w.describe()}")
    files = sorted(os.listdir(env["COHORT_CHECKPOINT_DIR"]))
    check(files == ["train_numpy-0.ckpt", "train_numpy-1.ckpt"], f"checkpoint files after the kill: {files}")
    second = [Worker([tools.python, NUMPY_DEMO, *flags], c.url, f"p{i + 2}", i, workdir, restart=1, env=env)
              for i in range(2)]
    wait_all(second)
    w, diff = checked_result(second, ref)
    steps = []
    for x in second:
        m = re.search(r"resumed from checkpoint \S+train_numpy-\d\.ckpt \(restart 1\): epoch (\d+), step (\d+)",
                      x.output())
        check(m and int(m.group(2)) > 0, f"{x.member} did not resume from its checkpoint: {x.describe()}")
        steps.append(int(m.group(2)))
    check_shards(c.url, 4, 32)
    print(f"python_restart: ok (both workers killed; the new ones resumed at steps {steps}; {w.member} checked, "
          f"max diff {diff:.3g})", flush=True)


def case_checkpoint(tools, workdir):
    """--checkpoint FILE: a file that is not a checkpoint, one written with
    other flags, one of an earlier job of the same name, and one cut off
    are each ignored with a line saying why, and training is right anyway."""
    flags = ["--epochs", "2", "--shards", "8", "--step-ms", "0"]
    ref = reference(tools.train, workdir, flags)
    ck = os.path.join(workdir, "w.ckpt")
    with open(ck, "w") as f:
        f.write("hello\n")
    c = Coordinator(tools.coordinator, workdir)

    def run(member, extra=()):
        w = Worker([tools.train, *flags, *extra, "--checkpoint", ck], c.url, member, 0, workdir)
        wait_all([w])
        return w

    def says(w, pattern):
        check(re.search(pattern, w.output()), f"{w.member} does not say {pattern!r}: {w.describe()}")

    start_job(c.url, 1, 1)
    a = run("a")
    says(a, r"checkpoint '.*w\.ckpt': not a cohort-train checkpoint \(first line 'hello'\); ignored")
    checked_result([a], ref)
    with open(ck) as f:
        good = f.read()
    check(good.startswith("cohort-train checkpoint 1\njob train\n"), f"the checkpoint a wrote: {good[:200]!r}")

    # Other flags, same job (finished): ignored; nothing left to train.
    b = run("b", ["--seed", "2", "--no-check"])
    says(b, r"written with other model or data flags; ignored")

    # The job again under the same name: a's file is an earlier job's.
    ok(c.url, "DELETE", "/v1/jobs/train")
    start_job(c.url, 1, 1)
    with open(ck, "w") as f:
        f.write(good)
    d = run("d")
    says(d, r"written for job 'train' created at \S+, not this job 'train' created at \S+; ignored")
    checked_result([d], ref)

    # d's own file, cut off after two values: ignored, naming the value.
    with open(ck) as f:
        lines = f.read().split("\n")
    with open(ck, "w") as f:
        f.write("\n".join(lines[:7]) + "\n")
    e = run("e", ["--no-check"])
    says(e, r"value 3 of \d+ is missing or not a number \(a cut-off file\?\); ignored")

    # A file that can be neither read nor written: said once, and training
    # goes on without checkpoints.
    ck = "/dev/null/w.ckpt"
    ok(c.url, "DELETE", "/v1/jobs/train")
    start_job(c.url, 1, 1)
    f = run("f")
    says(f, r"cannot read checkpoint '/dev/null/w\.ckpt': Not a directory")
    says(f, r"cannot write checkpoint '/dev/null/w\.ckpt\.tmp\d+': Not a directory \(training goes on; a "
            r"restart would begin again\)")
    check(f.output().count("cannot write checkpoint") == 1, f"the write failure is said more than once: "
          f"{f.describe()}")
    checked_result([f], ref)

    r = subprocess.run([tools.train, "--checkpoint", ""], capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and "--checkpoint: needs a file name" in r.stderr,
          f"--checkpoint '': exit {r.returncode}, stderr {r.stderr!r}")
    print("checkpoint: a foreign file, other flags, an earlier job and a cut-off file each ignored", flush=True)


CASES = {"three": case_three, "kill": case_kill, "python": case_python, "python_restart": case_python_restart,
         "checkpoint": case_checkpoint}


def run_case(tools, name):
    passed = case_runner.run_case(name, lambda workdir: CASES[name](tools, workdir),
                                  prefix=f"cohort-train-{name}-", deadline_s=CASE_DEADLINE_S,
                                  kill_all=lambda: case_runner.kill_live(children),
                                  clean_up=lambda: case_runner.reap(children), expected=(CaseFailed,))
    return "passed" if passed else "failed"


def python_with_numpy(given):
    candidates = [given] if given else [sys.executable, "/usr/bin/python3"]
    for exe in candidates:
        if exe and os.path.exists(exe) and subprocess.run([exe, "-c", "import numpy"],
                                                          capture_output=True).returncode == 0:
            return exe
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir", nargs="?", help="the build tree")
    parser.add_argument("cases", nargs="*", help=f"cases to run (default all: {', '.join(CASES)})")
    parser.add_argument("--train", help="cohort-train (default BUILD_DIR/examples/cohort-train)")
    parser.add_argument("--coordinator", help="cohort-coordinator (default BUILD_DIR/examples/cohort-coordinator)")
    parser.add_argument("--library", help="libcohort.so for the Python workers (default BUILD_DIR/libcohort.so)")
    parser.add_argument("--python", help="the interpreter for train_numpy.py (needs numpy)")
    args = parser.parse_args()
    if args.build_dir in CASES:  # only cases, with --train and --coordinator
        args.cases.insert(0, args.build_dir)
        args.build_dir = None
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r} (expected {', '.join(CASES)})")
    build = args.build_dir
    args.train = args.train or (build and os.path.join(build, "examples", "cohort-train"))
    args.coordinator = args.coordinator or (build and os.path.join(build, "examples", "cohort-coordinator"))
    args.library = args.library or (build and os.path.join(build, "libcohort.so"))
    for flag, path in (("--train", args.train), ("--coordinator", args.coordinator)):
        if not path or not os.access(path, os.X_OK):
            parser.error(f"{flag}: no executable at {path!r} (give BUILD_DIR or {flag} PATH)")
    args.python = python_with_numpy(args.python)
    results = [run_case(args, c) for c in (args.cases or list(CASES))]
    return 1 if "failed" in results else 0


if __name__ == "__main__":
    sys.exit(main())
