// How the rules part of the C ABI writes its results (evaluations,
// explanations, rule sets, values) as JSON and text. Written by hand rather
// than with Boost.JSON so numbers read as people write them: "0.5", "30.0",
// not "5E-1", "3E1".
#pragma once

#include "handles.hpp"

#include <cmath>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace cohort::capi::json {

inline void put_string(std::string& out, std::string_view text) {
    out += '"';
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (c < 0x20)
                    fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
                else
                    out += ch;
        }
    }
    out += '"';
}

// Always with a '.' or exponent, so a reader keeps it a float; null if not finite.
inline void put_number(std::string& out, double value) {
    if (!std::isfinite(value)) {
        out += "null";
        return;
    }
    std::string text = fmt::format("{}", value);
    if (text.find_first_of(".e") == std::string::npos) text += ".0";
    out += text;
}

inline void put_value(std::string& out, const cohort::Value& value) {
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
            break;  // missing (a Value holds no lists)
    }
}

inline void put_key(std::string& out, bool& first, std::string_view key) {
    if (!first) out += ',';
    first = false;
    put_string(out, key);
    out += ':';
}

template <typename Map, typename Put>
inline void put_object(std::string& out, const Map& map, Put put) {
    out += '{';
    bool first = true;
    for (const auto& [key, value] : map) {
        put_key(out, first, key);
        put(out, value);
    }
    out += '}';
}

template <typename Range, typename Put>
inline void put_array(std::string& out, const Range& range, Put put) {
    out += '[';
    bool first = true;
    for (const auto& item : range) {
        if (!first) out += ',';
        first = false;
        put(out, item);
    }
    out += ']';
}

inline void put_text(std::string& out, const std::string& text) {
    put_string(out, text);
}

inline void put_actions(std::string& out, const std::vector<cohort::Action>& actions) {
    put_array(out, actions, [](std::string& o, const cohort::Action& a) {
        o += "{\"type\":";
        put_string(o, a.type);
        o += ",\"target\":";
        put_string(o, a.target);
        o += ",\"parameters\":";
        put_object(o, a.parameters, put_value);
        o += '}';
    });
}

inline std::string outcome_json(const cohort::Outcome& outcome) {
    constexpr const char* kNames[] = {"no", "yes", "unknown"};
    std::string out = fmt::format("{{\"truth\":\"{}\",\"missing\":", kNames[static_cast<int>(outcome.truth)]);
    put_array(out, outcome.missing, put_text);
    out += ",\"error\":";
    put_string(out, outcome.error);
    out += '}';
    return out;
}

inline std::string explain_json(const std::vector<cohort::ExplainStep>& steps) {
    std::string out;
    put_array(out, steps, [](std::string& o, const cohort::ExplainStep& step) {
        o += "{\"text\":";
        put_string(o, step.text);
        o += ",\"value\":";
        put_string(o, step.value);
        o += fmt::format(",\"depth\":{}}}", step.depth);
    });
    return out;
}

inline std::string evaluation_json(const cohort::Evaluation& ev, const cohort_rules& rules, double now) {
    std::string out = "{\"time\":";
    put_number(out, now);
    out += ",\"fired\":";
    put_array(out, ev.fired, [](std::string& o, const cohort::Firing& f) {
        o += "{\"rule\":";
        put_string(o, f.rule);
        o += fmt::format(",\"priority\":{},\"actions\":", f.priority);
        put_actions(o, f.actions);
        o += ",\"labels\":";
        put_object(o, f.labels, put_text);
        o += '}';
    });
    out += ",\"events\":";
    put_array(out, ev.events, [](std::string& o, const cohort::RuleEvent& e) {
        o += "{\"rule\":";
        put_string(o, e.rule);
        o +=
            fmt::format(",\"from\":\"{}\",\"to\":\"{}\",\"time\":", cohort::to_string(e.from), cohort::to_string(e.to));
        put_number(o, e.time);
        o += '}';
    });
    out += ",\"errors\":[";
    bool first = true;
    for (const cohort::RuleError& e : ev.errors) {
        out += first ? "{\"rule\":" : ",{\"rule\":";
        first = false;
        put_string(out, e.rule);
        out += ",\"message\":";
        put_string(out, e.message);
        out += '}';
    }
    for (const cohort_rules::HandlerFailure& f : rules.failures) {
        out += first ? "{\"rule\":" : ",{\"rule\":";
        first = false;
        put_string(out, f.rule);
        out += ",\"message\":";
        put_string(out, fmt::format("action '{}' handler failed: it returned {}{}", f.action_type, f.status,
                                    f.target.empty() ? "" : fmt::format(" (target '{}')", f.target)));
        out += ",\"action\":";
        put_string(out, f.action_type);
        out += fmt::format(",\"status\":{}}}", f.status);
    }
    out += "]}";
    return out;
}

inline std::string describe_json(const cohort::RuleSet* set) {
    std::string out = "{\"rules\":";
    const std::vector<cohort::Rule> none;
    put_array(out, set ? set->rules() : none, [](std::string& o, const cohort::Rule& r) {
        bool first = true;
        o += '{';
        put_key(o, first, "id");
        put_string(o, r.id);
        put_key(o, first, "description");
        put_string(o, r.description);
        put_key(o, first, "condition");
        put_string(o, r.condition);
        o += fmt::format(",\"priority\":{},\"enabled\":{}", r.priority, r.enabled);
        put_key(o, first, "for");
        put_number(o, r.for_seconds);
        put_key(o, first, "keep_firing_for");
        put_number(o, r.keep_firing_for_seconds);
        put_key(o, first, "cooldown");
        put_number(o, r.cooldown_seconds);
        put_key(o, first, "labels");
        put_object(o, r.labels, put_text);
        put_key(o, first, "actions");
        put_actions(o, r.actions);
        put_key(o, first, "source");
        put_string(o, r.source);
        o += '}';
    });
    out += ",\"variables\":";
    const std::map<std::string, cohort::Type, std::less<>> no_variables;
    put_object(out, set ? set->variables() : no_variables,
               [](std::string& o, cohort::Type type) { put_string(o, cohort::to_string(type)); });
    out += ",\"warnings\":";
    const std::vector<std::string> no_warnings;
    put_array(out, set ? set->warnings() : no_warnings, put_text);
    out += fmt::format(",\"allow_unhandled_actions\":{}}}", set ? set->allows_unhandled_actions() : false);
    return out;
}

// A value as plain text: "true", "42", "0.5", strings unquoted.
inline std::string plain_text(const cohort::Value& value) {
    switch (value.type().value_or(cohort::Type::list)) {
        case cohort::Type::boolean:
            return value.as_bool() ? "true" : "false";
        case cohort::Type::integer:
            return fmt::format("{}", value.as_int());
        case cohort::Type::number:
            return fmt::format("{}", value.as_number());
        case cohort::Type::string:
            return value.as_string();
        default:
            return "";
    }
}

}  // namespace cohort::capi::json
