// Rule templates: `use:` with `with:` values and defaults, typed
// substitution, overrides, and each error with its full message.
#include "support.hpp"

#include <cohort/rules.hpp>

namespace cohort {
namespace {

using test::error_message;

RuleSet load(const std::string& text) {
    return RuleSet::from_string(text, Format::yaml, "r.yaml");
}
std::string parse_error(const std::string& text) {
    return error_message(Errc::parse, [&] { load(text); });
}

// A template `high_metric` (lines 2-10) followed by `rules:` at line 11.
const std::string kTemplate = R"(version: 1
templates:
  high_metric:
    description: alert when a metric is high
    parameters: {metric: {}, threshold: {default: 85}, severity: {default: warning}}
    rules:
      - id: "high_{metric}"
        condition: "{metric} > {threshold}"
        labels: {severity: "{severity}"}
        actions: [{type: alert, target: "{metric}", parameters: {value: "{threshold}", note: "over {threshold}"}}]
rules:
)";

TEST(RuleTemplates, InstantiatesWithValuesAndDefaults) {
    const RuleSet set = load(kTemplate +
                             "  - use: high_metric\n    with: {metric: gpu_temperature, threshold: 87}\n"
                             "  - use: high_metric\n    with: {metric: gpu_memory}\n");
    ASSERT_EQ(set.rules().size(), 2u);
    const Rule& hot = set.rules()[0];
    EXPECT_EQ(hot.id, "high_gpu_temperature");
    EXPECT_EQ(hot.condition, "gpu_temperature > 87");
    EXPECT_EQ(hot.labels.at("severity"), "warning");
    EXPECT_EQ(hot.source, "r.yaml:12:5");  // the `use:` site
    const Action& action = hot.actions[0];
    EXPECT_EQ(action.target, "gpu_temperature");
    // A value that is exactly one placeholder keeps the parameter's type;
    // text around a placeholder makes text.
    EXPECT_EQ(action.parameters.at("value"), Value(87));
    EXPECT_EQ(action.parameters.at("note"), Value("over 87"));
    const Rule& full = set.rules()[1];
    EXPECT_EQ(full.id, "high_gpu_memory");
    EXPECT_EQ(full.condition, "gpu_memory > 85");
    EXPECT_EQ(full.actions[0].parameters.at("value"), Value(85));
    EXPECT_TRUE(set.warnings().empty());
}

TEST(RuleTemplates, ValuesKeepTheirYamlTypes) {
    const std::string text = R"(version: 1
templates:
  t:
    parameters: [p]
    rules:
      - {id: a, condition: x > 1, actions: [{type: t, parameters: {v: "{p}"}}]}
rules:
)";
    auto value = [&](const std::string& with) {
        return load(text + "  - {use: t, with: {p: " + with + "}}\n").rules()[0].actions[0].parameters.at("v");
    };
    EXPECT_EQ(value("0.5"), Value(0.5));
    EXPECT_EQ(value("true"), Value(true));
    EXPECT_EQ(value("'30'"), Value("30"));
    EXPECT_EQ(value("model"), Value("model"));
}

TEST(RuleTemplates, SubstitutedConditionsEvaluate) {
    RuleEngine engine;
    std::vector<std::string> alerts;
    engine.on("alert", [&](const Firing& f, const Action&) { alerts.push_back(f.rule); });
    engine.load_string(R"(version: 1
templates:
  kind_is:
    parameters: [kind, size]
    rules:
      - {id: "stage_{kind}", condition: "file_type == '{kind}' AND transfer_size > {size}", actions: [{type: alert}]}
rules:
  - {use: kind_is, with: {kind: model, size: 100MB}}
  - {use: kind_is, with: {kind: dataset, size: 1GB}}
)");
    Context c = engine.context();
    c.set("file_type", Value("model"));
    c.set("transfer_size", Value(int64_t{200'000'000}));
    engine.evaluate(c, 0);
    EXPECT_EQ(alerts, std::vector<std::string>{"stage_model"});
}

TEST(RuleTemplates, OverridesAndIdPrefix) {
    const RuleSet set = load(kTemplate +
                             "  - {use: high_metric, with: {metric: m}, id_prefix: node0_, enabled: false, "
                             "priority: 7, labels: {severity: critical, team: io}}\n"
                             "  - {use: high_metric, with: {metric: m}, id_prefix: node1_}\n");
    const Rule& r = set.rules()[0];
    EXPECT_EQ(r.id, "node0_high_m");
    EXPECT_FALSE(r.enabled);
    EXPECT_EQ(r.priority, 7);
    EXPECT_EQ(r.labels, (std::map<std::string, std::string, std::less<>>{{"severity", "critical"}, {"team", "io"}}));
    EXPECT_EQ(set.rules()[1].id, "node1_high_m");
    EXPECT_TRUE(set.rules()[1].enabled);
}

TEST(RuleTemplates, ParameterErrorsNameTheParameterAndTheTemplate) {
    EXPECT_EQ(parse_error(kTemplate + "  - use: high_metric\n    with: {threshold: 90}\n"),
              "r.yaml:13:11: rules[0].with: missing parameter 'metric' of template 'high_metric' (no default; give it "
              "under 'with')");
    EXPECT_EQ(parse_error(kTemplate + "  - use: high_metric\n"),
              "r.yaml:12:5: rules[0]: missing parameter 'metric' of template 'high_metric' (no default; give it "
              "under 'with')");
    EXPECT_EQ(parse_error(kTemplate + "  - use: high_metric\n    with: {metric: x, treshold: 90}\n"),
              "r.yaml:13:33: rules[0].with.treshold: template 'high_metric' has no parameter 'treshold' (did you "
              "mean 'threshold'?)");
    EXPECT_EQ(parse_error(kTemplate + "  - use: high_metric\n    with: {metric: x, zzz: 90}\n"),
              "r.yaml:13:28: rules[0].with.zzz: template 'high_metric' has no parameter 'zzz' (its parameters are: "
              "metric threshold severity)");
    EXPECT_EQ(parse_error(kTemplate + "  - use: high_metric\n    with: {metric: [a, b]}\n"),
              "r.yaml:13:20: rules[0].with.metric: parameter 'metric' of template 'high_metric' needs a single value "
              "(text, a number or true/false), got a list");
}

TEST(RuleTemplates, UnknownTemplateSuggestsTheClosest) {
    EXPECT_EQ(parse_error(kTemplate + "  - use: high_metrc\n    with: {metric: x}\n"),
              "r.yaml:12:10: rules[0].use: unknown template 'high_metrc' (did you mean 'high_metric'?)");
    EXPECT_EQ(parse_error("version: 1\nrules:\n  - use: t\n"),
              "r.yaml:3:10: rules[0].use: unknown template 't' (no templates are defined)");
    EXPECT_EQ(parse_error(kTemplate + "  - {use: high_metric, with: {metric: x}, priorty: 1}\n"),
              "r.yaml:12:43: rules[0].priorty: unknown field 'priorty' (did you mean 'priority'?)");
}

TEST(RuleTemplates, TemplateDefinitionErrors) {
    const std::string head = "version: 1\ntemplates:\n  t:\n    parameters: [metric]\n    rules:\n";
    EXPECT_EQ(parse_error(head + "      - {id: a, condition: '{metrc} > 1', actions: [{type: t}]}\n"),
              "r.yaml:6:28: templates.t.rules[0].condition: unknown placeholder '{metrc}' in template 't' (did you "
              "mean '{metric}'?)");
    EXPECT_EQ(
        parse_error("version: 1\ntemplates:\n  t:\n    rules:\n      - {id: '{x}', condition: y, actions: [{type: "
                    "t}]}\n"),
        "r.yaml:5:14: templates.t.rules[0].id: unknown placeholder '{x}' in template 't' (it has no parameters)");
    EXPECT_EQ(parse_error(head + "      - {use: other}\n"),
              "r.yaml:6:15: templates.t.rules[0].use: a template's rules cannot use another template");
    EXPECT_EQ(parse_error("version: 1\ntemplates:\n  t:\n    parameters: [metric]\n"),
              "r.yaml:4:5: templates.t: missing required field 'rules'");
    EXPECT_EQ(parse_error("version: 1\ntemplates:\n  t:\n    parameters: {a-b: {}}\n    rules: []\n"),
              "r.yaml:4:23: templates.t.parameters.a-b: parameter name 'a-b' must be letters, digits and '_' (it is "
              "written {a-b} in the template's rules)");
    EXPECT_EQ(parse_error("version: 1\ntemplates:\n  t:\n    parameters: {a: {default: [1]}}\n    rules: []\n"),
              "r.yaml:4:31: templates.t.parameters.a.default: a default must be a single value (text, a number or "
              "true/false), got a list");
    EXPECT_EQ(parse_error("version: 1\ntemplates:\n  t: {rules: [{id: a, condition: x, actions: [{type: t}]}]}\n"
                          "  t: {rules: [{id: b, condition: x, actions: [{type: t}]}]}\n"),
              "r.yaml:4:3: templates.t: duplicate name 't'");
    // An unused parameter is only a warning.
    const RuleSet set = load(head + "      - {id: a, condition: x > 1, actions: [{type: t}]}\n");
    EXPECT_EQ(set.warnings(),
              (std::vector<std::string>{
                  "r.yaml:4:18: templates.t.parameters[0]: parameter 'metric' of template 't' is not used in its rules",
                  "the rule set has no rules"}));
}

TEST(RuleTemplates, ErrorsInsideAnInstanceNameTheUseSite) {
    EXPECT_EQ(parse_error(kTemplate + "  - use: high_metric\n    with: {metric: 'gpu temp'}\n"),
              "r.yaml:12:5: rules[0]: in template 'high_metric': r.yaml:7:13: templates.high_metric.rules[0].id: "
              "rule id 'high_gpu temp' must not contain spaces or control characters");
    EXPECT_EQ(parse_error(kTemplate + "  - use: high_metric\n    with: {metric: x, threshold: '>'}\n"),
              "r.yaml:12:5: rules[0]: in template 'high_metric': r.yaml:8:20: "
              "templates.high_metric.rules[0].condition: 1:5: expected a value, got '>'\n"
              "    x > >\n"
              "        ^");
    EXPECT_EQ(parse_error(kTemplate + "  - {use: high_metric, with: {metric: m}}\n  - {use: high_metric, with: "
                                      "{metric: m, threshold: 90}}\n"),
              "r.yaml:13:5: rules[1]: in template 'high_metric': r.yaml:7:13: templates.high_metric.rules[0].id: "
              "duplicate rule id 'high_m' (first defined at r.yaml:12:5); give each use of the template its own "
              "id_prefix, or put a parameter in the rule's id");
}

}  // namespace
}  // namespace cohort
