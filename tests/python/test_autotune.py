"""Autotuning from Python: a communicator's tuning by field name, and the
Autotuner on two ranks (threads, then processes, meeting in a file:// store): both apply the
same values at the same steps, a parameter added from Python reaches the
optimum of a synthetic throughput within the stated bound, a fixed value
never moves, the state file round-trips and a damaged one is named."""

import json
import os
import subprocess
import sys
import tempfile
import threading
import unittest

import _support  # noqa: F401  (puts cohort on sys.path)
import cohort

DEPTHS = [1, 2, 4, 8, 16, 32]
SCORES = {1: 80.0, 2: 90.0, 4: 100.0, 8: 90.0, 16: 80.0, 32: 70.0}  # peak at 4


def run_ranks(size, body):
    results, errors = [None] * size, [None] * size
    with tempfile.TemporaryDirectory(prefix="cohort-tune-") as folder:
        def rank_main(rank):
            try:
                with cohort.Communicator(rank, size, "file://" + folder, address="127.0.0.1",
                                         timeout=20, connect_timeout=20, shm_size=0) as comm:
                    results[rank] = body(comm)
            except BaseException as exc:
                errors[rank] = exc
        threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            if t.is_alive():
                raise AssertionError("a rank hung")
    for rank, exc in enumerate(errors):
        if exc is not None:
            raise AssertionError(f"rank {rank} failed: {exc!r}") from exc
    return results


class CommTuningTest(unittest.TestCase):
    def test_read_and_change(self):
        with cohort.Communicator(0, 1) as comm:
            t = cohort.comm_tuning(comm)
            self.assertEqual(t["doubling_max"], 64 << 10)
            self.assertEqual(t["fusion_threshold"], 64 << 20)
            self.assertEqual(comm.choose(200000), "ring")
            cohort.set_comm_tuning(comm, doubling_max=1 << 20)
            self.assertEqual(comm.choose(200000), "doubling")
            with self.assertRaisesRegex(cohort.InvalidArgument, "tuning.pipeline_chunk 100"):
                cohort.set_comm_tuning(comm, pipeline_chunk=100)
            with self.assertRaisesRegex(cohort.InvalidArgument, "'chunk' is no tuning field"):
                cohort.set_comm_tuning(comm, chunk=4096)
            self.assertEqual(cohort.comm_tuning(comm)["pipeline_chunk"], 128 << 10)


class AutotunerTest(unittest.TestCase):
    def test_two_ranks_agree_and_find_the_optimum(self):
        def body(comm):
            depth = {"now": None, "log": []}

            def apply(v):
                depth["now"] = v
                depth["log"].append(v)

            fixed_log = []
            tuner = cohort.Autotuner(
                comm, job_id="py-job", warmup_steps=1, settle_steps=0, samples=1, max_steps=200,
                fixed={"fusion_threshold": 1 << 20},
                parameters=[cohort.TunableParameter("depth", DEPTHS, 8, apply),
                            cohort.TunableParameter("kept", [1, 2], 1, fixed_log.append,
                                                    fixed=True)])
            bound = tuner.step_bound
            history = []
            steps = 0
            frozen = False
            while not frozen and steps < 500:
                changed, frozen = tuner.step(SCORES[int(depth["now"])])
                steps += 1
                history.append((steps, depth["now"], cohort.comm_tuning(comm)["doubling_max"]))
            self.assertEqual(cohort.comm_tuning(comm)["fusion_threshold"], 1 << 20)
            self.assertEqual(fixed_log, [1.0])
            report = tuner.report()
            tuner.close()
            return bound, steps, history, depth["log"], report

        (bound0, steps0, hist0, log0, rep0), (_, steps1, hist1, log1, _) = run_ranks(2, body)
        self.assertGreater(bound0, 0)
        self.assertLessEqual(steps0, bound0)
        self.assertEqual(hist0, hist1)  # same values at the same steps
        self.assertEqual(log0, log1)
        self.assertEqual(hist0[-1][1], 4.0)
        self.assertTrue(rep0["frozen"])
        self.assertEqual(rep0["best"]["values"]["depth"], 4.0)

    def test_state_file_and_errors(self):
        with tempfile.TemporaryDirectory() as folder, cohort.Communicator(0, 1) as comm:
            path = os.path.join(folder, "state.json")
            now = {"depth": None}

            def make():
                return cohort.Autotuner(
                    comm, job_id="py-state", warmup_steps=0, settle_steps=0, samples=1,
                    state_file=path,
                    parameters=[cohort.TunableParameter("depth", DEPTHS, 8,
                                                        lambda v: now.__setitem__("depth", v))])

            with make() as tuner:
                frozen = False
                while not frozen:
                    _, frozen = tuner.step(SCORES[int(now["depth"])])
            self.assertTrue(os.path.exists(path))
            with make() as tuner:
                self.assertTrue(tuner.frozen)
                self.assertEqual(tuner.value("depth"), 4.0)
            with open(path, "w") as f:
                f.write("[1, 2")
            with make() as tuner:
                self.assertFalse(tuner.frozen)
                self.assertEqual(now["depth"], 8.0)
                notes = tuner.report()["notes"]
                self.assertTrue(any(path in n and "is damaged" in n for n in notes), notes)
                with self.assertRaisesRegex(cohort.NotFound, "no parameter 'nope'"):
                    tuner.value("nope")

            def boom(v):
                raise ValueError("no such depth")
            with self.assertRaisesRegex(ValueError, "no such depth"):
                cohort.Autotuner(comm, parameters=[cohort.TunableParameter("d", DEPTHS, 8, boom)])
            with self.assertRaisesRegex(cohort.InvalidArgument, "initial value 3 is not one"):
                cohort.Autotuner(comm, parameters=[cohort.TunableParameter("d", DEPTHS, 3, print)])
            with self.assertRaisesRegex(cohort.InvalidArgument, "search must be one of"):
                cohort.Autotuner(comm, search="random")


# One rank as a process: tunes "depth" against SCORES with a real
# all-reduce per step and prints, as JSON, the values in force after each step.
RANK_PROCESS = r"""
import json, sys
import cohort
rank, folder = int(sys.argv[1]), sys.argv[2]
scores = {1: 80.0, 2: 90.0, 4: 100.0, 8: 90.0, 16: 80.0, 32: 70.0}
now = {}
with cohort.Communicator(rank, 2, "file://" + folder, address="127.0.0.1", timeout=30,
                         connect_timeout=30) as comm:
    tuner = cohort.Autotuner(comm, job_id="procs", warmup_steps=1, settle_steps=0, samples=1,
                             parameters=[cohort.TunableParameter(
                                 "depth", [1, 2, 4, 8, 16, 32], 8,
                                 lambda v: now.__setitem__("depth", v))])
    steps, frozen = [], False
    data = bytearray(4096)
    while not frozen and len(steps) < 400:
        comm.allreduce(data)
        _, frozen = tuner.step(scores[int(now["depth"])])
        steps.append([now["depth"], cohort.comm_tuning(comm)])
    print(json.dumps({"steps": steps, "bound": tuner.step_bound, "frozen": frozen}))
"""


class ProcessesTest(unittest.TestCase):
    def test_two_processes_switch_together(self):
        with tempfile.TemporaryDirectory(prefix="cohort-tune-procs-") as folder:
            env = _support.child_env(COHORT_AUTOTUNE_DIR="")
            procs = [subprocess.Popen([sys.executable, "-c", RANK_PROCESS, str(r), folder],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
                     for r in range(2)]
            outs = []
            try:
                for p in procs:
                    out, err = p.communicate(timeout=120)
                    self.assertEqual(p.returncode, 0, err.decode(errors="replace"))
                    outs.append(json.loads(out))
            finally:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
        zero, one = outs
        self.assertTrue(zero["frozen"] and one["frozen"])
        self.assertEqual(zero["steps"], one["steps"])  # same values, same steps
        self.assertLessEqual(len(zero["steps"]), zero["bound"])
        self.assertEqual(zero["steps"][-1][0], 4.0)


if __name__ == "__main__":
    unittest.main()
