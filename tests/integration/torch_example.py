#!/usr/bin/env python3
"""examples/torch/train_elastic.py as docs/torch.md runs it: four workers
under `cohort-run --standalone`, one of them SIGKILLed mid-run and
relaunched. The test sends the SIGKILL itself, to the worker with
LOCAL_RANK 2, once that worker's checkpoint holds a few steps: cohort-run's
--kill-worker fires at a fixed time, and on a loaded 2-core machine four
workers importing torch can take longer than any fixed time. Passes when

- cohort-run exits 0 after a worker_failed (killed by signal 9) and a
  relaunched event for that worker, and no worker process is left;
- the relaunched worker (COHORT_RESTART_COUNT=1) resumed from its
  checkpoint file, at a step past 0;
- rank 0's table has every epoch with every shard counted once and every
  training sample in it, and its own checks (the coordinator's shard
  counts, accuracy, reference) say OK;
- its final parameters (--weights-out) are within 1e-4 of a separate
  `train_elastic.py --reference` run's, at most 1 test prediction differs,
  and its test accuracy is at least 95%.

It fails, saying what to install, when the interpreter lacks torch or
numpy or the digits data is missing (scripts/deps.sh provides all three):
a test that cannot run is a failure, never a skip.

    torch_example.py --run PATH --library PATH [--python PATH]

A watchdog kills cohort-run and every worker when the test overruns.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from coordinator_http import CaseFailed, check
from launcher import JOB_FLAGS, Launcher, check_done, check_no_workers_left, kill_leftovers, started_by_local_rank

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "torch", "train_elastic.py")
DEADLINE_S = 280.0
TOLERANCE = 1e-4
# About 25 s of training on a 2-core machine: the relaunched worker comes
# back (1 s relaunch delay, 2 s to import torch) while the job still trains.
FLAGS = ["--epochs", "80", "--shards", "8"]
VICTIM = 2       # its LOCAL_RANK
KILL_AFTER = 4   # steps in its checkpoint


def run_checked(argv, what, timeout):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    check(r.returncode == 0, f"{what}: exit {r.returncode}\n--- stdout:\n{r.stdout[-2000:]}\n--- stderr:\n"
                             f"{r.stderr[-2000:]}")
    return r.stdout


def load(path, who):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise CaseFailed(f"{who}: cannot read its --weights-out file {path}: {e}") from None


def checkpoint_steps(path):
    """The applied steps in a checkpoint file (the first value), or -1."""
    try:
        with open(path) as f:
            lines = f.read().split("\n")
        return int(float(lines[5])) if len(lines) > 5 and lines[4].startswith("values ") else -1
    except (OSError, ValueError):
        return -1


def kill_when_checkpointed(launcher, path):
    """SIGKILLs the victim once its checkpoint holds KILL_AFTER steps; the
    steps it had."""
    deadline = time.monotonic() + 120
    while checkpoint_steps(path) < KILL_AFTER:
        check(launcher.proc.poll() is None, f"cohort-run exited before worker {VICTIM} checkpointed "
                                            f"{KILL_AFTER} steps{launcher.describe()}")
        check(time.monotonic() < deadline, f"worker {VICTIM} did not checkpoint {KILL_AFTER} steps within 120 s"
                                           f"{launcher.describe()}")
        time.sleep(0.05)
    steps = checkpoint_steps(path)
    os.kill(started_by_local_rank(launcher, VICTIM)["pid"], signal.SIGKILL)
    return steps


def run(tools, workdir):
    started = time.monotonic()
    probe = subprocess.run([tools.python, "-c", "import numpy, torch"], capture_output=True, text=True, timeout=60)
    check(probe.returncode == 0, f"{tools.python} cannot import numpy and torch (install python3-numpy and "
                                 f"python3-torch: scripts/deps.sh does): {probe.stderr.strip()[-500:]}")
    # The reference first: it also fails, naming the file, without the digits data.
    ref_path = os.path.join(workdir, "reference.json")
    run_checked([tools.python, EXAMPLE, "--reference", "--weights-out", ref_path, *FLAGS],
                "train_elastic.py --reference", 120)
    ref = load(ref_path, "the reference")

    weights = os.path.join(workdir, "weights.json")
    checkpoints = os.path.join(workdir, "ckpt")
    flags = ["--nproc-per-node", "4", "--checkpoint-dir", checkpoints, *JOB_FLAGS]
    launcher = Launcher(tools, workdir, "torch", flags, [tools.python, EXAMPLE, "--weights-out", weights, *FLAGS])
    tools.launcher = launcher
    killed_at = kill_when_checkpointed(launcher, os.path.join(checkpoints, f"train_elastic-{VICTIM}.ckpt"))
    status = launcher.wait(DEADLINE_S - 30 - (time.monotonic() - started))
    check_done(launcher, status, 0)
    check_no_workers_left(launcher)
    victim = started_by_local_rank(launcher, VICTIM)["worker"]
    check(any(e.get("worker") == victim and "signal 9" in json.dumps(e) for e in launcher.of("worker_failed")),
          f"no worker_failed event for {victim} killed by signal 9{launcher.describe()}")
    check(any(e.get("worker") == victim for e in launcher.of("relaunched")),
          f"{victim} was not relaunched{launcher.describe()}")
    out = launcher.output()

    resumed = re.findall(rf"resumed from checkpoint \S+train_elastic-{VICTIM}\.ckpt \(restart 1\): epoch (\d+), "
                         r"step (\d+)", out)
    check(resumed and int(resumed[0][1]) >= killed_at,
          f"the relaunched worker did not say it resumed from its checkpoint at step {killed_at} or later"
          f"{launcher.describe()}")

    epochs = int(FLAGS[FLAGS.index("--epochs") + 1])
    shards = FLAGS[FLAGS.index("--shards") + 1]
    rows = re.findall(r"^\[[^]]+\]\s+(\d+) \|\s+(\S+) \|\s+(\d+) \|\s+(\d+) \| \S+$", out, re.M)
    check(len(rows) == epochs, f"rank 0's table has {len(rows)} epochs, expected {epochs}{launcher.describe()}")
    samples = {r[2] for r in rows}
    check(all(r[1] == shards for r in rows) and len(samples) == 1,
          f"not every shard counted once, with the same samples, in every epoch: {rows}")
    for what in ("every shard counted once per epoch", "coordinator:", "test accuracy", "reference:"):
        check(re.search(rf"{what}.*: OK$", out, re.M), f"rank 0's check '{what}' did not say OK"
                                                       f"{launcher.describe()}")

    got = load(weights, "rank 0")
    a, b = got["parameters"], ref["parameters"]
    check(len(a) == len(b), f"{len(a)} parameters, the reference has {len(b)}")
    diff = max(abs(x - y) for x, y in zip(a, b))
    check(diff <= TOLERANCE, f"the parameters differ from the reference's by {diff:.3g} (> {TOLERANCE})")
    other = sum(1 for x, y in zip(got["predictions"], ref["predictions"]) if x != y)
    check(other <= 1, f"{other} test predictions differ from the reference's (at most 1)")
    check(got["accuracy"] >= 0.95, f"test accuracy {got['accuracy']:.4f} < 0.95")
    print(f"torch example: ok in {time.monotonic() - started:.1f} s: accuracy {100 * got['accuracy']:.2f}% "
          f"(reference {100 * ref['accuracy']:.2f}%), max |param - ref| {diff:.3g}, {other} predictions differ; "
          f"{epochs} epochs x {shards} shards ({samples.pop()} samples) each counted once per epoch; {victim} "
          f"killed at step {killed_at} and resumed from its checkpoint at step {resumed[0][1]}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="cohort-run")
    parser.add_argument("--library", required=True, help="libcohort.so for the workers")
    parser.add_argument("--python", default="/usr/bin/python3", help="the workers' interpreter (needs torch)")
    tools = parser.parse_args()
    for flag, path in (("--run", tools.run), ("--library", tools.library), ("--python", tools.python)):
        if not os.path.exists(path):
            parser.error(f"{flag}: no file at {path!r}")
    os.environ["COHORT_LIBRARY"] = tools.library
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    tools.launcher = None
    workdir = tempfile.mkdtemp(prefix="cohort-torch-example-")
    timed_out = threading.Event()

    def watchdog():
        timed_out.set()
        if tools.launcher is not None and tools.launcher.proc.poll() is None:
            tools.launcher.proc.kill()

    timer = threading.Timer(DEADLINE_S, watchdog)
    timer.start()
    try:
        run(tools, workdir)
        return 0
    except (CaseFailed, subprocess.TimeoutExpired) as e:
        print(f"torch example: FAILED: {e}", file=sys.stderr, flush=True)
        return 1
    except Exception as e:  # noqa: BLE001 - a crash of the test is a failure too
        why = f"watchdog fired after {DEADLINE_S} s" if timed_out.is_set() else repr(e)
        print(f"torch example: FAILED: {why}", file=sys.stderr, flush=True)
        return 1
    finally:
        timer.cancel()
        if tools.launcher is not None:
            if tools.launcher.proc.poll() is None:
                tools.launcher.proc.kill()
            tools.launcher.proc.wait()
            kill_leftovers(tools.launcher.url)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
