"""The data path from Python (cohort.data): the workload registry, and the
transfer scheduler reading real temporary files into bytearrays, numpy
arrays and a staging directory, steered by a Python policy and by a GPU
monitor on the simulated GPUs of tests/data/gpu/capi."""

import gc
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import weakref

import numpy as np

import _support
import cohort
from cohort.data import (PolicyAction, TransferResult, TransferScheduler, Workload,
                         WorkloadRegistry)

DATA = os.path.join(os.environ.get("COHORT_TEST_DATA") or
                    os.path.join(_support.HERE, "..", "data"), "gpu", "capi")
GPUS = "file:" + os.path.join(DATA, "gpus.yaml")
IO_RULES = os.path.join(DATA, "io_rules.yaml")
FILE_BYTES = 1 << 16


def pattern(offset, length):
    return bytes((offset + i) % 251 for i in range(length))


class Files(unittest.TestCase):
    """A temporary folder with data.bin (byte i is i % 251) and staging/."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cohort-data-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.path = os.path.join(self.dir, "data.bin")
        with open(self.path, "wb") as f:
            f.write(pattern(0, FILE_BYTES))
        self.staging = os.path.join(self.dir, "staging")
        os.mkdir(self.staging)


class Registry(unittest.TestCase):
    def test_add_update_find_list_remove(self):
        with WorkloadRegistry() as registry:
            registry.add(id="train", pid=os.getpid(), gpus=[1, 0], memory_bytes=60 << 30,
                         priority=10, dataset_files=["/data/a.tar"], model_files=["/m/llama.pt"],
                         access="random")
            registry.update("train", io_bytes_per_second=2.5e9, batch_size=256, epoch_seconds=1800)
            registry.observe_gpu_memory({os.getpid(): 123456789, 999999999: 5})
            w = registry.find("train")
            self.assertEqual(w, Workload(
                id="train", pid=os.getpid(), memory_bytes=60 << 30, gpus=(1, 0), priority=10,
                dataset_files=("/data/a.tar",), model_files=("/m/llama.pt",), access="random",
                io_bytes_per_second=2.5e9, batch_size=256, epoch_seconds=1800.0,
                gpu_memory={1: 123456789}, gpu_memory_total=123456789))
            self.assertIsNone(registry.find("eval"))
            self.assertEqual(len(registry), 1)
            # A Workload value, with figures, registers and reports them.
            registry.add(Workload(id="eval", pid=os.getpid(), memory_bytes=1, batch_size=8))
            self.assertEqual([x.id for x in registry.list()], ["eval", "train"])
            self.assertEqual(registry.find("eval").batch_size, 8)
            registry.remove("eval")
            self.assertEqual(len(registry), 1)

    def test_prune_drops_a_dead_process(self):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            with WorkloadRegistry() as registry:
                registry.add(id="child", pid=child.pid, memory_bytes=1)
                registry.add(id="me", pid=os.getpid(), memory_bytes=1)
                self.assertEqual(registry.prune(), [])
                child.kill()
                child.wait()
                self.assertEqual(registry.prune(), ["child"])
                self.assertEqual([w.id for w in registry.list()], ["me"])
                with self.assertRaisesRegex(cohort.NotFound, f"process {child.pid} is not running"):
                    registry.add(id="again", pid=child.pid, memory_bytes=1)
        finally:
            child.kill()
            child.wait()

    def test_alive_callable_and_monitor_memory(self):
        ended = set()
        with WorkloadRegistry(alive=lambda pid: pid == 4242 and pid not in ended) as registry, \
                cohort.GpuMonitor(GPUS, rules=IO_RULES) as monitor:
            registry.add(id="sim", pid=4242, gpus=[0], memory_bytes=1000)
            with self.assertRaisesRegex(cohort.NotFound, "the monitor has no sample yet"):
                registry.observe_gpu_memory(monitor)
            monitor.sample_now()
            registry.observe_gpu_memory(monitor)
            self.assertEqual(registry.find("sim").gpu_memory, {0: 70 << 30})
            ended.add(4242)
            self.assertIsNone(registry.find("sim"))
            self.assertEqual(len(registry), 0)

    def test_errors_name_the_field(self):
        with WorkloadRegistry() as registry:
            me = os.getpid()
            cases = [
                (dict(pid=me, memory_bytes=1), cohort.InvalidArgument, 'lacks the field "id"'),
                (dict(id="w", pid="1", memory_bytes=1), cohort.InvalidArgument,
                 'field "pid" must be a whole number'),
                (dict(id="w", pid=-3, memory_bytes=1), cohort.InvalidArgument,
                 "pid must be a process id > 0, got -3"),
                (dict(id="w", pid=me, memory_bytes=1, gpus=[0, 0]), cohort.InvalidArgument,
                 "gpus lists GPU 0 twice"),
                (dict(id="w", pid=me, memory_bytes=1, access="striped"), cohort.InvalidArgument,
                 'field "access" must be "sequential" or "random"'),
                (dict(id="w", pid=me, memory_bytes=1, gpu=[0]), cohort.InvalidArgument,
                 "unknown field 'gpu'"),
                (dict(id="w", pid=me, memory_bytes=object()), cohort.InvalidArgument,
                 "memory_bytes cannot be sent as JSON"),
            ]
            for fields, error, message in cases:
                with self.subTest(fields=fields):
                    with self.assertRaisesRegex(error, message):
                        registry.add(**fields)
            registry.add(id="w", pid=me, memory_bytes=1)
            with self.assertRaisesRegex(cohort.InvalidArgument, "'w' is already registered"):
                registry.add(id="w", pid=me, memory_bytes=1)
            with self.assertRaisesRegex(cohort.NotFound, "no workload 'x' is registered"):
                registry.update("x", batch_size=1)
            with self.assertRaisesRegex(cohort.InvalidArgument,
                                        "epoch_seconds must be a number >= 0, got -1"):
                registry.update("w", epoch_seconds=-1)
            with self.assertRaisesRegex(cohort.InvalidArgument, "epoch_seconds must be a number"):
                registry.update("w", epoch_seconds="1")
            with self.assertRaisesRegex(cohort.NotFound, "no workload 'x' is registered"):
                registry.remove("x")
            with self.assertRaisesRegex(cohort.InvalidArgument, "a GpuMonitor or a dict"):
                registry.observe_gpu_memory([1, 2])
            with self.assertRaisesRegex(cohort.InvalidArgument, "alive must be a callable"):
                WorkloadRegistry(alive=3)
        with self.assertRaisesRegex(cohort.InvalidArgument, "workload registry is closed"):
            registry.find("w")


class Scheduler(Files):
    def test_reads_into_bytearray_numpy_and_memoryview(self):
        with TransferScheduler(workers=2) as scheduler:
            raw = bytearray(1000)
            floats = np.zeros(250, dtype=np.float32)
            backing = bytearray(3000)
            view = memoryview(backing)[1000:2000]
            transfers = [scheduler.submit("raw", self.path, offset=7, buffer=raw),
                         scheduler.submit("floats", self.path, offset=2000, buffer=floats),
                         scheduler.submit("view", self.path, 500, offset=40000, buffer=view)]
            results = [t.wait(timeout=30) for t in transfers]
            self.assertTrue(all(r.ok for r in results), results)
            self.assertEqual(bytes(raw), pattern(7, 1000))
            self.assertEqual(floats.tobytes(), pattern(2000, 1000))
            self.assertEqual(bytes(backing[1000:1500]), pattern(40000, 500))
            self.assertEqual(bytes(backing[1500:]), bytes(1500))
            self.assertEqual([r.bytes for r in results], [1000, 1000, 500])
            self.assertIs(transfers[0].result(), results[0])
            self.assertTrue(transfers[0].done)
            self.assertIn("dispatch", [d.action for d in results[0].decisions])
            # The buffer is released once the transfer is done: it may grow.
            raw.extend(b"x")
            stats = scheduler.stats()
            self.assertEqual((stats.submitted, stats.completed, stats.failed, stats.bytes),
                             (3, 3, 0, 2500))

    def test_buffer_stays_referenced_until_done(self):
        done, results, asks = threading.Event(), [], []

        def policy(facts):
            asks.append(facts.id)
            if len(asks) == 2:  # at start: hold it a while
                return [PolicyAction("delay_transfer", rule="hold", delay=0.5)]
            return []

        def finished(r):
            results.append(r)
            done.set()

        with TransferScheduler(workers=1, policy=policy) as scheduler:
            array = np.zeros(1024, dtype=np.uint32)
            ref = weakref.ref(array)
            t = scheduler.submit("t", self.path, buffer=array, on_done=finished)
            del t, array
            gc.collect()
            self.assertIsNotNone(ref())  # neither the Transfer nor the array is ours now
            self.assertTrue(done.wait(30))
            self.assertTrue(results[0].ok, results[0].error)
            self.assertEqual(results[0].bytes, 4096)
            gc.collect()
            self.assertIsNone(ref())  # let go once done
            self.assertEqual(scheduler.explain("t")[0].action, "delay_transfer")

    def test_staging(self):
        with TransferScheduler(staging_dir=self.staging) as scheduler:
            r = scheduler.submit("shard/1", self.path, 3000, offset=1000, stage=True).wait(30)
            self.assertTrue(r.ok, r.error)
            self.assertEqual(os.path.dirname(r.staged), self.staging)
            self.assertTrue(r.staged.endswith("-shard_1"), r.staged)
            with open(r.staged, "rb") as f:
                self.assertEqual(f.read(), pattern(1000, 3000))
            self.assertEqual(scheduler.stats().staged, 1)

    def test_priority_and_aging_order(self):
        # One I/O thread, held by "gate" (its on_done waits) while the rest queue.
        order, release, started = [], threading.Event(), threading.Event()

        def finished(r):
            order.append(r.id)
            if r.id == "gate":
                started.set()
                release.wait(30)

        with TransferScheduler(workers=1, aging=1.0) as scheduler:
            gate = scheduler.submit("gate", self.path, 16, buffer=bytearray(16), on_done=finished)
            self.assertTrue(started.wait(30))
            old = scheduler.submit("old", self.path, 16, buffer=bytearray(16), on_done=finished)
            time.sleep(1.5)  # "old" (priority 0) ages past "new" (priority 1)
            for name, priority in (("new", 1), ("high", 5), ("low", -5)):
                scheduler.submit(name, self.path, 16, priority=priority, buffer=bytearray(16),
                                 on_done=finished)
            release.set()
            gate.wait(30)
            old.wait(30)
            deadline = time.monotonic() + 30
            while len(order) < 5 and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertEqual(order, ["gate", "high", "old", "new", "low"])
            high = [d for d in scheduler.explain("high") if d.action == "dispatch"][0]
            self.assertEqual(high.effect, "started ahead of 2 transfer(s) queued before it")
            self.assertEqual(high.values["priority"], 5)
            aged = [d for d in scheduler.explain("old") if d.action == "dispatch"][0]
            self.assertGreater(aged.values["waited_seconds"], 1.4)
            self.assertGreater(aged.values["effective"], 1.4)

    def test_python_policy(self):
        """A policy that boosts, holds once, stops prefetching and stages
        models: the order is y, z, w, x, then the prefetch p."""
        order, release, started = [], threading.Event(), threading.Event()
        starve = threading.Event()
        starve.set()
        asks = {}
        facts_seen = []

        def policy(facts):
            facts_seen.append(facts)
            asks[facts.id] = asks.get(facts.id, 0) + 1
            actions = []
            if facts.id == "y":
                actions.append(PolicyAction("prioritize", rule="boost_y", boost=50,
                                            category="memory", values={"gpu_memory": 91.5}))
            if facts.id == "x" and asks["x"] == 2:  # the second ask is at start
                actions.append({"type": "delay_transfer", "rule": "hold_x", "delay": 0.5,
                                "category": "thermal"})
            if starve.is_set():
                actions.append(PolicyAction("reduce_prefetch", rule="no_prefetch", factor=0.0,
                                            category="memory"))
            if facts.kind == "model":
                actions.append(PolicyAction("stage_transfer", rule="stage_models"))
            return actions

        def finished(r):
            order.append(r.id)
            if r.id == "gate":
                started.set()
                release.wait(30)

        with TransferScheduler(workers=1, prefetch_depth=4, staging_dir=self.staging,
                               policy=policy) as scheduler:
            bufs = {n: bytearray(256) for n in "gpxyzwm"}
            gate = scheduler.submit("gate", self.path, buffer=bufs["g"], on_done=finished)
            self.assertTrue(started.wait(30))
            t = {}
            for name, priority, prefetch in (("p", 100, True), ("x", 0, False), ("y", 0, False),
                                             ("z", 10, False), ("w", -5, False)):
                t[name] = scheduler.submit(name, self.path, buffer=bufs[name], priority=priority,
                                           prefetch=prefetch, on_done=finished)
            release.set()
            for name in ("x", "w"):
                t[name].wait(30)
            self.assertFalse(t["p"].done)
            stats = scheduler.stats()
            self.assertEqual((stats.prefetch_factor, stats.prefetch_depth, stats.queued), (0.0, 0, 1))
            starve.clear()
            self.assertTrue(t["p"].wait(30).ok)
            gate.wait(30)
            self.assertEqual(order, ["gate", "y", "z", "w", "x", "p"])

            y = t["y"].wait(30)
            boost = [d for d in y.decisions if d.action == "prioritize"][0]
            self.assertEqual((boost.rule, boost.effect, boost.values),
                             ("boost_y", "priority 0 -> 50 (boost 50)", {"gpu_memory": 91.5}))
            held = [d for d in scheduler.explain("x") if d.action == "delay_transfer"][0]
            self.assertEqual((held.rule, held.effect, held.delay_seconds),
                             ("hold_x", "held for 0.5 s", 0.5))
            waits = [d for d in t["p"].result().decisions if d.action == "reduce_prefetch"]
            self.assertIn("prefetch depth 4 x 0 = 0", waits[0].effect)

            model = scheduler.submit("m", self.path, kind="model", buffer=bufs["m"]).wait(30)
            self.assertTrue(model.ok)
            self.assertTrue(model.staged and os.path.exists(model.staged))
            self.assertEqual(bytes(bufs["m"]), bytes(256))  # left alone
            self.assertIn("stage_transfer", [d.action for d in model.decisions])

            stats = scheduler.stats()
            self.assertEqual((stats.prioritized, stats.delayed, stats.staged, stats.temperature_events),
                             (1, 1, 1, 1))
            self.assertAlmostEqual(stats.total_delay_seconds, 0.5)
            self.assertGreaterEqual(stats.prefetch_waits, 1)
            self.assertGreaterEqual(stats.memory_pressure_events, 2)
        p_facts = [f for f in facts_seen if f.id == "p"][0]
        self.assertEqual((p_facts.workload, p_facts.kind, p_facts.bytes, p_facts.priority,
                          p_facts.prefetch), ("", "dataset", 256, 100, True))

    def test_policy_exceptions_are_decisions(self):
        def policy(facts):
            if facts.id == "raises":
                raise ValueError("no GPU data")
            if facts.id == "bad-type":
                return [PolicyAction("slow_down")]
            if facts.id == "not-a-list":
                return 5
            return []

        with TransferScheduler(policy=policy) as scheduler:
            for name, message in (("raises", "ValueError: no GPU data"),
                                  ("bad-type", "type 'slow_down' is not an action"),
                                  ("not-a-list", "TypeError")):
                r = scheduler.submit(name, self.path, 8, buffer=bytearray(8)).wait(30)
                self.assertTrue(r.ok, r.error)
                failed = [d for d in r.decisions if d.action == "policy"]
                self.assertTrue(failed, r.decisions)
                self.assertIn(message, failed[0].effect)
                self.assertIn("no rule applied", failed[0].effect)

    def test_monitor_policy_and_registry(self):
        with WorkloadRegistry() as registry, cohort.GpuMonitor(GPUS, rules=IO_RULES) as monitor:
            monitor.sample_now()
            registry.add(id="train", pid=os.getpid(), memory_bytes=1, priority=7)
            with TransferScheduler(registry=registry, policy=monitor) as scheduler:
                with self.assertRaisesRegex(cohort.InvalidArgument, "close the scheduler first"):
                    registry.close()
                with self.assertRaisesRegex(cohort.NotFound, "workload 'eval' is not registered"):
                    scheduler.submit("e", self.path, 8, buffer=bytearray(8), workload="eval")
                r = scheduler.submit("m", self.path, 128, buffer=bytearray(128), workload="train",
                                     kind="model", priority=3).wait(30)
                self.assertTrue(r.ok, r.error)
                dispatch = [d for d in r.decisions if d.action == "dispatch"][0]
                self.assertEqual(dispatch.values["priority"], 10)
                stats = scheduler.stats()
                self.assertEqual((stats.prefetch_factor, stats.prefetch_depth), (0.25, 2))

    def test_deadline_timeout_and_shutdown(self):
        holds = {}

        def policy(facts):
            holds[facts.id] = holds.get(facts.id, 0) + 1
            if facts.id == "held" and holds["held"] == 2:
                return [PolicyAction("delay_transfer", delay=0.5)]
            return []

        scheduler = TransferScheduler(workers=1, policy=policy)
        late = scheduler.submit("late", self.path, 8, buffer=bytearray(8), deadline=0).wait(30)
        self.assertTrue(late.ok and late.missed_deadline)
        self.assertIn("deadline", [d.action for d in late.decisions])
        held = scheduler.submit("held", self.path, 8, buffer=bytearray(8))
        with self.assertRaisesRegex(cohort.Timeout, "transfer 'held' has not finished after 0.05 s"):
            held.wait(timeout=0.05)
        with self.assertRaisesRegex(cohort.InvalidArgument, "transfer 'held' has not finished"):
            held.result()
        scheduler.close()
        r = held.wait(5)
        self.assertEqual(r.code, cohort.Closed.code)
        self.assertIn("the scheduler shut down before it started", r.error)
        with self.assertRaises(cohort.Closed):
            r.check()
        self.assertEqual(scheduler.closed, True)
        with self.assertRaisesRegex(cohort.InvalidArgument, "transfer scheduler is closed"):
            scheduler.stats()

    def test_closed_from_its_own_callback(self):
        # The destructor joins the I/O threads: from one of them it is run elsewhere.
        closed = threading.Event()
        scheduler = TransferScheduler(workers=1)

        def finished(_r):
            scheduler.close()
            closed.set()

        t = scheduler.submit("a", self.path, 8, buffer=bytearray(8), on_done=finished)
        self.assertTrue(closed.wait(30))
        self.assertTrue(t.wait(timeout=float("inf")).ok)
        self.assertTrue(scheduler.closed)

    def test_errors(self):
        with self.assertRaisesRegex(cohort.InvalidArgument, "workers must be 1 to 256"):
            TransferScheduler(workers=0)
        with self.assertRaisesRegex(cohort.InvalidArgument, "aging_per_second must be more than 0"):
            TransferScheduler(aging=0)
        with self.assertRaisesRegex(cohort.InvalidArgument, "workers must be an integer"):
            TransferScheduler(workers="2")
        with self.assertRaisesRegex(cohort.InvalidArgument, "is not a directory"):
            TransferScheduler(staging_dir=os.path.join(self.dir, "nope"))
        with self.assertRaisesRegex(cohort.InvalidArgument, "policy must be a GpuMonitor or a callable"):
            TransferScheduler(policy=3)
        with self.assertRaisesRegex(cohort.InvalidArgument, "registry must be a"):
            TransferScheduler(registry="r")
        with TransferScheduler() as scheduler:
            with self.assertRaisesRegex(cohort.InvalidArgument,
                                        "transfer 'a': buffer holds 8 bytes, fewer than length 16"):
                scheduler.submit("a", self.path, 16, buffer=bytearray(8))
            with self.assertRaisesRegex(cohort.InvalidArgument, "buffer is read-only"):
                scheduler.submit("a", self.path, 8, buffer=b"12345678")
            with self.assertRaisesRegex(cohort.InvalidArgument, "buffer must support the buffer"):
                scheduler.submit("a", self.path, 8, buffer=[0] * 8)
            with self.assertRaisesRegex(cohort.InvalidArgument, "not C-contiguous"):
                scheduler.submit("a", self.path, 8, buffer=np.zeros((4, 4))[:, 0])
            with self.assertRaisesRegex(cohort.InvalidArgument, "give length"):
                scheduler.submit("a", self.path)
            with self.assertRaisesRegex(cohort.InvalidArgument, "transfer 'a': no destination"):
                scheduler.submit("a", self.path, 8)
            with self.assertRaisesRegex(cohort.InvalidArgument, "transfer 'a': length is 0"):
                scheduler.submit("a", self.path, 0, buffer=bytearray(8))
            with self.assertRaisesRegex(cohort.InvalidArgument, "transfer 'a': offset must be an integer"):
                scheduler.submit("a", self.path, 8, offset=1.5, buffer=bytearray(8))
            with self.assertRaisesRegex(cohort.InvalidArgument, "field \"kind\" must be a string"):
                scheduler.submit("a", self.path, 8, kind=3, buffer=bytearray(8))
            with self.assertRaisesRegex(cohort.InvalidArgument, "stage is set, but the scheduler has no"):
                scheduler.submit("a", self.path, 8, stage=True)
            with self.assertRaisesRegex(cohort.InvalidArgument, "on_done must be a callable"):
                scheduler.submit("a", self.path, 8, buffer=bytearray(8), on_done=1)
            with self.assertRaisesRegex(cohort.NotFound, "no transfer 'nope' is queued or running"):
                scheduler.explain("nope")
            # A buffer refused is released: the bytearray can grow again.
            buf = bytearray(8)
            with self.assertRaises(cohort.InvalidArgument):
                scheduler.submit("a", self.path, 16, buffer=buf)
            buf.extend(b"more")
            r = scheduler.submit("short", self.path, 64, offset=FILE_BYTES - 10,
                                 buffer=bytearray(64)).wait(30)
            self.assertEqual(r.code, cohort.FileError.code)
            self.assertIn("the file ends after 10 of the 64 bytes asked for", r.error)
            with self.assertRaisesRegex(cohort.FileError, "at offset 65526"):
                r.check()
            self.assertEqual(scheduler.stats().failed, 1)
            with self.assertRaisesRegex(cohort.InvalidArgument, "timeout must be a positive"):
                scheduler.submit("b", self.path, 8, buffer=bytearray(8)).wait(timeout=0)


class Module(unittest.TestCase):
    def test_public_names(self):
        import cohort.data as data
        for name in ("WorkloadRegistry", "Workload", "TransferScheduler", "Transfer",
                     "TransferResult", "TransferStats", "PolicyAction", "TransferFacts"):
            self.assertTrue(hasattr(data, name), name)
        self.assertIs(cohort.data.TransferResult, TransferResult)


if __name__ == "__main__":
    unittest.main()
