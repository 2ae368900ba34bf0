"""Rules from Python: expressions, contexts, the rule engine and handlers."""

import gc
import os
import unittest

import _support
import cohort

RULES_DATA = os.path.join(os.environ.get("COHORT_TEST_DATA") or
                          os.path.join(_support.HERE, "..", "data"), "rules_cli")
GPU = os.path.join(RULES_DATA, "gpu.yaml")

PACK = """
version: 1
variables: {gpu_memory: number, gpu_temperature: number, file_type: string}
rules:
  - id: reduce_prefetch
    condition: gpu_memory > 85
    actions: [{type: reduce_prefetch, target: data_loader, parameters: {factor: 0.5}}]
    priority: 100
    labels: {severity: warning}
  - id: hot_gpu
    condition: gpu_temperature > 87
    for: 30s
    actions: [{type: delay_transfer, parameters: {delay: 30}}]
    priority: 90
  - id: prioritize_models
    condition: gpu_memory > 80 AND file_type == 'model'
    actions: [{type: prioritize, target: io_queue}]
    priority: 50
"""


class ExpressionTest(unittest.TestCase):
    def test_three_valued_truth(self):
        e = cohort.Expression("gpu_memory > 80 AND file_type == 'model'")
        self.assertEqual(e.text, "gpu_memory > 80 AND file_type == 'model'")
        self.assertEqual(e.type, "bool")
        self.assertEqual(e.variables, ["gpu_memory", "file_type"])
        self.assertIs(e.test(gpu_memory=91.5, file_type="model"), True)
        self.assertIs(e.test(gpu_memory=91.5, file_type="dataset"), False)
        self.assertIsNone(e.test(gpu_memory=91.5))            # file_type missing
        self.assertIs(e.test(gpu_memory=50), False)           # unknown AND false
        self.assertIs(e.test({"gpu_memory": 50, "unused": 1}), False)  # extra names ignored

    def test_bytes_reach_conditions_unchanged(self):
        # File headers carry binary markers (PyTorch's legacy pickle magic).
        e = cohort.Expression("header startswith '\\x80\\x02' AND len(header) == 4")
        self.assertIs(e.test(header=b"\x80\x02\x8a\x0a"), True)
        self.assertIs(e.test(header=b"PK\x03\x04"), False)
        steps = e.explain(header=b"PK\x03\x04")
        self.assertIn("'PK\\x03\\x04'", [s.value for s in steps])

    def test_outcome_names_missing_variables_and_type_errors(self):
        e = cohort.Expression("gpu_memory > 80 AND file_type == 'model'")
        outcome = e.evaluate(gpu_memory=91.5)
        self.assertEqual(outcome, cohort.Outcome(None, ["file_type"], ""))
        self.assertFalse(outcome)
        self.assertTrue(e.evaluate(gpu_memory=91.5, file_type="model"))
        bad = cohort.Expression("a > 1").evaluate(a="text")
        self.assertIsNone(bad.truth)
        self.assertIn("cannot compare string 'text' with int 1", bad.error)

    def test_value_and_explain(self):
        self.assertEqual(cohort.Expression("a + 1").value(a=41), 42)
        self.assertEqual(cohort.Expression("a * 2").value(a=1.25), 2.5)
        self.assertEqual(cohort.Expression("lower(s)").value(s="ABC"), "abc")
        self.assertIsNone(cohort.Expression("a + 1").value())
        steps = cohort.Expression("x > 1 || y").explain(x=0)
        self.assertEqual(steps[0].depth, 0)
        self.assertEqual(steps[0].text, "x > 1 || y")
        self.assertIn(cohort.ExplainStep("x > 1", "false", 1), steps)
        self.assertTrue(any(s.text == "y" and "y missing" in s.value for s in steps))

    def test_compile_errors(self):
        with self.assertRaises(cohort.ParseError) as caught:
            cohort.Expression("gpu_memory > lenght(x)")
        self.assertIn("1:14: unknown function 'lenght' (did you mean 'len'?)", str(caught.exception))
        self.assertIn("\n    gpu_memory > lenght(x)\n                 ^", str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument):
            cohort.Expression(42)
        # matches runs RE2, which has no back-references.
        with self.assertRaises(cohort.ParseError) as caught:
            cohort.Expression("path matches '(a)\\\\1'")
        self.assertIn("1:18: bad regular expression: back-reference '\\1' is not supported", str(caught.exception))

    def test_matches_bytes_and_long_values(self):
        e = cohort.Expression("header matches '^\\x80[\\x02-\\x05]'")
        self.assertIs(e.test(header=b"\x80\x04\xff"), True)
        self.assertIs(e.test(header=b"PK\x03\x04"), False)
        self.assertIs(cohort.Expression("path matches '(a*)*b'").test(path="a" * 100_000), False)
        self.assertIs(cohort.Expression("path matches '^(a|b)*$'").test(path="ab" * 25_000), True)

    def test_shared_symbols_and_declared_types(self):
        symbols = cohort.Symbols({"gpu_memory": "number"})
        pressure = cohort.Expression("gpu_memory > 85", symbols)
        model = cohort.Expression("kind == 'model'", symbols)
        self.assertEqual(symbols.names, ["gpu_memory", "kind"])
        self.assertEqual(symbols.type("gpu_memory"), "number")
        self.assertIsNone(symbols.type("kind"))
        self.assertIn("kind", symbols)
        self.assertEqual(len(symbols), 2)
        ctx = symbols.context()
        ctx.update(gpu_memory=90, kind="model")
        self.assertIs(pressure.test(ctx), True)
        self.assertIs(model.test(ctx), True)
        with self.assertRaises(cohort.ParseError) as caught:
            cohort.Expression("gpu_memory == 'x'", symbols)
        self.assertIn("cannot compare number with string", str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument) as caught:
            symbols.declare("gpu_memory", "string")
        self.assertIn("declared number", str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument):
            symbols.declare("x", "tensor")
        # A context of another table is refused, not misread.
        with self.assertRaises(cohort.InvalidArgument) as caught:
            cohort.Expression("x > 1").test(ctx)
        self.assertIn("another symbol table", str(caught.exception))


class ContextTest(unittest.TestCase):
    def setUp(self):
        self.symbols = cohort.Symbols({"mem": "number"})
        self.expr = cohort.Expression("mem > 1 || size > 1 || hot || kind == 'x'", self.symbols)
        self.ctx = self.expr.context()

    def test_set_get_by_type(self):
        ctx = self.ctx
        ctx["hot"] = True
        ctx["size"] = 2**40
        ctx["kind"] = "héllo"
        ctx["mem"] = 3  # an int fits a declared number
        self.assertEqual((ctx["hot"], ctx["size"], ctx["kind"], ctx["mem"]),
                         (True, 2**40, "héllo", 3.0))
        self.assertIsInstance(ctx["mem"], float)
        ctx.set("kind", None)
        self.assertIsNone(ctx.get("kind"))
        ctx.clear()
        self.assertIsNone(ctx["hot"])

    def test_set_text_as_typed(self):
        self.ctx.set_text("size", "100MB")
        self.ctx.set_text("kind", "'quoted'")
        self.ctx.set_text("hot", "false")
        self.assertEqual((self.ctx["size"], self.ctx["kind"], self.ctx["hot"]),
                         (100_000_000, "quoted", False))

    def test_slots(self):
        slot = self.ctx.slot("kind")
        self.ctx.set_at(slot, "x")
        self.assertIs(self.expr.test(self.ctx), True)
        self.ctx.set_at(self.ctx.slot("mem"), 5)
        self.assertEqual(self.ctx["mem"], 5.0)
        with self.assertRaises(cohort.InvalidArgument) as caught:
            self.ctx.set_at(self.ctx.slot("mem"), "high")
        self.assertIn("variable 'mem' is declared number, got string", str(caught.exception))
        with self.assertRaises(cohort.OutOfRange):
            self.ctx.set_at(99, 1)

    def test_errors(self):
        with self.assertRaises(cohort.NotFound) as caught:
            self.ctx["zzz"] = 1
        self.assertIn("no condition uses a variable named 'zzz'", str(caught.exception))
        with self.assertRaises(cohort.NotFound):
            self.ctx.get("zzz")
        with self.assertRaises(cohort.InvalidArgument) as caught:
            self.ctx["mem"] = "high"
        self.assertIn("'mem' is declared number", str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument) as caught:
            self.ctx["kind"] = [1, 2]
        self.assertIn("bool, int, float, str or bytes, not list", str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument):
            self.ctx["size"] = 2**64
        self.ctx.close()
        with self.assertRaises(cohort.InvalidArgument):
            self.ctx["mem"] = 1
        with self.assertRaises(cohort.InvalidArgument) as caught:
            cohort.Context("gpu_memory")
        self.assertIn("not str", str(caught.exception))

    def test_made_for_symbols_expression_or_engine(self):
        for source in (self.symbols, self.expr):
            ctx = cohort.Context(source)
            ctx["kind"] = "x"
            self.assertIs(self.expr.test(ctx), True)
        engine = cohort.RuleEngine(allow_unhandled=True)
        engine.load_string(PACK)
        ctx = cohort.Context(engine)
        ctx["gpu_memory"] = 99
        self.assertEqual(engine.evaluate(ctx, now=0).fired_rules, ["reduce_prefetch"])


class RuleEngineTest(unittest.TestCase):
    def engine(self, **handlers):
        engine = cohort.RuleEngine()
        self.calls = []
        for kind in ("reduce_prefetch", "delay_transfer", "prioritize"):
            engine.on(kind, handlers.get(kind, lambda rule, action: self.calls.append((rule, action))))
        engine.load_string(PACK, "yaml", "pack.yaml")
        return engine

    def test_fires_in_priority_order_and_runs_handlers(self):
        engine = self.engine()
        self.assertEqual(engine.rules, ["reduce_prefetch", "hot_gpu", "prioritize_models"])
        self.assertEqual(len(engine), 3)
        result = engine.evaluate({"gpu_memory": 91.5, "gpu_temperature": 90, "file_type": "model"},
                                 now=0)
        self.assertEqual(result.fired_rules, ["reduce_prefetch", "prioritize_models"])
        self.assertEqual(result.fired[0], cohort.Firing(
            "reduce_prefetch", 100,
            [cohort.Action("reduce_prefetch", "data_loader", {"factor": 0.5})],
            {"severity": "warning"}))
        self.assertEqual(result.events, [
            cohort.RuleEvent("reduce_prefetch", "inactive", "firing", 0.0),
            cohort.RuleEvent("hot_gpu", "inactive", "pending", 0.0),
            cohort.RuleEvent("prioritize_models", "inactive", "firing", 0.0)])
        self.assertEqual(result.errors, [])
        self.assertEqual(self.calls, [
            ("reduce_prefetch", cohort.Action("reduce_prefetch", "data_loader", {"factor": 0.5})),
            ("prioritize_models", cohort.Action("prioritize", "io_queue", {}))])
        self.assertEqual(engine.state("hot_gpu"), "pending")
        later = engine.evaluate(gpu_memory=91.5, gpu_temperature=90, file_type="model", now=30)
        # Every rule that is firing and true fires again (no cooldown), by priority.
        self.assertEqual(later.fired_rules, ["reduce_prefetch", "hot_gpu", "prioritize_models"])
        self.assertEqual([e.rule for e in later.events], ["hot_gpu"])
        self.assertEqual(engine.state("hot_gpu"), "firing")
        self.assertIn(("hot_gpu", cohort.Action("delay_transfer", "", {"delay": 30})), self.calls)

    def test_missing_variables_are_errors_not_firings(self):
        result = self.engine().evaluate(gpu_memory=82, now=0)
        self.assertEqual(result.fired_rules, [])
        messages = {e.rule: e.message for e in result.errors}
        self.assertIn("'file_type' is not set", messages["prioritize_models"])
        self.assertIn("'gpu_temperature' is not set", messages["hot_gpu"])

    def test_handler_exception_is_reported_and_others_run(self):
        def broken(rule, action):
            raise ValueError("no loader")
        engine = self.engine(reduce_prefetch=broken)
        result = engine.evaluate(gpu_memory=91.5, file_type="model", gpu_temperature=0, now=0)
        self.assertEqual(result.fired_rules, ["reduce_prefetch", "prioritize_models"])
        [error] = result.errors
        self.assertEqual(error.rule, "reduce_prefetch")
        self.assertEqual(error.action, "reduce_prefetch")
        self.assertEqual(error.message, "action 'reduce_prefetch' handler failed: ValueError: no loader")
        self.assertIsInstance(error.exception, ValueError)
        self.assertEqual([rule for rule, _ in self.calls], ["prioritize_models"])

    def test_keyboard_interrupt_in_handler_propagates(self):
        def interrupted(rule, action):
            raise KeyboardInterrupt
        engine = self.engine(reduce_prefetch=interrupted)
        with self.assertRaises(KeyboardInterrupt):
            engine.evaluate(gpu_memory=91.5, now=0)
        # The interrupted evaluation still counted; the engine carries on.
        result = engine.evaluate(gpu_memory=10, now=1)
        self.assertEqual(result.events, [cohort.RuleEvent("reduce_prefetch", "firing", "inactive", 1.0)])
        self.assertEqual([e.rule for e in result.errors], ["hot_gpu"])

    def test_decorator_and_unhandled_actions(self):
        engine = cohort.RuleEngine()
        with self.assertRaises(cohort.ParseError) as caught:
            engine.load(GPU)
        self.assertIn("which has no handler", str(caught.exception))
        self.assertEqual(engine.rules, [])
        seen = []

        @engine.on("log")
        def log(rule, action):
            seen.append(rule)
        self.assertTrue(callable(log))
        lenient = cohort.RuleEngine(allow_unhandled=True)
        lenient.load(GPU)
        result = lenient.evaluate(gpu_memory=91.5, file_type="model", now=0)
        self.assertEqual(result.fired_rules, ["reduce_prefetch", "prioritize_models"])
        self.assertEqual(result.fired[0].actions[0].parameters,
                         {"factor": 0.5, "floor": 2, "reason": "memory"})
        with self.assertRaises(cohort.InvalidArgument):
            engine.on("log", "not callable")

    def test_explain_state_describe(self):
        engine = self.engine()
        steps = engine.explain("prioritize_models", gpu_memory=82)
        self.assertEqual(steps[0].text, "gpu_memory > 80 AND file_type == 'model'")
        self.assertIn(cohort.ExplainStep("gpu_memory > 80", "true", 1), steps)
        with self.assertRaises(cohort.NotFound) as caught:
            engine.explain("prioritise_models")
        self.assertIn("did you mean 'prioritize_models'?", str(caught.exception))
        with self.assertRaises(cohort.NotFound):
            engine.state("nope")
        doc = engine.describe()
        self.assertEqual([r["id"] for r in doc["rules"]], engine.rules)
        self.assertEqual(doc["rules"][1]["for"], 30.0)
        self.assertEqual(doc["variables"]["gpu_memory"], "number")

    def test_hot_reload_keeps_the_good_set_and_states(self):
        engine = self.engine()
        ctx = engine.context()
        ctx.update(gpu_memory=91.5, gpu_temperature=90, file_type="model")
        engine.evaluate(ctx, now=0)
        with self.assertRaises(cohort.ParseError) as caught:
            engine.load_string("version: 1\nrules:\n  - id: x\n    condition: gpu_memory >\n"
                               "    actions: [{type: prioritize}]\n", source_name="new.yaml")
        self.assertIn("new.yaml:4:", str(caught.exception))
        self.assertEqual(engine.state("hot_gpu"), "pending")
        engine.load_string(PACK)
        self.assertEqual(engine.state("hot_gpu"), "pending")
        self.assertEqual(engine.evaluate(ctx, now=30).fired_rules,
                         ["reduce_prefetch", "hot_gpu", "prioritize_models"])

    def test_time_and_context_errors(self):
        engine = self.engine()
        engine.evaluate(gpu_memory=1, now=10)
        with self.assertRaises(cohort.InvalidArgument) as caught:
            engine.evaluate(gpu_memory=1, now=5)
        self.assertIn("must not go backwards", str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument) as caught:
            engine.evaluate(cohort.Expression("x").context(), now=20)
        self.assertIn("another symbol table", str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument):
            engine.evaluate(engine.context(), now=20, gpu_memory=1)
        with self.assertRaises(cohort.FileError):
            engine.load("/nonexistent/rules.yaml")
        with self.assertRaises(cohort.InvalidArgument):
            engine.load_string(PACK, format="listing")

    def test_handlers_outlive_collection(self):
        engine = self.engine()
        gc.collect()
        engine.evaluate(gpu_memory=99, now=0)
        self.assertEqual(self.calls[0][0], "reduce_prefetch")


class CheckTest(unittest.TestCase):
    def test_check_file(self):
        doc = cohort.check_rules(GPU)
        self.assertEqual(len(doc["rules"]), 5)
        retired = doc["rules"][-1]
        self.assertEqual((retired["id"], retired["enabled"]), ("retired", False))
        self.assertEqual(doc["variables"]["transfer_size"], "int")

    def test_warnings_and_errors(self):
        doc = cohort.check_rules(os.path.join(RULES_DATA, "warnings.yaml"))
        self.assertIn("list 'unused_list' is not used by any rule", doc["warnings"][0])
        with self.assertRaises(cohort.ParseError) as caught:
            cohort.check_rules(os.path.join(RULES_DATA, "bad_condition.yaml"))
        self.assertIn("bad_condition.yaml:7:16: rules[0].condition:", str(caught.exception))
        self.assertIn("did you mean 'gpu_memory'?", str(caught.exception))
        with self.assertRaises(cohort.ParseError):
            cohort.check_rules_string('{"version": 2}', "json")


if __name__ == "__main__":
    unittest.main()
