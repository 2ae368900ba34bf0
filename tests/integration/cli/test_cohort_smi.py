"""cohort-smi end to end: the binary run as a user runs it.

Needs COHORT_SMI (the binary), COHORT_SOURCE (the source tree: examples/,
tests/fixtures/fake_smi/) and COHORT_TEST_DATA (tests/data; the simulated
GPUs are in its gpu/capi folder, the nvidia-smi fixtures in gpu/smi).
"""
import json
import os
import re
import signal
import subprocess
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("COHORT_SOURCE") or os.path.normpath(os.path.join(HERE, "..", "..", ".."))
SMI = os.environ.get("COHORT_SMI", os.path.join(SOURCE, "build", "examples", "cohort-smi"))
DATA = os.environ.get("COHORT_TEST_DATA") or os.path.join(SOURCE, "tests", "data")
CLI_GPUS = "file:" + os.path.join(DATA, "gpu", "capi", "cli.yaml")
FAILING = "file:" + os.path.join(DATA, "gpu", "capi", "failing.yaml")
FAKE_SMI = os.path.join(SOURCE, "tests", "fixtures", "fake_smi")
SAMPLE_KEYS = {"time", "backend", "health", "stale", "error", "latency_seconds", "gpus"}


def run(*args, timeout=60, env=None):
    """Runs cohort-smi from the source tree, as the README's example does."""
    return subprocess.run([SMI, *args], capture_output=True, text=True, timeout=timeout, cwd=SOURCE,
                          env=None if env is None else {**os.environ, **env})


class HelpAndUsage(unittest.TestCase):
    def test_help_documents_every_flag(self):
        result = run("--help")
        self.assertEqual(result.returncode, 0, result.stderr)
        for word in ["--backend SPEC", "file:PATH", "--json", "--watch SECONDS", "--count N",
                     "--deadline SECONDS", "n/s", "not supported", "Exit status"]:
            self.assertIn(word, result.stdout)
        # Every flag the parser accepts appears in the help.
        source = ""
        for part in (("cohort_smi", "options.cpp"), ("common", "args.hpp")):
            with open(os.path.join(SOURCE, "examples", *part)) as f:
                source += f.read()
        flags = set(re.findall(r'arg == "(--?[a-z-]+)"', source))
        self.assertGreaterEqual(len(flags), 13)
        for flag in flags:
            self.assertIn(flag, result.stdout, f"{flag} is accepted but not in --help")

    def test_version(self):
        result = run("--version")
        self.assertEqual(result.returncode, 0)
        self.assertRegex(result.stdout, r"^cohort-smi \d+\.\d+\.\d+\n$")

    def test_bad_usage_exits_2(self):
        cases = [
            (["--count", "3"], "--count needs --watch SECONDS"),
            (["--backend", "cuda"], "--backend: expected auto, nvml, smi, none or file:PATH, got 'cuda'"),
            (["--backend", "file:"], "got 'file:'"),
            (["--watch", "0"], "--watch: expected a positive number of seconds"),
            (["--watch", "soon"], "got 'soon'"),
            (["--watch", "1", "--count", "-1"], "--count: expected a positive whole number"),
            (["--deadline", "nan"], "--deadline: expected a positive number"),
            (["--backend"], "--backend needs a value"),
            (["--colour"], "unknown option '--colour'"),
            (["nvml"], "unexpected argument 'nvml'"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                result = run(*args)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(message, result.stderr)
                self.assertTrue(result.stderr.startswith("cohort-smi: "))
                self.assertEqual(result.stdout, "")


class Table(unittest.TestCase):
    def test_example_file_works_without_gpus(self):
        result = run("--backend", "file:examples/gpus.yaml")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertIn("backend file:examples/gpus.yaml", lines[0])
        self.assertRegex(lines[1], r"^\[0\] NVIDIA H100 80GB HBM3 \| 50°C,  35 % \| +10240 / 81920 MiB \( 12 %\) "
                                   r"\| +120 / 700 W \| python/4242\(9216MiB\)$")
        self.assertRegex(lines[2], r"^\[1\] NVIDIA H100 80GB HBM3 \| 41°C,  10 % \| +4096 / 81920 MiB \(  5 %\) "
                                   r"\| +95 / 700 W \|$")
        self.assertIn("    MIG 1/0 ", result.stdout)
        self.assertEqual(result.stderr, "")

    def test_missing_values_are_marked(self):
        result = run("--backend", CLI_GPUS)
        self.assertEqual(result.returncode, 0, result.stderr)
        gpu0, gpu1 = [line for line in result.stdout.splitlines() if line.startswith("[")]
        self.assertRegex(gpu0, r"^\[0\] Sim T4 \|  n/s,  50 % \| +4096 / 16384 MiB \( 25 %\) \| +35 / 70 W \| -$")
        self.assertRegex(gpu1, r"^\[1\] Sim T4 \| 77°C,     - \| +12288 / 16384 MiB \( 75 %\) \| +n/s / 70 W "
                               r"\| trainer/77\(-\)$")
        self.assertRegex(result.stdout, r"\n    Xid 48 at \d\d:\d\d:\d\d: double-bit ECC error\n")

    def test_auto_says_why_backends_were_passed_over(self):
        result = run("--backend", "auto", "--deadline", "1")
        self.assertEqual(result.returncode, 0, result.stderr)
        header = result.stdout.splitlines()[0]
        chosen = re.search(r"backend (\S+) \(", header).group(1)
        self.assertIn(chosen, ("nvml", "nvidia-smi", "none"))
        if chosen != "nvml":
            self.assertRegex(result.stdout, r"\n  auto passed over nvml: .+\n")
        if chosen == "none":
            self.assertIn("libnvidia-ml.so.1", result.stdout)
            self.assertRegex(result.stdout, r"\n  auto passed over nvidia-smi: .+\n")
            self.assertIn("  no GPUs\n", result.stdout)

    def test_failed_sample_exits_1(self):
        result = run("--backend", FAILING)
        self.assertEqual(result.returncode, 1)
        self.assertIn("  warning: failed: simulated driver failure\n", result.stdout)
        self.assertIn(f"cohort-smi: no new sample from {FAILING}: simulated driver failure", result.stderr)


class Json(unittest.TestCase):
    def test_one_sample(self):
        result = run("--backend", CLI_GPUS, "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.count("\n"), 1)
        sample = json.loads(result.stdout)
        self.assertEqual(set(sample), SAMPLE_KEYS)
        self.assertEqual((sample["backend"], sample["health"], sample["stale"]), (CLI_GPUS, "ok", False))
        gpu0, gpu1 = sample["gpus"]
        self.assertEqual(gpu0["temperature_celsius"], {"state": "not_supported"})
        self.assertEqual(gpu0["processes"], {"state": "not_available"})
        self.assertEqual(gpu1["memory_used_percent"], 75.0)
        self.assertEqual(gpu1["xid_events"][0]["xid"], 48)

    def test_auto_rejections_go_to_stderr(self):
        result = run("--json", "--deadline", "1")
        self.assertEqual(result.returncode, 0, result.stderr)
        sample = json.loads(result.stdout)
        if sample["backend"] != "nvml":
            self.assertIn("cohort-smi: auto passed over nvml: ", result.stderr)


class Watch(unittest.TestCase):
    def test_count_bounds_the_samples(self):
        result = run("--backend", CLI_GPUS, "--json", "--watch", "0.05", "--count", "3")
        self.assertEqual(result.returncode, 0, result.stderr)
        samples = [json.loads(line) for line in result.stdout.splitlines()]
        self.assertEqual(len(samples), 3)
        times = [s["time"] for s in samples]
        self.assertEqual(times, sorted(times))
        self.assertGreaterEqual(times[-1] - times[0], 0.09)
        # The Xid is reported once, by the first sample only.
        self.assertEqual([len(s["gpus"][1]["xid_events"]) for s in samples], [1, 0, 0])

    def test_table_refreshes(self):
        result = run("--backend", CLI_GPUS, "-w", "0.05", "-n", "2")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.count("backend file:"), 2)
        self.assertEqual(result.stdout.count("\n[0] Sim T4"), 2)

    def test_interrupt_ends_the_watch(self):
        child = subprocess.Popen([SMI, "--backend", CLI_GPUS, "--json", "--watch", "0.05"], cwd=SOURCE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(0.5)
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=10)
        finally:
            child.kill()
        self.assertEqual(child.returncode, 0, err)
        self.assertGreaterEqual(len(out.splitlines()), 2)
        for line in out.splitlines():
            self.assertEqual(set(json.loads(line)), SAMPLE_KEYS)


class NamedBackends(unittest.TestCase):
    def test_nvml_fails_with_the_reason(self):
        result = run("--backend", "nvml")
        if result.returncode == 0:
            self.assertIn("backend nvml (", result.stdout)  # a machine with a driver
            return
        self.assertEqual(result.returncode, 1)
        self.assertIn("cohort-smi: backend nvml is unavailable: libnvidia-ml.so.1", result.stderr)
        self.assertEqual(result.stdout, "")

    def test_nvml_library_not_found(self):
        result = run("--backend", "nvml", "--nvml-library", "/nonexistent/libnvidia-ml.so.1")
        self.assertEqual(result.returncode, 1)
        self.assertIn("backend nvml is unavailable: ", result.stderr)
        self.assertIn("/nonexistent/libnvidia-ml.so.1", result.stderr)

    def test_smi_not_found(self):
        result = run("--backend", "smi", "--smi-command", "/nonexistent/nvidia-smi")
        self.assertEqual(result.returncode, 1)
        self.assertIn("cohort-smi: backend smi is unavailable: ", result.stderr)
        self.assertIn("/nonexistent/nvidia-smi", result.stderr)


@unittest.skipUnless(os.path.isdir(FAKE_SMI), "tests/fixtures/fake_smi is missing")
class FakeNvidiaSmi(unittest.TestCase):
    def fixture_env(self, variant, **extra):
        return {"FAKE_SMI_DIR": os.path.join(DATA, "gpu", "smi"), "FAKE_SMI_VARIANT": variant, **extra}

    def test_recorded_output(self):
        result = run("--backend", "smi", "--smi-command", os.path.join(FAKE_SMI, "nvidia-smi-fixture"),
                     env=self.fixture_env("a100_535"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("backend nvidia-smi (", result.stdout)
        self.assertRegex(result.stdout, r"\n\[0\] NVIDIA A100-SXM4-80GB \| 58°C,  97 % \| +40213 / 81920 MiB "
                                        r"\( 49 %\) \| +312 / 400 W \| python3/48213\(40198MiB\)\n")

    def test_a_hung_nvidia_smi_cannot_hang_the_tool(self):
        begin = time.monotonic()
        result = run("--backend", "smi", "--smi-command", os.path.join(FAKE_SMI, "nvidia-smi-hang"),
                     "--deadline", "0.3", timeout=30)
        self.assertLess(time.monotonic() - begin, 10)
        self.assertEqual(result.returncode, 1)
        self.assertIn("backend smi is unavailable: ", result.stderr)
        self.assertIn("timed out after 0.3s", result.stderr)

    def test_a_query_that_hangs_after_opening(self):
        begin = time.monotonic()
        result = run("--backend", "smi", "--smi-command", os.path.join(FAKE_SMI, "nvidia-smi-fixture"),
                     "--deadline", "0.3", env=self.fixture_env("a100_535", FAKE_SMI_HANG="1"), timeout=30)
        self.assertLess(time.monotonic() - begin, 10)
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stdout, r"  warning: (failed|unresponsive): .*0\.3s")
        self.assertIn("cohort-smi: no new sample from nvidia-smi: ", result.stderr)


if __name__ == "__main__":
    unittest.main()
