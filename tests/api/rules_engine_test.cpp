// The rule engine's states, firing, handlers and hot reload, with time
// passed in (no sleeping).
#include "support.hpp"

#include <cohort/rules.hpp>

#include <stdexcept>

namespace cohort {
namespace {

using test::error_message;

// An engine (handlers not required) with one rule `hot`: `t > 80` plus `fields`.
RuleEngine one_rule(const std::string& fields) {
    RuleEngine engine({.allow_unhandled_actions = true});
    engine.load_string("version: 1\nrules:\n  - {id: hot, condition: t > 80, actions: [{type: alert}], " + fields +
                       "}\n");
    return engine;
}

std::vector<std::string> fired(const Evaluation& e) {
    std::vector<std::string> ids;
    for (const Firing& f : e.fired) ids.push_back(f.rule);
    return ids;
}

// Steps the engine with `t` set to `value` at time `now`; returns
// "F" when it fired, plus the events as "from>to".
std::string at(RuleEngine& engine, Context& c, double now, double value) {
    c.set("t", value);
    const Evaluation e = engine.evaluate(c, now);
    std::string out = e.fired.empty() ? "" : "F";
    for (const RuleEvent& ev : e.events) {
        EXPECT_EQ(ev.time, now);
        out += (out.empty() ? "" : " ") + std::string(to_string(ev.from)) + ">" + std::string(to_string(ev.to));
    }
    return out;
}

TEST(RuleEngine, ForMustHoldBeforeFiring) {
    RuleEngine engine = one_rule("for: 30s");
    Context c = engine.context();
    EXPECT_EQ(at(engine, c, 0, 90), "inactive>pending");
    EXPECT_EQ(engine.state("hot"), RuleState::pending);
    EXPECT_EQ(at(engine, c, 29, 90), "");
    EXPECT_EQ(at(engine, c, 30, 90), "F pending>firing");
    EXPECT_EQ(at(engine, c, 40, 90), "F");  // no cooldown: every evaluation while true
    EXPECT_EQ(at(engine, c, 50, 10), "firing>inactive");
    // A break while pending starts the wait again.
    EXPECT_EQ(at(engine, c, 60, 90), "inactive>pending");
    EXPECT_EQ(at(engine, c, 70, 10), "pending>inactive");
    EXPECT_EQ(at(engine, c, 80, 90), "inactive>pending");
    EXPECT_EQ(at(engine, c, 100, 90), "");
    EXPECT_EQ(at(engine, c, 110, 90), "F pending>firing");
}

TEST(RuleEngine, WithoutForARuleFiresAtOnceWithOneEvent) {
    RuleEngine engine = one_rule("priority: 3, labels: {severity: page}");
    Context c = engine.context();
    c.set("t", 99.0);
    const Evaluation e = engine.evaluate(c, 5);
    ASSERT_EQ(e.events.size(), 1u);
    EXPECT_EQ(e.events[0].rule, "hot");
    EXPECT_EQ(e.events[0].from, RuleState::inactive);
    EXPECT_EQ(e.events[0].to, RuleState::firing);
    EXPECT_EQ(e.events[0].time, 5);
    ASSERT_EQ(e.fired.size(), 1u);
    EXPECT_EQ(e.fired[0].priority, 3);
    EXPECT_EQ(e.fired[0].labels.at("severity"), "page");
    EXPECT_EQ(e.fired[0].actions[0].type, "alert");
}

TEST(RuleEngine, KeepFiringForRidesOutFlapping) {
    RuleEngine engine = one_rule("keep_firing_for: 60");
    Context c = engine.context();
    EXPECT_EQ(at(engine, c, 0, 90), "F inactive>firing");
    EXPECT_EQ(at(engine, c, 10, 10), "");   // cleared at 10: still firing, but not true, so no firing
    EXPECT_EQ(at(engine, c, 20, 90), "F");  // true again: fires, with no new state event
    EXPECT_EQ(at(engine, c, 30, 10), "");  // cleared again, at 30
    EXPECT_EQ(at(engine, c, 89, 10), "");
    EXPECT_EQ(engine.state("hot"), RuleState::firing);
    EXPECT_EQ(at(engine, c, 90, 10), "firing>inactive");
    EXPECT_EQ(at(engine, c, 95, 90), "F inactive>firing");
}

TEST(RuleEngine, CooldownIsTheMinimumTimeBetweenFirings) {
    RuleEngine engine = one_rule("cooldown: 1m");
    Context c = engine.context();
    EXPECT_EQ(at(engine, c, 0, 90), "F inactive>firing");
    EXPECT_EQ(at(engine, c, 30, 90), "");
    EXPECT_EQ(at(engine, c, 60, 90), "F");  // again while it stays true
    EXPECT_EQ(at(engine, c, 61, 90), "");
    EXPECT_EQ(at(engine, c, 120, 90), "F");
    EXPECT_EQ(at(engine, c, 130, 10), "firing>inactive");
    // Back to firing 20s after the last firing: no firing until 60s passed.
    EXPECT_EQ(at(engine, c, 140, 90), "inactive>firing");
    EXPECT_EQ(at(engine, c, 170, 90), "");
    EXPECT_EQ(at(engine, c, 180, 90), "F");
}

TEST(RuleEngine, EveryRuleFiresInPriorityOrder) {
    RuleEngine engine;
    std::vector<std::string> calls;
    engine.on("alert", [&](const Firing& f, const Action& a) { calls.push_back(f.rule + "/" + a.target); });
    engine.load_string(R"(version: 1
rules:
  - {id: a, condition: t > 1, priority: 1, actions: [{type: alert, target: x}]}
  - {id: b, condition: t > 1, priority: 10, actions: [{type: alert, target: x}, {type: alert, target: y}]}
  - {id: c, condition: t > 1, priority: 10, actions: [{type: alert, target: x}]}
  - {id: d, condition: t > 1, priority: -5, actions: [{type: alert, target: x}]}
  - {id: e, condition: t > 100, priority: 99, actions: [{type: alert, target: x}]}
)");
    Context c = engine.context();
    c.set("t", 50.0);
    const Evaluation e = engine.evaluate(c, 0);
    EXPECT_EQ(fired(e), (std::vector<std::string>{"b", "c", "a", "d"}));
    EXPECT_EQ(calls, (std::vector<std::string>{"b/x", "b/y", "c/x", "a/x", "d/x"}));
    EXPECT_TRUE(e.errors.empty());
}

TEST(RuleEngine, HandlersGetTheActionAndItsParameters) {
    RuleEngine engine;
    std::vector<Value> factors;
    std::string target;
    engine.on("reduce_prefetch", [&](const Firing& f, const Action& a) {
        EXPECT_EQ(f.rule, "r");
        target = a.target;
        factors.push_back(a.parameters.at("factor"));
    });
    engine.load_string(R"(version: 1
variables: {gpu_memory: number}
rules:
  - id: r
    condition: gpu_memory > 85
    actions: [{type: reduce_prefetch, target: prefetcher, parameters: {factor: 0.5}}]
)");
    Context c = engine.context();
    c.set("gpu_memory", 90.0);
    engine.evaluate(c, 0);
    EXPECT_EQ(factors, std::vector<Value>{Value(0.5)});
    EXPECT_EQ(target, "prefetcher");
}

TEST(RuleEngine, AThrowingHandlerIsReportedAndTheRestStillRun) {
    RuleEngine engine;
    int later = 0;
    engine.on("fail", [](const Firing&, const Action&) { throw std::runtime_error("disk full"); });
    engine.on("ok", [&](const Firing&, const Action&) { ++later; });
    engine.load_string(
        "version: 1\nrules:\n  - {id: r, condition: t > 1, actions: [{type: fail}, {type: ok}]}\n"
        "  - {id: s, condition: t > 1, actions: [{type: ok}]}\n");
    Context c = engine.context();
    c.set("t", 5.0);
    const Evaluation e = engine.evaluate(c, 0);
    EXPECT_EQ(later, 2);
    EXPECT_EQ(fired(e), (std::vector<std::string>{"r", "s"}));
    ASSERT_EQ(e.errors.size(), 1u);
    EXPECT_EQ(e.errors[0].rule, "r");
    EXPECT_EQ(e.errors[0].message, "action 'fail' handler failed: disk full");
}

TEST(RuleEngine, MissingVariablesAreReportedNotFired) {
    RuleEngine engine({.allow_unhandled_actions = true});
    engine.load_string(R"(version: 1
rules:
  - {id: needs_memory, condition: gpu_memory > 80, actions: [{type: a}]}
  - {id: either, condition: gpu_memory > 80 || forced, actions: [{type: a}]}
  - {id: both, condition: gpu_memory > 80 && temperature > 80, actions: [{type: a}]}
  - {id: decided, condition: gpu_memory > 80 && forced == false, actions: [{type: a}]}
)");
    Context c = engine.context();
    c.set("forced", true);
    const Evaluation e = engine.evaluate(c, 0);
    EXPECT_EQ(fired(e), std::vector<std::string>{"either"});  // unknown || true is true
    ASSERT_EQ(e.errors.size(), 2u);                           // unknown && false is false: no error
    EXPECT_EQ(e.errors[0].rule, "needs_memory");
    EXPECT_EQ(e.errors[0].message, "condition is unknown: 'gpu_memory' is not set in the context");
    EXPECT_EQ(e.errors[1].rule, "both");
    EXPECT_EQ(e.errors[1].message, "condition is unknown: 'gpu_memory', 'temperature' are not set in the context");
    EXPECT_EQ(engine.state("needs_memory"), RuleState::inactive);
}

TEST(RuleEngine, TypeErrorsAreReportedNotFired) {
    RuleEngine engine = one_rule("");
    Context c = engine.context();
    c.set("t", Value("warm"));
    const Evaluation e = engine.evaluate(c, 0);
    EXPECT_TRUE(e.fired.empty());
    ASSERT_EQ(e.errors.size(), 1u);
    EXPECT_TRUE(e.errors[0].message.starts_with("condition could not be evaluated: ")) << e.errors[0].message;
}

TEST(RuleEngine, DisabledRulesAreNotEvaluated) {
    RuleEngine engine = one_rule("enabled: false");
    Context c = engine.context();
    const Evaluation e = engine.evaluate(c, 0);  // `t` missing, but nobody asks
    EXPECT_TRUE(e.fired.empty() && e.events.empty() && e.errors.empty());
    EXPECT_EQ(engine.state("hot"), RuleState::inactive);
}

TEST(RuleEngine, ActionTypesNeedAHandler) {
    const std::string text = "version: 1\nrules:\n  - {id: r, condition: t > 1, actions: [{type: alrt}]}\n";
    RuleEngine engine;
    EXPECT_EQ(error_message(Errc::parse, [&] { engine.load_string(text, Format::yaml, "r.yaml"); }),
              "r.yaml:3:48: rules[0].actions[0].type: rule 'r' uses action type 'alrt', which has no handler; no "
              "handlers are registered. Register one with RuleEngine::on before loading, or set "
              "'allow_unhandled_actions: true' in the rule file");
    engine.on("alert", [](const Firing&, const Action&) {});
    engine.on("stage", [](const Firing&, const Action&) {});
    EXPECT_EQ(error_message(Errc::parse, [&] { engine.load_string(text, Format::yaml, "r.yaml"); }),
              "r.yaml:3:48: rules[0].actions[0].type: rule 'r' uses action type 'alrt', which has no handler (did you "
              "mean 'alert'?); registered: alert, stage. Register one with RuleEngine::on before loading, or set "
              "'allow_unhandled_actions: true' in the rule file");
    EXPECT_EQ(engine.rules(), nullptr);
    RuleEngine lenient({.allow_unhandled_actions = true});
    lenient.load_string(text);
    engine.load_string("version: 1\nallow_unhandled_actions: true\n" + text.substr(11));
    engine.load_string("version: 1\nrules:\n  - {id: r, condition: t > 1, actions: [{type: x}], enabled: false}\n");
    EXPECT_EQ(error_message(Errc::invalid_argument, [&] { engine.on("", [](const Firing&, const Action&) {}); }),
              "RuleEngine::on: the action type must not be empty");
    EXPECT_EQ(error_message(Errc::invalid_argument, [&] { engine.on("x", nullptr); }),
              "RuleEngine::on: the handler for action type 'x' is empty");
}

TEST(RuleEngine, AFailedReloadKeepsTheOldSetAndItsStates) {
    RuleEngine engine = one_rule("for: 30");
    Context c = engine.context();
    EXPECT_EQ(at(engine, c, 0, 90), "inactive>pending");
    EXPECT_EQ(error_message(Errc::parse,
                            [&] { engine.load_string("version: 1\nrules: [{id: x}]\n", Format::yaml, "new.yaml"); }),
              "new.yaml:2:9: rules[0]: missing required field 'condition'");
    ASSERT_NE(engine.rules(), nullptr);
    EXPECT_EQ(engine.rules()->rules()[0].id, "hot");
    EXPECT_EQ(engine.state("hot"), RuleState::pending);
    EXPECT_EQ(at(engine, c, 30, 90), "F pending>firing");
}

TEST(RuleEngine, AVariableKeepsItsTypeAcrossReloads) {
    RuleEngine engine({.allow_unhandled_actions = true});
    engine.load_string(
        "version: 1\nvariables: {t: number}\nrules: [{id: a, condition: t > 1, actions: [{type: x}]}]\n");
    EXPECT_EQ(error_message(Errc::parse,
                            [&] {
                                engine.load_string(
                                    "version: 1\nvariables: {t: string, fresh: number}\n"
                                    "rules: [{id: b, condition: \"t == 'x' && fresh > 1\", actions: [{type: x}]}]\n",
                                    Format::yaml, "new.yaml");
                            }),
              "new.yaml:2:16: variables.t: variable 't' is declared string here, but this engine already knows it as "
              "number from an earlier rule set (a variable keeps its type for the life of an engine)");
    EXPECT_EQ(engine.rules()->rules()[0].id, "a");
    // The failed set left nothing behind in the shared symbols.
    EXPECT_FALSE(engine.symbols()->find("fresh").has_value());
}

TEST(RuleEngine, StatesSurviveAReloadWhenIdAndConditionAreUnchanged) {
    RuleEngine engine({.allow_unhandled_actions = true});
    const std::string head = "version: 1\nmacros: {warm: t > 50}\nrules:\n";
    engine.load_string(head +
                       "  - {id: a, condition: t > 80, for: 30, actions: [{type: x}]}\n"
                       "  - {id: b, condition: t > 80, for: 30, actions: [{type: x}]}\n"
                       "  - {id: c, condition: warm, for: 30, actions: [{type: x}]}\n");
    Context c = engine.context();  // made before the reload, still valid after
    c.set("t", 90.0);
    engine.evaluate(c, 0);
    // `a` changes only its description and priority, `b` its condition, and
    // `c` the macro it uses; `d` is new and uses a new variable.
    engine.load_string(
        "version: 1\nmacros: {warm: t > 60}\nrules:\n"
        "  - {id: a, description: new, priority: 5, condition: t > 80, for: 30, actions: [{type: x}]}\n"
        "  - {id: b, condition: t > 81, for: 30, actions: [{type: x}]}\n"
        "  - {id: c, condition: warm, for: 30, actions: [{type: x}]}\n"
        "  - {id: d, condition: u > 1, actions: [{type: x}]}\n");
    EXPECT_EQ(engine.state("a"), RuleState::pending);
    EXPECT_EQ(engine.state("b"), RuleState::inactive);
    EXPECT_EQ(engine.state("c"), RuleState::inactive);
    c.set("u", 2.0);
    const Evaluation e = engine.evaluate(c, 30);
    EXPECT_EQ(fired(e), (std::vector<std::string>{"a", "d"}));
    EXPECT_EQ(engine.state("b"), RuleState::pending);
}

TEST(RuleEngine, TimeMustNotGoBackwards) {
    RuleEngine engine = one_rule("");
    Context c = engine.context();
    c.set("t", 1.0);
    engine.evaluate(c, 10);
    engine.evaluate(c, 10);
    EXPECT_EQ(error_message(Errc::invalid_argument, [&] { engine.evaluate(c, 5); }),
              "RuleEngine::evaluate: time 5 is before the previous evaluation's time 10 (time must not go backwards)");
    RuleEngine other = one_rule("");
    EXPECT_EQ(error_message(Errc::invalid_argument, [&] { engine.evaluate(other.context(), 20); }),
              "RuleEngine::evaluate: the context was not made by this engine (use RuleEngine::context())");
}

TEST(RuleEngine, ExplainAndLookups) {
    RuleEngine engine;
    EXPECT_EQ(engine.rules(), nullptr);
    EXPECT_EQ(error_message(Errc::not_found, [&] { engine.state("hot"); }), "no rule 'hot': no rule set is loaded");
    engine = one_rule("");
    Context c = engine.context();
    c.set("t", 91.5);
    const auto steps = engine.explain("hot", c);
    ASSERT_FALSE(steps.empty());
    EXPECT_EQ(steps[0].text, "t > 80");
    EXPECT_EQ(steps[0].value, "true");
    EXPECT_EQ(error_message(Errc::not_found, [&] { engine.explain("hto", c); }),
              "no rule 'hto' in the loaded rule set (did you mean 'hot'?)");
    EXPECT_EQ(to_string(RuleState::pending), "pending");
}

}  // namespace
}  // namespace cohort
