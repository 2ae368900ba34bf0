#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

namespace cohort_rules {

namespace {

// ---------------------------------------------------------------- JSON
// By hand, so numbers read as written ("0.5", "30.0") and keys keep order.

void put_string(std::string& out, std::string_view text) {
    out += '"';
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += ch;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c < 0x20) {
            fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        } else {
            out += ch;
        }
    }
    out += '"';
}

void put_number(std::string& out, double value) {
    if (!std::isfinite(value)) {
        out += "null";
        return;
    }
    std::string text = fmt::format("{}", value);
    if (text.find_first_of(".e") == std::string::npos) text += ".0";
    out += text;
}

void put_value(std::string& out, const cohort::Value& value) {
    switch (value.type().value_or(cohort::Type::list)) {
        case cohort::Type::boolean:
            out += value.as_bool() ? "true" : "false";
            break;
        case cohort::Type::integer:
            out += fmt::format("{}", value.as_int());
            break;
        case cohort::Type::number:
            put_number(out, value.as_number());
            break;
        case cohort::Type::string:
            put_string(out, value.as_string());
            break;
        default:
            out += "null";
            break;
    }
}

// {"k":v,...} for a map, each value written by `put`.
template <typename Map, typename Put>
void put_map(std::string& out, const Map& map, Put put) {
    out += '{';
    for (auto it = map.begin(); it != map.end(); ++it) {
        if (it != map.begin()) out += ',';
        put_string(out, it->first);
        out += ':';
        put(out, it->second);
    }
    out += '}';
}

void put_strings(std::string& out, const std::string& text) {
    put_string(out, text);
}

std::string evaluation_json(const cohort::Evaluation& ev, double time, const States& states) {
    std::string out = "{\"time\":";
    put_number(out, time);
    out += ",\"fired\":[";
    for (size_t i = 0; i < ev.fired.size(); ++i) {
        const cohort::Firing& f = ev.fired[i];
        out += i ? ",{\"rule\":" : "{\"rule\":";
        put_string(out, f.rule);
        out += fmt::format(",\"priority\":{},\"actions\":[", f.priority);
        for (size_t a = 0; a < f.actions.size(); ++a) {
            out += a ? ",{\"type\":" : "{\"type\":";
            put_string(out, f.actions[a].type);
            out += ",\"target\":";
            put_string(out, f.actions[a].target);
            out += ",\"parameters\":";
            put_map(out, f.actions[a].parameters, put_value);
            out += '}';
        }
        out += "],\"labels\":";
        put_map(out, f.labels, put_strings);
        out += '}';
    }
    out += "],\"events\":[";
    for (size_t i = 0; i < ev.events.size(); ++i) {
        const cohort::RuleEvent& e = ev.events[i];
        out += i ? ",{\"rule\":" : "{\"rule\":";
        put_string(out, e.rule);
        out +=
            fmt::format(",\"from\":\"{}\",\"to\":\"{}\",\"time\":", cohort::to_string(e.from), cohort::to_string(e.to));
        put_number(out, e.time);
        out += '}';
    }
    out += "],\"errors\":[";
    for (size_t i = 0; i < ev.errors.size(); ++i) {
        out += i ? ",{\"rule\":" : "{\"rule\":";
        put_string(out, ev.errors[i].rule);
        out += ",\"message\":";
        put_string(out, ev.errors[i].message);
        out += '}';
    }
    out += "],\"states\":{";
    for (size_t i = 0; i < states.size(); ++i) {
        if (i) out += ',';
        put_string(out, states[i].first);
        out += fmt::format(":\"{}\"", cohort::to_string(states[i].second));
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
            std::any_of(ev.fired.begin(), ev.fired.end(), [&](const cohort::Firing& f) { return f.rule == rule; });
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
        std::string out = "[";
        for (size_t i = 0; i < steps.size(); ++i) {
            out += i ? ",{\"text\":" : "{\"text\":";
            put_string(out, steps[i].text);
            out += ",\"value\":";
            put_string(out, steps[i].value);
            out += fmt::format(",\"depth\":{}}}", steps[i].depth);
        }
        fmt::print("{}]\n", out);
        return;
    }
    fmt::print("rule {} (priority {}{}): {}\n", rule.id, rule.priority, rule.enabled ? "" : ", disabled",
               rule.condition);
    for (const cohort::ExplainStep& step : steps)
        fmt::print("{:{}}{}  =>  {}\n", "", 2 * (step.depth + 1), step.text, step.value);
}

}  // namespace cohort_rules
