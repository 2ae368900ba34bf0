"""cohort-rules end to end: the binary run as a user runs it.

Needs COHORT_RULES (the binary) and COHORT_TEST_DATA (tests/data; the rule
files are in its rules_cli folder).
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RULES = os.environ.get("COHORT_RULES", "build/examples/cohort-rules")
DATA = os.path.join(os.environ.get("COHORT_TEST_DATA") or os.path.join(HERE, "..", "..", "data"),
                    "rules_cli")
GPU = os.path.join(DATA, "gpu.yaml")
WARNINGS = os.path.join(DATA, "warnings.yaml")
BAD_CONDITION = os.path.join(DATA, "bad_condition.yaml")
BAD_SYNTAX = os.path.join(DATA, "bad_syntax.yaml")
UNTYPED = os.path.join(DATA, "untyped.json")


def run(*args):
    return subprocess.run([RULES, *args], capture_output=True, text=True, timeout=60)


class HelpAndVersion(unittest.TestCase):
    def test_help_documents_every_flag_and_command(self):
        result = run("--help")
        self.assertEqual(result.returncode, 0, result.stderr)
        for word in ["check FILE...", "eval FILE", "explain FILE RULE", "--set NAME=VALUE", "-s,",
                     "--at SECONDS", "--json", "--strict", "--help", "--version", "Exit status"]:
            self.assertIn(word, result.stdout)
        # Every flag the parser accepts appears in the help.
        source = ""
        for part in (("cohort_rules", "options.cpp"), ("common", "args.hpp")):
            with open(os.path.join(HERE, "..", "..", "..", "examples", *part)) as f:
                source += f.read()
        flags = set(re.findall(r'arg == "(--?[a-z-]+)"', source))
        self.assertGreaterEqual(len(flags), 7)
        for flag in flags:
            self.assertIn(flag, result.stdout, f"{flag} is accepted but not in --help")

    def test_version(self):
        result = run("--version")
        self.assertEqual(result.returncode, 0)
        self.assertRegex(result.stdout, r"^cohort-rules \d+\.\d+\.\d+\n$")


class Check(unittest.TestCase):
    def test_good_files(self):
        result = run("check", GPU, WARNINGS, UNTYPED)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"{GPU}: ok (5 rules, 1 disabled)\n", result.stdout)
        self.assertIn(f"{UNTYPED}: ok (1 rule)\n", result.stdout)
        self.assertIn(f"{WARNINGS}: warning: {WARNINGS}:4:16: lists.unused_list: list 'unused_list' "
                      "is not used by any rule", result.stdout)

    def test_strict_fails_on_warnings(self):
        result = run("check", "--strict", WARNINGS)
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"{WARNINGS}: 1 warning (--strict)", result.stderr)
        self.assertEqual(run("check", "--strict", GPU).returncode, 0)

    def test_errors_are_located_and_every_file_is_checked(self):
        result = run("check", BAD_CONDITION, GPU, BAD_SYNTAX)
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"{GPU}: ok", result.stdout)
        self.assertIn(f"cohort-rules: {BAD_CONDITION}:7:16: rules[0].condition: 1:1: unknown variable "
                      "'gpu_memroy' (did you mean 'gpu_memory'?)\n    gpu_memroy > 85\n    ^", result.stderr)
        self.assertIn(f"cohort-rules: {BAD_SYNTAX}:5:1:", result.stderr)

    def test_missing_file(self):
        result = run("check", "/nonexistent/rules.yaml")
        self.assertEqual(result.returncode, 1)
        self.assertIn("/nonexistent/rules.yaml", result.stderr)


class Eval(unittest.TestCase):
    def test_text(self):
        result = run("eval", GPU, "--set", "gpu_memory=91.5", "-s", "file_type=model")
        self.assertEqual(result.returncode, 0, result.stderr)
        out = result.stdout
        self.assertIn("at 0: 2 rules fired\n", out)
        # Priority order, actions with their parameters, labels.
        self.assertRegex(out, r"reduce_prefetch \(priority 100\)\n"
                              r"    reduce_prefetch -> data_loader factor=0.5 floor=2 reason=\"memory\"\n"
                              r"    labels: severity=warning\n"
                              r"  prioritize_models \(priority 50\)\n"
                              r"    prioritize -> io_queue\n")
        self.assertIn("    reduce_prefetch: inactive -> firing at 0\n", out)
        self.assertIn("    hot_gpu: condition is unknown: 'gpu_temperature' is not set in the context\n", out)
        self.assertNotIn("retired", out)

    def test_json_lines_over_time(self):
        result = run("eval", GPU, "--set", "gpu_temperature=90", "--at", "0", "--at", "20",
                     "--at", "30s", "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        docs = [json.loads(line) for line in result.stdout.splitlines()]
        self.assertEqual([d["time"] for d in docs], [0.0, 20.0, 30.0])
        self.assertEqual([d["fired"] for d in docs[:2]], [[], []])
        self.assertEqual(docs[0]["events"], [{"rule": "hot_gpu", "from": "inactive", "to": "pending",
                                              "time": 0.0}])
        self.assertEqual(docs[2]["fired"], [{"rule": "hot_gpu", "priority": 90, "labels": {},
                                             "actions": [{"type": "delay_transfer", "target": "",
                                                          "parameters": {"delay": "30s"}}]}])
        self.assertEqual(docs[2]["states"]["hot_gpu"], "firing")
        self.assertEqual(docs[2]["states"]["retired"], "inactive")
        self.assertIn({"rule": "reduce_prefetch",
                       "message": "condition is unknown: 'gpu_memory' is not set in the context"},
                      docs[0]["errors"])

    def test_text_shows_pending_and_still_firing(self):
        result = run("eval", GPU, "--set", "gpu_temperature=90", "--at", "0", "--at", "30", "--at", "1m")
        self.assertEqual(result.returncode, 0, result.stderr)
        at0, at30, at60 = result.stdout.split("\n\n")
        self.assertIn("  pending: hot_gpu\n", at0)
        self.assertIn("at 30: 1 rule fired\n  hot_gpu (priority 90)\n    delay_transfer delay=\"30s\"", at30)
        self.assertIn("at 60: 1 rule fired\n  hot_gpu (priority 90)\n", at60)  # again: no cooldown

    def test_values_are_parsed_as_typed(self):
        result = run("eval", GPU, "--set", "active_training=true", "--set", "transfer_size=1.5GiB", "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual([f["rule"] for f in json.loads(result.stdout)["fired"]], ["stage_large"])
        result = run("eval", GPU, "--set", "transfer_size=50MB", "--set", "active_training=true", "--json")
        self.assertEqual(json.loads(result.stdout)["fired"], [])

    def test_unknown_variable_warns(self):
        result = run("eval", GPU, "--set", "gpu_tempreture=90")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("cohort-rules: warning: --set gpu_tempreture: no rule uses a variable "
                      "'gpu_tempreture' (did you mean 'gpu_temperature'?)", result.stderr)
        self.assertIn("at 0: no rule fired", result.stdout)

    def test_untyped_json_rules(self):
        result = run("eval", UNTYPED, "--set", "size=2GB", "--set", "name=llama.pt", "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        [fired] = json.loads(result.stdout)["fired"]
        self.assertEqual(fired["actions"][0], {"type": "stage", "target": "cache", "parameters": {"copies": 2}})
        # A value of the wrong type at evaluation is an error of that rule
        # (unless the other side of the && is false, which decides it).
        result = run("eval", UNTYPED, "--set", "size=big", "--set", "name=x", "--json")
        self.assertEqual(json.loads(result.stdout)["errors"], [])
        result = run("eval", UNTYPED, "--set", "size=big", "--set", "name=x.pt", "--json")
        [error] = json.loads(result.stdout)["errors"]
        self.assertEqual(error["rule"], "big_model")
        self.assertIn("could not be evaluated: cannot compare string 'big' with int 1000000000",
                      error["message"])


class Explain(unittest.TestCase):
    def test_text_indented_by_depth(self):
        result = run("explain", GPU, "prioritize_models", "--set", "gpu_memory=82", "--set", "file_type=dataset")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout,
                         "rule prioritize_models (priority 50): gpu_memory > 80 AND file_type in model_types\n"
                         "  gpu_memory > 80 AND file_type in model_types  =>  false\n"
                         "    gpu_memory > 80  =>  true\n"
                         "      gpu_memory  =>  82\n"
                         "    file_type in model_types  =>  false\n"
                         "      file_type  =>  'dataset'\n")

    def test_json_and_missing(self):
        result = run("explain", GPU, "prioritize_models", "--set", "gpu_memory=82", "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        steps = json.loads(result.stdout)
        self.assertEqual(steps[0], {"text": "gpu_memory > 80 AND file_type in model_types",
                                    "value": "unknown (file_type missing)", "depth": 0})
        self.assertIn({"text": "gpu_memory > 80", "value": "true", "depth": 1}, steps)

    def test_unknown_rule(self):
        result = run("explain", GPU, "prioritise_models")
        self.assertEqual(result.returncode, 1)
        self.assertIn("no rule 'prioritise_models' in the loaded rule set (did you mean 'prioritize_models'?)",
                      result.stderr)


class BadUsage(unittest.TestCase):
    def test_usage_errors_exit_2(self):
        for args, message in [((), "name a command: check, eval or explain"),
                              (("frob",), "unknown command 'frob'"),
                              (("check",), "check: name at least one FILE"),
                              (("check", GPU, "--json"), "check takes no --set, --at or --json"),
                              (("eval",), "eval: name exactly one FILE"),
                              (("eval", GPU, GPU), "eval: name exactly one FILE"),
                              (("eval", GPU, "--strict"), "--strict applies to check only"),
                              (("explain", GPU), "explain: name one FILE and one RULE"),
                              (("explain", GPU, "hot_gpu", "--at", "1"), "explain takes no --at"),
                              (("eval", GPU, "--set", "gpu_memory"), "--set: expected NAME=VALUE, got 'gpu_memory'"),
                              (("eval", GPU, "--set"), "--set needs a value"),
                              (("eval", GPU, "--at", "soon"), "--at: expected seconds"),
                              (("eval", GPU, "--at", "5", "--at", "3"), "--at: times must not go backwards"),
                              (("eval", GPU, "--bogus"), "unknown option '--bogus'"),
                              (("eval", GPU, "--set", "gpu_memory=high"),
                               "--set gpu_memory=high: variable 'gpu_memory' is declared number, got string")]:
            result = run(*args)
            self.assertEqual(result.returncode, 2, (args, result.stderr))
            self.assertIn(message, result.stderr, args)

    def test_bad_file_in_eval_exits_1(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("version: 1\nrules:\n  - id: a\n    condition: x >\n    actions: [{type: t}]\n")
        self.addCleanup(os.unlink, f.name)
        result = run("eval", f.name)
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"{f.name}:4:16: rules[0].condition:", result.stderr)


if __name__ == "__main__":
    unittest.main()
