// JSON for rule-engine results, written by hand rather than with Boost.JSON
// so that numbers read as people write them: "0.5", "30.0", not "5E-1".
#include <cohort/rules.hpp>

#include <cmath>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace cohort {

namespace {

void put_string(std::string& out, std::string_view text) {
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
void put_number(std::string& out, double value) {
    if (!std::isfinite(value)) {
        out += "null";
        return;
    }
    std::string text = fmt::format("{}", value);
    if (text.find_first_of(".e") == std::string::npos) text += ".0";
    out += text;
}

void put_value(std::string& out, const Value& value) {
    switch (value.type().value_or(Type::list)) {
        case Type::boolean:
            out += value.as_bool() ? "true" : "false";
            break;
        case Type::integer:
            out += fmt::format("{}", value.as_int());
            break;
        case Type::number:
            put_number(out, value.as_number());
            break;
        case Type::string:
            put_string(out, value.as_string());
            break;
        default:
            out += "null";
            break;  // missing (a Value holds no lists)
    }
}

void put_key(std::string& out, bool& first, std::string_view key) {
    if (!first) out += ',';
    first = false;
    put_string(out, key);
    out += ':';
}

// Items between `open` and `close`, comma-separated, each written by put.
template <typename Range, typename Put>
void put_list(std::string& out, char open, char close, const Range& range, Put put) {
    out += open;
    bool first = true;
    for (const auto& item : range) {
        if (!first) out += ',';
        first = false;
        put(out, item);
    }
    out += close;
}

template <typename Range, typename Put>
void put_array(std::string& out, const Range& range, Put put) {
    put_list(out, '[', ']', range, put);
}

template <typename Map, typename Put>
void put_object(std::string& out, const Map& map, Put put) {
    put_list(out, '{', '}', map, [&](std::string& o, const auto& entry) {
        put_string(o, entry.first);
        o += ':';
        put(o, entry.second);
    });
}

void put_text(std::string& out, const std::string& text) {
    put_string(out, text);
}

void put_actions(std::string& out, const std::vector<Action>& actions) {
    put_array(out, actions, [](std::string& o, const Action& a) {
        o += "{\"type\":";
        put_string(o, a.type);
        o += ",\"target\":";
        put_string(o, a.target);
        o += ",\"parameters\":";
        put_object(o, a.parameters, put_value);
        o += '}';
    });
}

}  // namespace

std::string to_json(const Value& value) {
    std::string out;
    put_value(out, value);
    return out;
}

std::string to_json(const Outcome& outcome) {
    constexpr const char* kNames[] = {"no", "yes", "unknown"};
    std::string out = fmt::format("{{\"truth\":\"{}\",\"missing\":", kNames[static_cast<int>(outcome.truth)]);
    put_array(out, outcome.missing, put_text);
    out += ",\"error\":";
    put_string(out, outcome.error);
    out += '}';
    return out;
}

std::string to_json(const std::vector<ExplainStep>& steps) {
    std::string out;
    put_array(out, steps, [](std::string& o, const ExplainStep& step) {
        o += "{\"text\":";
        put_string(o, step.text);
        o += ",\"value\":";
        put_string(o, step.value);
        o += fmt::format(",\"depth\":{}}}", step.depth);
    });
    return out;
}

std::string to_json(const Evaluation& ev, double time) {
    std::string out = "{\"time\":";
    put_number(out, time);
    out += ",\"fired\":";
    put_array(out, ev.fired, [](std::string& o, const Firing& f) {
        o += "{\"rule\":";
        put_string(o, f.rule);
        o += fmt::format(",\"priority\":{},\"actions\":", f.priority);
        put_actions(o, f.actions);
        o += ",\"labels\":";
        put_object(o, f.labels, put_text);
        o += '}';
    });
    out += ",\"events\":";
    put_array(out, ev.events, [](std::string& o, const RuleEvent& e) {
        o += "{\"rule\":";
        put_string(o, e.rule);
        o += fmt::format(",\"from\":\"{}\",\"to\":\"{}\",\"time\":", to_string(e.from), to_string(e.to));
        put_number(o, e.time);
        o += '}';
    });
    out += ",\"errors\":";
    put_array(out, ev.errors, [](std::string& o, const RuleError& e) {
        o += "{\"rule\":";
        put_string(o, e.rule);
        o += ",\"message\":";
        put_string(o, e.message);
        if (!e.action.empty()) {
            o += ",\"action\":";
            put_string(o, e.action);
        }
        o += '}';
    });
    out += '}';
    return out;
}

std::string to_json(const RuleSet& rules) {
    std::string out = "{\"rules\":";
    put_array(out, rules.rules(), [](std::string& o, const Rule& r) {
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
    put_object(out, rules.variables(),
               [](std::string& o, Type type) { put_string(o, to_string(type)); });
    out += ",\"warnings\":";
    put_array(out, rules.warnings(), put_text);
    out += fmt::format(",\"allow_unhandled_actions\":{}}}", rules.allows_unhandled_actions());
    return out;
}

}  // namespace cohort
