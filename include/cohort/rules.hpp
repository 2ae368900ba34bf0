// Rule sets and the rule engine: conditions with actions, loaded from YAML
// or JSON (macros, lists, templates, includes), evaluated against a context
// at a time the caller passes in, with Prometheus-style pending/firing states,
// `for`, `keep_firing_for` and `cooldown`. The file schema is in docs/rules.md.
#pragma once

#include <cohort/expression.hpp>
#include <cohort/format.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

struct Action {
    std::string type;    // e.g. "reduce_prefetch"; handlers are registered per type
    std::string target;  // what it acts on; may be empty
    std::map<std::string, Value, std::less<>> parameters;
};

struct Rule {
    std::string id;
    std::string description;
    std::string condition;  // as written, macros not yet expanded
    std::vector<Action> actions;
    int64_t priority = 0;  // higher first
    bool enabled = true;
    double for_seconds = 0;              // must hold this long before firing
    double keep_firing_for_seconds = 0;  // stays firing this long after clearing
    double cooldown_seconds = 0;         // at least this long between two firings
    std::map<std::string, std::string, std::less<>> labels;
    std::string source;  // "file:line:column" of the rule's definition
};

// A parsed, validated rule set: templates instantiated, macros and lists
// resolved, every condition compiled.
class COHORT_API RuleSet {
public:
    // Follows `include`s (files and directories, relative to the including
    // file). Throws Error(parse) naming file:line:column and the field path.
    static RuleSet from_file(const std::filesystem::path& path);
    static RuleSet from_string(std::string_view text, Format format = Format::automatic,
                               std::string_view source_name = "<string>");

    RuleSet(RuleSet&&) noexcept;
    RuleSet& operator=(RuleSet&&) noexcept;
    ~RuleSet();

    const std::vector<Rule>& rules() const;
    const Definitions& definitions() const;
    // Declared variable types (the `variables` section).
    const std::map<std::string, Type, std::less<>>& variables() const;
    bool allows_unhandled_actions() const;
    // Warnings that do not stop loading (a disabled rule with an unknown
    // action type, a list no rule uses, ...).
    const std::vector<std::string>& warnings() const;

    struct Data;

private:
    explicit RuleSet(std::unique_ptr<Data> data);
    friend class RuleEngine;
    std::unique_ptr<Data> data_;
};

enum class RuleState : uint8_t { inactive = 0, pending = 1, firing = 2 };
COHORT_API std::string_view to_string(RuleState state) noexcept;

// A rule whose actions are due at this evaluation.
struct Firing {
    std::string rule;
    int64_t priority = 0;
    std::vector<Action> actions;
    std::map<std::string, std::string, std::less<>> labels;
};

// A rule that changed state.
struct RuleEvent {
    std::string rule;
    RuleState from = RuleState::inactive;
    RuleState to = RuleState::inactive;
    double time = 0;  // seconds, as passed to evaluate
};

// A rule that could not be decided (a type error, variables missing), or
// whose action handler failed.
struct RuleError {
    std::string rule;
    std::string message;
    std::string action;  // the action type whose handler failed, else empty
};

struct Evaluation {
    std::vector<Firing> fired;  // every rule that fires, highest priority first
    std::vector<RuleEvent> events;
    std::vector<RuleError> errors;
};

struct EngineOptions {
    // Accept action types with no registered handler (the CLI does).
    bool allow_unhandled_actions = false;
};

// Called for each action of each firing rule, in priority order.
using ActionHandler = std::function<void(const Firing& firing, const Action& action)>;

// JSON forms of what the engine returns, numbers as people write them
// ("0.5", "30.0"): for the C ABI, the CLI and anyone logging results.
COHORT_API std::string to_json(const Value& value);
COHORT_API std::string to_json(const Outcome& outcome);  // {"truth","missing","error"}
COHORT_API std::string to_json(const std::vector<ExplainStep>& steps);  // [{"text","value","depth"}]
// {"time","fired":[{"rule","priority","actions":[{"type","target","parameters"}],"labels"}],
//  "events":[{"rule","from","to","time"}],"errors":[{"rule","message"[,"action"]}]}
COHORT_API std::string to_json(const Evaluation& evaluation, double time);
// {"rules":[...],"variables":{...},"warnings":[...],"allow_unhandled_actions":bool}
COHORT_API std::string to_json(const RuleSet& rules);

class COHORT_API RuleEngine {
public:
    explicit RuleEngine(EngineOptions options = {});
    RuleEngine(RuleEngine&&) noexcept;
    RuleEngine& operator=(RuleEngine&&) noexcept;
    ~RuleEngine();

    // Register before loading: loading checks every action type has one.
    void on(std::string_view action_type, ActionHandler handler);

    // Loads (or hot-reloads) a rule set. On any error the last good set keeps
    // running and the Error is thrown. Rules whose id and condition are
    // unchanged keep their state.
    void load(const std::filesystem::path& path);
    void load_string(std::string_view text, Format format = Format::automatic,
                     std::string_view source_name = "<string>");
    void load(RuleSet rules);

    // Evaluates every enabled rule at time `now` (seconds, any epoch, never
    // going backwards), runs the handlers of those that fire and returns them.
    Evaluation evaluate(const Context& context, double now);
    // Every sub-expression's value for one rule. Throws Error(not_found).
    std::vector<ExplainStep> explain(std::string_view rule, const Context& context) const;

    // A context for the loaded rules' variables (it stays valid across reloads).
    Context context() const;
    const std::shared_ptr<Symbols>& symbols() const;
    const RuleSet* rules() const;  // null before the first load
    RuleState state(std::string_view rule) const;  // Error(not_found) if none

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
