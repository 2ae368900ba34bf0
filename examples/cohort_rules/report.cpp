#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

namespace cohort_rules {

namespace {

// The library's JSON for one evaluation, with the states of every rule added.
std::string evaluation_json(const cohort::Evaluation& ev, double time, const States& states) {
    std::string out = cohort::to_json(ev, time);
    out.pop_back();  // the closing brace
    out += ",\"states\":{";
    for (size_t i = 0; i < states.size(); ++i) {
        if (i) out += ',';
        out += fmt::format("{}:\"{}\"", cohort::to_json(cohort::Value(states[i].first)), cohort::to_string(states[i].second));
    }
    out += "}}";
    return out;
}

std::string parameters_text(const cohort::Action& action) {
    std::string out;
    for (const auto& [name, value] : action.parameters) out += fmt::format(" {}={}", name, value.to_string());
    return out;
}

}  // namespace

void print_check(const std::string& file, const cohort::RuleSet& rules) {
    size_t disabled = 0;
    for (const cohort::Rule& rule : rules.rules()) disabled += rule.enabled ? 0 : 1;
    const size_t n = rules.rules().size();
    fmt::print("{}: ok ({} rule{}{})\n", file, n, n == 1 ? "" : "s",
               disabled ? fmt::format(", {} disabled", disabled) : std::string());
    for (const std::string& warning : rules.warnings()) fmt::print("{}: warning: {}\n", file, warning);
}

void print_evaluation(const cohort::Evaluation& ev, double time, const States& states, bool json) {
    if (json) {
        fmt::print("{}\n", evaluation_json(ev, time, states));
        return;
    }
    if (ev.fired.empty())
        fmt::print("at {}: no rule fired\n", time);
    else
        fmt::print("at {}: {} rule{} fired\n", time, ev.fired.size(), ev.fired.size() == 1 ? "" : "s");
    for (const cohort::Firing& f : ev.fired) {
        fmt::print("  {} (priority {})\n", f.rule, f.priority);
        for (const cohort::Action& a : f.actions)
            fmt::print("    {}{}{}\n", a.type, a.target.empty() ? "" : " -> " + a.target, parameters_text(a));
        if (!f.labels.empty()) {
            std::string labels;
            for (const auto& [key, value] : f.labels) labels += fmt::format(" {}={}", key, value);
            fmt::print("    labels:{}\n", labels);
        }
    }
    // Rules in effect that did not fire now: pending, or firing since earlier.
    std::string pending, firing;
    for (const auto& [rule, state] : states) {
        const bool fired =
            std::ranges::find(ev.fired, rule, &cohort::Firing::rule) != ev.fired.end();  // no lambda: clang 14
        if (state == cohort::RuleState::pending) pending += " " + rule;
        if (state == cohort::RuleState::firing && !fired) firing += " " + rule;
    }
    if (!pending.empty()) fmt::print("  pending:{}\n", pending);
    if (!firing.empty()) fmt::print("  still firing:{}\n", firing);
    if (!ev.events.empty()) fmt::print("  events:\n");
    for (const cohort::RuleEvent& e : ev.events)
        fmt::print("    {}: {} -> {} at {}\n", e.rule, cohort::to_string(e.from), cohort::to_string(e.to), e.time);
    if (!ev.errors.empty()) fmt::print("  errors:\n");
    for (const cohort::RuleError& e : ev.errors) fmt::print("    {}: {}\n", e.rule, e.message);
}

void print_explain(const cohort::Rule& rule, const std::vector<cohort::ExplainStep>& steps, bool json) {
    if (json) {
        fmt::print("{}\n", cohort::to_json(steps));
        return;
    }
    fmt::print("rule {} (priority {}{}): {}\n", rule.id, rule.priority, rule.enabled ? "" : ", disabled",
               rule.condition);
    for (const cohort::ExplainStep& step : steps)
        fmt::print("{:{}}{}  =>  {}\n", "", 2 * (step.depth + 1), step.text, step.value);
}

}  // namespace cohort_rules
