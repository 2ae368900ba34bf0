"""GPUs from Python: probes, samples, the monitor and its rule-pack answers,
on the simulated GPUs of tests/data/gpu/capi."""

import math
import os
import time
import unittest

import _support
import cohort

DATA = os.path.join(os.environ.get("COHORT_TEST_DATA") or
                    os.path.join(_support.HERE, "..", "data"), "gpu", "capi")
GPUS = "file:" + os.path.join(DATA, "gpus.yaml")
IO_RULES = os.path.join(DATA, "io_rules.yaml")
GIB = 1 << 30


class Backends(unittest.TestCase):
    def test_lists_every_backend(self):
        backends = cohort.gpu_backends(deadline=1.0)
        self.assertEqual([b.backend for b in backends], ["nvml", "nvidia-smi", "file", "none"])
        self.assertEqual(backends[2], cohort.BackendInfo("file", True, ""))
        nvml = backends[0]
        if not nvml.available:
            self.assertIn("libnvidia-ml.so.1", nvml.reason)

    def test_bad_deadline(self):
        for bad in (0, -1, math.nan, math.inf):
            with self.assertRaisesRegex(cohort.InvalidArgument, "deadline must be a positive number"):
                cohort.gpu_backends(deadline=bad)
        with self.assertRaisesRegex(cohort.InvalidArgument, "not str"):
            cohort.gpu_backends(deadline="2s")


class Probe(unittest.TestCase):
    def test_sample_from_a_file(self):
        with cohort.GpuProbe(GPUS) as probe:
            self.assertEqual(probe.backend, GPUS)
            self.assertEqual(probe.selection, [cohort.BackendChoice(GPUS, True, "")])
            sample = probe.sample()
        self.assertEqual(sample["backend"], GPUS)
        self.assertEqual((sample["health"], sample["stale"], sample["error"]), ("ok", False, ""))
        self.assertLess(abs(sample["time"] - time.time()), 60)
        gpu0, gpu1 = sample["gpus"]
        self.assertEqual((gpu0["index"], gpu0["name"]), (0, "Sim A100"))
        self.assertEqual(gpu0["memory_total_bytes"], 80 * GIB)
        self.assertEqual(gpu0["memory_used_percent"], 90.0)
        self.assertEqual(gpu0["processes"], [{"pid": 4242, "name": "python", "memory_bytes": 70 * GIB}])
        # Missing values are states, never zeros.
        self.assertEqual(gpu1["power_draw_watts"], {"state": "not_available"})
        self.assertEqual(gpu1["fan_percent"], {"state": "not_supported"})
        self.assertEqual(gpu1["temperature_celsius"], 91.0)

    def test_summary(self):
        summary = cohort.GpuProbe(GPUS).summary()
        self.assertEqual((summary.gpu_count, summary.health, summary.stale), (2, "ok", False))
        self.assertEqual((summary.memory_used, summary.memory_total), (80 * GIB, 160 * GIB))
        self.assertEqual(summary.process_count, 1)
        self.assertEqual(summary.max_memory_used_percent, 90.0)
        self.assertEqual(summary.max_temperature_celsius, 91.0)
        self.assertEqual(summary.max_power_watts, 300.5)
        empty = cohort.GpuProbe("none").summary()
        self.assertEqual(empty.gpu_count, 0)
        self.assertIsNone(empty.max_temperature_celsius)

    def test_auto_reports_why_backends_were_passed_over(self):
        probe = cohort.GpuProbe(deadline=1.0)
        self.assertEqual(probe.selection[0].backend, "nvml")
        self.assertEqual(sum(c.chosen for c in probe.selection), 1)
        chosen = next(c for c in probe.selection if c.chosen)
        self.assertEqual(chosen.backend, probe.backend)
        for passed_over in probe.selection[:-1]:
            self.assertFalse(passed_over.chosen)
            self.assertTrue(passed_over.reason)

    def test_named_backend_unavailable(self):
        try:
            cohort.GpuProbe("nvml", deadline=1.0).close()
        except cohort.Unavailable as e:
            self.assertIn("libnvidia-ml.so.1", str(e))

    def test_open_errors(self):
        with self.assertRaisesRegex(cohort.InvalidArgument, "unknown GPU backend 'cuda'"):
            cohort.GpuProbe("cuda")
        with self.assertRaisesRegex(cohort.FileError, "/nonexistent/gpus.yaml"):
            cohort.GpuProbe("file:/nonexistent/gpus.yaml")
        with self.assertRaisesRegex(cohort.ParseError, r"bad\.yaml:5:.*is more than memory_total"):
            cohort.GpuProbe("file:" + os.path.join(DATA, "bad.yaml"))
        with self.assertRaisesRegex(cohort.InvalidArgument, "deadline must be a positive number"):
            cohort.GpuProbe("none", deadline=0)
        with self.assertRaisesRegex(cohort.InvalidArgument, "spec must be a str"):
            cohort.GpuProbe(42)
        probe = cohort.GpuProbe("none")
        probe.close()
        with self.assertRaisesRegex(cohort.InvalidArgument, "this GPU probe is closed"):
            probe.sample()

    def test_failing_and_hanging_backends_do_not_raise(self):
        sample = cohort.GpuProbe("file:" + os.path.join(DATA, "failing.yaml")).sample()
        self.assertEqual((sample["health"], sample["stale"]), ("failed", True))
        self.assertIn("simulated driver failure", sample["error"])
        probe = cohort.GpuProbe("file:" + os.path.join(DATA, "hanging.yaml"), deadline=0.2)
        begin = time.monotonic()
        sample = probe.sample()
        self.assertLess(time.monotonic() - begin, 2.0)  # the backend hangs for 3 s
        self.assertEqual((sample["health"], sample["stale"]), ("unresponsive", True))
        self.assertIn("did not answer within 0.2s", sample["error"])
        begin = time.monotonic()
        probe.close()
        self.assertLess(time.monotonic() - begin, 1.0)


class Monitor(unittest.TestCase):
    def test_history_and_stats(self):
        probe = cohort.GpuProbe(GPUS)
        with cohort.GpuMonitor(probe, interval=0.02, history=4, rules=IO_RULES) as monitor:
            # The probe's backend moved into the monitor.
            self.assertEqual(monitor.probe.backend, GPUS)
            with self.assertRaisesRegex(cohort.InvalidArgument, "moved into a monitor"):
                probe.sample()
            self.assertIsNone(monitor.latest())
            self.assertIsNone(monitor.summary())
            self.assertEqual(monitor.history(0), [])
            self.assertEqual(monitor.stats(0, "gpu_memory"), cohort.WindowStats(0, None, None, None))
            for _ in range(6):
                sample = monitor.sample_now()
            self.assertEqual(sample["health"], "ok")
            self.assertEqual(monitor.latest()["gpus"][1]["temperature_celsius"], 91.0)
            self.assertEqual(monitor.summary().max_memory_used_percent, 90.0)
            history = monitor.history(1)
            self.assertEqual(len(history), 4)  # bounded
            times = [t for t, _ in history]
            self.assertEqual(times, sorted(times))
            self.assertEqual(history[-1][1]["index"], 1)
            self.assertEqual(monitor.stats(0, "memory_used_percent"), cohort.WindowStats(4, 90.0, 90.0, 90.0))
            self.assertEqual(monitor.stats(1, "temperature", window=3600).max, 91.0)
            self.assertEqual(monitor.stats(1, "power").count, 0)  # GPU 1 cannot say
            with self.assertRaisesRegex(cohort.NotFound, "no GPU with index 7 in the latest sample"):
                monitor.history(7)
            with self.assertRaisesRegex(cohort.InvalidArgument, "unknown metric 'watts'"):
                monitor.stats(0, "watts")
            with self.assertRaisesRegex(cohort.InvalidArgument, "window"):
                monitor.stats(0, "power", window=-1)

    def test_background_sampling(self):
        with cohort.GpuMonitor(GPUS, interval=0.02) as monitor:
            self.assertFalse(monitor.running)
            monitor.start()
            monitor.start()  # a no-op
            self.assertTrue(monitor.running)
            deadline = time.monotonic() + 10
            while len(monitor.history(0)) < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertGreaterEqual(len(monitor.history(0)), 3)
            monitor.stop()
            self.assertFalse(monitor.running)
        with self.assertRaisesRegex(cohort.InvalidArgument, "this GPU monitor is closed"):
            monitor.start()

    def test_rule_pack_answers(self):
        with cohort.GpuMonitor(GPUS, rules=IO_RULES) as monitor:
            self.assertEqual(monitor.prefetch_factor(), 0.25)
            self.assertEqual(monitor.transfer_delay(2 * GIB, "dataset"), 12.0)
            self.assertEqual(monitor.transfer_delay(2 * GIB, "model"), 3.0)
            self.assertEqual(monitor.transfer_delay(100, "model"), 0.0)
            with self.assertRaisesRegex(cohort.InvalidArgument, "size must be in"):
                monitor.transfer_delay(-1, "model")
        with cohort.GpuMonitor(GPUS) as shipped:  # rules/gpu_io.yaml
            self.assertEqual(shipped.prefetch_factor(), 0.5)
            self.assertEqual(shipped.transfer_delay(GIB, "model"), 30.0)
            # The shipped hold is for transfers of priority below 10 only.
            self.assertEqual(shipped.transfer_delay(GIB, "model", priority=9), 30.0)
            self.assertEqual(shipped.transfer_delay(GIB, "model", priority=10, prefetch=True), 0.0)
            with self.assertRaisesRegex(cohort.InvalidArgument, "priority must be in"):
                shipped.transfer_delay(GIB, "model", priority=2**31)
            with self.assertRaisesRegex(cohort.InvalidArgument, "prefetch must be True or False"):
                shipped.transfer_delay(GIB, "model", prefetch=1)

    def test_publish_into_a_context(self):
        expr = cohort.Expression("gpu_memory > 85 AND gpu1.temperature > 90")
        context = expr.context()
        with cohort.GpuMonitor(GPUS) as monitor:
            monitor.publish(context)  # before any sample: nothing set
            self.assertIsNone(context.get("gpu_memory"))
            monitor.sample_now()
            monitor.publish(context)
            self.assertEqual(context.get("gpu_memory"), 90.0)
            with self.assertRaisesRegex(cohort.InvalidArgument, "context must be a cohort.Context"):
                monitor.publish({"gpu_memory": 1})

    def test_create_errors(self):
        probe = cohort.GpuProbe(GPUS)
        with self.assertRaisesRegex(cohort.InvalidArgument, "interval must be a positive number"):
            cohort.GpuMonitor(probe, interval=0)
        with self.assertRaisesRegex(cohort.InvalidArgument, "history must be at least 1"):
            cohort.GpuMonitor(probe, history=0)
        with self.assertRaisesRegex(cohort.FileError, "/nonexistent/rules.yaml"):
            cohort.GpuMonitor(probe, rules="/nonexistent/rules.yaml")
        with self.assertRaisesRegex(cohort.ParseError, "needs a parameter 'factor'"):
            cohort.GpuMonitor(probe, rules=os.path.join(DATA, "no_factor.yaml"))
        self.assertEqual(probe.sample()["health"], "ok")  # still usable
        with self.assertRaisesRegex(cohort.InvalidArgument, "probe must be a GpuProbe or a spec"):
            cohort.GpuMonitor(42)

    def test_spec_of_a_missing_backend(self):
        smi = next(b for b in cohort.gpu_backends(1.0) if b.backend == "nvidia-smi")
        if smi.available:
            self.skipTest("nvidia-smi is installed here")
        with self.assertRaises(cohort.Unavailable) as raised:
            cohort.GpuMonitor("smi", deadline=1.0)
        self.assertIn(smi.reason, str(raised.exception))


if __name__ == "__main__":
    unittest.main()
