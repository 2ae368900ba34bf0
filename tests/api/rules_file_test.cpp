// Rule files: every field, YAML and JSON alike, includes, and each error a
// user can make with its full message.
#include "support.hpp"

#include <cohort/rules.hpp>

#include <unistd.h>

#include <fstream>

namespace cohort {
namespace {

using test::data_path;
using test::error_message;

RuleSet load(const std::string& text) {
    return RuleSet::from_string(text, Format::yaml, "r.yaml");
}
std::string parse_error(const std::string& text) {
    return error_message(Errc::parse, [&] { load(text); });
}
// A file with one rule whose body is `body` (indented under `- `).
std::string one_rule(const std::string& body) {
    return "version: 1\nrules:\n  - " + body + "\n";
}

TEST(RuleFile, ReadsEveryField) {
    const RuleSet set = RuleSet::from_file(data_path("rules/basic.yaml"));
    ASSERT_EQ(set.rules().size(), 3u);
    const Rule& r = set.rules()[0];
    EXPECT_EQ(r.id, "reduce_prefetch_on_memory_pressure");
    EXPECT_EQ(r.description, "Halve prefetching when GPU memory is nearly full");
    EXPECT_EQ(r.condition, "memory_pressure");
    EXPECT_EQ(r.priority, 10);
    EXPECT_TRUE(r.enabled);
    EXPECT_EQ(r.for_seconds, 30);
    EXPECT_EQ(r.keep_firing_for_seconds, 60);
    EXPECT_EQ(r.cooldown_seconds, 300);
    EXPECT_EQ(r.labels.at("severity"), "warning");
    EXPECT_EQ(r.source, data_path("rules/basic.yaml").string() + ":8:5");
    ASSERT_EQ(r.actions.size(), 1u);
    const Action& a = r.actions[0];
    EXPECT_EQ(a.type, "reduce_prefetch");
    EXPECT_EQ(a.target, "prefetcher");
    // YAML scalar typing: unquoted numbers and booleans are typed.
    EXPECT_EQ(a.parameters.at("factor"), Value(0.5));
    EXPECT_EQ(a.parameters.at("floor"), Value(2));
    EXPECT_EQ(a.parameters.at("adaptive"), Value(true));
    EXPECT_EQ(a.parameters.at("mode"), Value("gentle"));
    EXPECT_EQ(a.parameters.at("window"), Value("30"));
    EXPECT_FALSE(set.rules()[1].enabled);
    EXPECT_EQ(set.rules()[2].priority, -1);
    EXPECT_EQ(set.rules()[2].actions[0].parameters.at("delay"), Value("30s"));
    EXPECT_EQ(set.variables().at("transfer_size"), Type::integer);
    EXPECT_EQ(set.variables().at("gpu_memory"), Type::number);
    EXPECT_EQ(set.definitions().macros.at("memory_pressure"), "gpu_memory > 85");
    EXPECT_EQ(set.definitions().lists.at("model_exts"), (std::vector<Value>{Value(".pt"), Value(".pth")}));
    EXPECT_FALSE(set.allows_unhandled_actions());
    EXPECT_TRUE(set.warnings().empty());
}

TEST(RuleFile, JsonAndYamlGiveTheSameRules) {
    const RuleSet yaml = RuleSet::from_file(data_path("rules/basic.yaml"));
    const RuleSet json = RuleSet::from_file(data_path("rules/basic.json"));
    ASSERT_EQ(yaml.rules().size(), json.rules().size());
    for (std::size_t i = 0; i < yaml.rules().size(); ++i) {
        const Rule& y = yaml.rules()[i];
        const Rule& j = json.rules()[i];
        EXPECT_EQ(y.id, j.id);
        EXPECT_EQ(y.description, j.description);
        EXPECT_EQ(y.condition, j.condition);
        EXPECT_EQ(y.priority, j.priority);
        EXPECT_EQ(y.enabled, j.enabled);
        EXPECT_EQ(y.for_seconds, j.for_seconds);
        EXPECT_EQ(y.keep_firing_for_seconds, j.keep_firing_for_seconds);
        EXPECT_EQ(y.cooldown_seconds, j.cooldown_seconds);
        EXPECT_EQ(y.labels, j.labels);
        ASSERT_EQ(y.actions.size(), j.actions.size());
        for (std::size_t k = 0; k < y.actions.size(); ++k) {
            EXPECT_EQ(y.actions[k].type, j.actions[k].type);
            EXPECT_EQ(y.actions[k].target, j.actions[k].target);
            EXPECT_EQ(y.actions[k].parameters, j.actions[k].parameters) << y.id;
        }
    }
    EXPECT_EQ(yaml.variables(), json.variables());
    EXPECT_EQ(yaml.definitions().macros, json.definitions().macros);
    EXPECT_EQ(yaml.definitions().lists, json.definitions().lists);
}

TEST(RuleFile, Durations) {
    auto rule = [](const std::string& fields) {
        return load(one_rule("{id: a, condition: x > 1, actions: [{type: t}], " + fields + "}")).rules()[0];
    };
    EXPECT_EQ(rule("for: 250ms").for_seconds, 0.25);
    EXPECT_EQ(rule("for: 1h30m").for_seconds, 5400);
    EXPECT_EQ(rule("for: 2h").for_seconds, 7200);
    EXPECT_EQ(rule("for: 90").for_seconds, 90);
    EXPECT_EQ(rule("cooldown: 1.5").cooldown_seconds, 1.5);
    EXPECT_EQ(rule("keep_firing_for: 5m").keep_firing_for_seconds, 300);
    EXPECT_EQ(parse_error(one_rule("{id: a, condition: x > 1, actions: [{type: t}], for: 1h30}")),
              "r.yaml:3:58: rules[0].for: expected a duration such as 250ms, 30s, 5m, 2h or 1h30m (a plain number "
              "is seconds), got '1h30'");
    EXPECT_EQ(parse_error(one_rule("{id: a, condition: x > 1, actions: [{type: t}], cooldown: -5s}")),
              "r.yaml:3:63: rules[0].cooldown: must not be negative, got '-5s'");
}

TEST(RuleFile, MacrosAndListsWorkInConditions) {
    RuleEngine engine({.allow_unhandled_actions = true});
    engine.load(data_path("rules/basic.yaml"));
    Context c = engine.context();
    c.set("gpu_memory", 90.0);
    c.set("active_training", false);
    EXPECT_EQ(engine.evaluate(c, 0).events.size(), 1u);  // pending: `for: 30s`
    EXPECT_EQ(engine.evaluate(c, 30).fired.size(), 1u);

    const std::string text =
        "version: 1\nlists: {exts: ['.pt', '.pth']}\nmacros: {big: size > 1GB, model: ext in exts}\n"
        "rules:\n  - {id: a, condition: model AND big, actions: [{type: t}]}\n";
    EXPECT_TRUE(load(text).warnings().empty());  // both macros and the list are used
    RuleEngine e2({.allow_unhandled_actions = true});
    e2.load_string(text);
    Context c2 = e2.context();
    c2.set("ext", Value(".pth"));
    c2.set("size", Value(int64_t{2'000'000'000}));
    EXPECT_EQ(e2.evaluate(c2, 0).fired.size(), 1u);
    c2.set("ext", Value(".bin"));
    EXPECT_EQ(e2.evaluate(c2, 1).fired.size(), 0u);
}

TEST(RuleFile, IncludesFilesAndFoldersRelativeToTheIncludingFile) {
    const RuleSet set = RuleSet::from_file(data_path("rules/include/main.yaml"));
    std::vector<std::string> ids;
    for (const Rule& r : set.rules()) ids.push_back(r.id);
    // Included files first, a folder's files in name order, each file once
    // (common.yaml is reached three times), notes.txt skipped.
    EXPECT_EQ(ids, (std::vector<std::string>{"pack_a", "pack_b", "main_rule", "high_gpu_temperature"}));
    EXPECT_EQ(set.rules()[0].source, data_path("rules/include/packs/a_pack.json").string() + ":2:12");
    EXPECT_EQ(set.rules()[3].condition, "gpu_temperature > 85");
}

TEST(RuleFile, AnEmptyIncludedFolderIsAWarning) {
    const auto dir = std::filesystem::temp_directory_path() / ("cohort_rules_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir / "empty");
    { std::ofstream(dir / "main.yaml") << "version: 1\ninclude: empty\n"; }
    const RuleSet set = RuleSet::from_file(dir / "main.yaml");
    std::filesystem::remove_all(dir);
    EXPECT_EQ(set.warnings(),
              (std::vector<std::string>{(dir / "main.yaml").string() + ":2:10: include: folder '" +
                                            (dir / "empty").string() + "' holds no .yaml, .yml or .json files",
                                        "the rule set has no rules"}));
}

TEST(RuleFile, IncludeErrors) {
    const std::string cycle = data_path("rules/cycle").string();
    EXPECT_EQ(error_message(Errc::parse, [&] { RuleSet::from_file(data_path("rules/cycle/a.yaml")); }),
              cycle + "/c.yaml:2:11: include[0]: include cycle: " + cycle + "/a.yaml -> " + cycle + "/b.yaml -> " +
                  cycle + "/c.yaml -> " + cycle + "/a.yaml");
    const std::string dir = data_path("rules").string();
    EXPECT_EQ(error_message(Errc::parse, [&] { RuleSet::from_file(data_path("rules/missing_include.yaml")); }),
              dir + "/missing_include.yaml:2:11: include[0]: cannot include 'nope.yaml': " + dir +
                  "/nope.yaml does not exist");
    EXPECT_EQ(error_message(Errc::io, [&] { RuleSet::from_file(data_path("rules/absent.yaml")); }),
              dir + "/absent.yaml: cannot open: No such file or directory");
}

TEST(RuleFile, MalformedText) {
    EXPECT_EQ(parse_error("version: 1\nrules: [\n"), "r.yaml:3:1: malformed YAML: end of sequence flow not found");
    EXPECT_EQ(error_message(Errc::parse, [] { RuleSet::from_string("{\"version\": 1,}", Format::json, "r.json"); }),
              "r.json:1:15: malformed JSON: syntax error");
    EXPECT_EQ(parse_error(""), "r.yaml: empty document: expected a mapping with 'version: 1' and 'rules'");
    EXPECT_EQ(error_message(Errc::invalid_argument, [] { RuleSet::from_string("", Format::listing); }),
              "a rule set is YAML or JSON; the listing format is for datasets");
}

TEST(RuleFile, VersionErrors) {
    EXPECT_EQ(parse_error("rules: []\n"), "r.yaml:1:1: missing required field 'version' (write 'version: 1')");
    EXPECT_EQ(parse_error("version: 2\n"),
              "r.yaml:1:10: version: unsupported version '2' (this cohort reads version 1)");
}

TEST(RuleFile, UnknownFieldsSuggestTheClosest) {
    EXPECT_EQ(parse_error("version: 1\nrulez: []\n"),
              "r.yaml:2:1: rulez: unknown field 'rulez' (did you mean 'rules'?)");
    EXPECT_EQ(parse_error(one_rule("{id: a, condtion: x > 1, actions: [{type: t}]}")),
              "r.yaml:3:13: rules[0].condtion: unknown field 'condtion' (did you mean 'condition'?)");
    EXPECT_EQ(parse_error(one_rule("{id: a, condition: x > 1, actions: [{type: t, paramters: {}}]}")),
              "r.yaml:3:51: rules[0].actions[0].paramters: unknown field 'paramters' (did you mean 'parameters'?)");
}

TEST(RuleFile, WrongTypesAndMissingFields) {
    EXPECT_EQ(parse_error(one_rule("{id: a, condition: x > 1, actions: [{type: t}], priority: high}")),
              "r.yaml:3:63: rules[0].priority: expected an integer, got 'high'");
    EXPECT_EQ(parse_error(one_rule("{id: a, condition: x > 1, actions: [{type: t}], enabled: yes}")),
              "r.yaml:3:62: rules[0].enabled: expected true or false, got 'yes'");
    EXPECT_EQ(parse_error(one_rule("{id: a, condition: x > 1, actions: []}")),
              "r.yaml:3:40: rules[0].actions: a rule needs at least one action");
    EXPECT_EQ(parse_error(one_rule("{id: a, condition: x > 1, actions: {type: t}}")),
              "r.yaml:3:40: rules[0].actions: expected a list, got a mapping");
    EXPECT_EQ(parse_error(one_rule("{id: a, actions: [{type: t}]}")),
              "r.yaml:3:5: rules[0]: missing required field 'condition'");
    EXPECT_EQ(parse_error(one_rule("{condition: x > 1, actions: [{type: t}]}")),
              "r.yaml:3:5: rules[0]: missing required field 'id'");
    EXPECT_EQ(parse_error(one_rule("{id: a, condition: x > 1}")),
              "r.yaml:3:5: rules[0]: missing required field 'actions'");
    EXPECT_EQ(parse_error(one_rule("{id: a, condition: x > 1, actions: [{target: t}]}")),
              "r.yaml:3:41: rules[0].actions[0]: missing required field 'type'");
    EXPECT_EQ(parse_error(one_rule("{id: 'a b', condition: x > 1, actions: [{type: t}]}")),
              "r.yaml:3:10: rules[0].id: rule id 'a b' must not contain spaces or control characters");
    EXPECT_EQ(parse_error(one_rule("{id: a, condition: x > 1, actions: [{type: t, parameters: {p: [1]}}]}")),
              "r.yaml:3:67: rules[0].actions[0].parameters.p: expected a single value (text, a number or "
              "true/false), got a list");
    EXPECT_EQ(parse_error(one_rule("{id: a, condition: x > 1, actions: [{type: t}], labels: [x]}")),
              "r.yaml:3:61: rules[0].labels: expected a mapping of label names to values, got a list");
    EXPECT_EQ(parse_error("version: 1\nrules: {a: 1}\n"), "r.yaml:2:8: rules: expected a list, got a mapping");
}

TEST(RuleFile, DuplicateRuleIdNamesTheFirst) {
    EXPECT_EQ(parse_error("version: 1\nrules:\n  - {id: a, condition: x > 1, actions: [{type: t}]}\n"
                          "  - {id: a, condition: x > 2, actions: [{type: t}]}\n"),
              "r.yaml:4:10: rules[1].id: duplicate rule id 'a' (first defined at r.yaml:3:5)");
}

TEST(RuleFile, ConditionErrorsNameTheRuleField) {
    EXPECT_EQ(parse_error(one_rule("id: a\n    condition: gpu_memory > lenght(x)\n    actions: [{type: t}]")),
              "r.yaml:4:16: rules[0].condition: 1:14: unknown function 'lenght' (did you mean 'len'?)\n"
              "    gpu_memory > lenght(x)\n"
              "                 ^");
    // A bad pattern, with the caret on the part of it at fault.
    EXPECT_EQ(parse_error(one_rule("id: a\n    condition: path matches '(a)\\\\1'\n    actions: [{type: t}]")),
              "r.yaml:4:16: rules[0].condition: 1:18: bad regular expression: back-reference '\\1' is not supported "
              "(matches uses RE2 syntax, which has none)\n"
              "    path matches '(a)\\\\1'\n"
              "                     ^");
    // Declaring variables makes a misspelt one an error.
    EXPECT_EQ(parse_error("version: 1\nvariables: {gpu_memory: number}\nrules:\n"
                          "  - {id: a, condition: gpu_mem > 3, actions: [{type: t}]}\n"),
              "r.yaml:4:24: rules[0].condition: 1:1: unknown variable 'gpu_mem' (did you mean 'gpu_memory'?)\n"
              "    gpu_mem > 3\n"
              "    ^");
    EXPECT_EQ(parse_error("version: 1\nvariables: {x: number}\nrules:\n  - {id: a, condition: x + 1, actions: [{type: "
                          "t}]}\n"),
              "r.yaml:4:24: rules[0].condition: the condition gives a number, not true or false");
    // A broken macro is reported where it is written.
    EXPECT_EQ(parse_error("version: 1\nmacros: {m: 'x >'}\nrules:\n  - {id: a, condition: m, actions: [{type: t}]}\n"),
              "r.yaml:2:13: macros.m: 1:4: expected a value, got the end of the condition\n"
              "    x >\n"
              "       ^");
}

TEST(RuleFile, DefinitionErrors) {
    EXPECT_EQ(parse_error("version: 1\nvariables: {x: flaot}\n"),
              "r.yaml:2:16: variables.x: unknown type 'flaot' (did you mean 'float'?)");
    EXPECT_EQ(parse_error("version: 1\nvariables: {x: number}\nlists: {x: [1]}\n"),
              "r.yaml:3:12: lists.x: 'x' is already defined as a variable at r.yaml:2:16");
    EXPECT_EQ(parse_error("version: 1\nmacros: {in: x > 1}\n"),
              "r.yaml:2:14: macros.in: 'in' cannot be used in conditions: a macro name is letters, digits, '_' and "
              "'.', does not start with a digit and is not a keyword");
    EXPECT_EQ(parse_error("version: 1\nlists: {l: [[1]]}\n"),
              "r.yaml:2:13: lists.l[0]: expected a single value (text, a number or true/false), got a list");
    const RuleSet set = load("version: 1\nlists: {l: [1, 2.5, x, 'y']}\nmacros: {m: x > 1}\n");
    EXPECT_EQ(set.definitions().lists.at("l"), (std::vector<Value>{Value(1), Value(2.5), Value("x"), Value("y")}));
    EXPECT_EQ(set.warnings(), (std::vector<std::string>{"r.yaml:2:12: lists.l: list 'l' is not used by any rule",
                                                        "r.yaml:3:13: macros.m: macro 'm' is not used by any rule",
                                                        "the rule set has no rules"}));
}

TEST(RuleFile, AllowUnhandledActions) {
    EXPECT_TRUE(load("version: 1\nallow_unhandled_actions: true\n").allows_unhandled_actions());
    EXPECT_EQ(parse_error("version: 1\nallow_unhandled_actions: 1\n"),
              "r.yaml:2:26: allow_unhandled_actions: expected true or false, got '1'");
}

}  // namespace
}  // namespace cohort
