// One rule of a rule file (the schema is at the top of rule_file.cpp), read
// through an optional template substitution so that plain rules and rules a
// template makes are checked by the same code.
#include "rules/rule_reader.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>

#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace cohort::detail {

namespace {

bool identifier_char(char c, bool first) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
           (!first && std::isdigit(static_cast<unsigned char>(c)));
}

std::optional<int64_t> parse_integer(std::string_view text) {
    if (!text.empty() && text[0] == '+') text.remove_prefix(1);
    int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

// Only what YAML calls a float: digits, a point, an exponent. from_chars
// alone would also take "inf" and "nan".
std::optional<double> parse_number(std::string_view text) {
    if (!text.empty() && text[0] == '+') text.remove_prefix(1);
    const std::string_view digits = !text.empty() && text[0] == '-' ? text.substr(1) : text;
    if (digits.empty() || !(std::isdigit(static_cast<unsigned char>(digits[0])) || digits[0] == '.'))
        return std::nullopt;
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

std::optional<bool> parse_bool(std::string_view text) {
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
    return std::nullopt;
}

Action read_action(const Document& document, const Field& field, const Substitution* subst, std::string& type_origin) {
    field.expect_map({"type", "target", "parameters"});
    Action action;
    auto type = field.get("type");
    if (!type) field.fail("missing required field 'type'");
    action.type = read_text(*type, subst);
    type_origin = locate(document, *type);
    if (auto f = field.get("target")) action.target = read_text(*f, subst);
    if (auto f = field.get("parameters")) {
        for (const auto& [name, value] : read_entries(document, *f, "parameter names to values")) {
            if (!value.node().IsScalar())
                value.fail(fmt::format("expected a single value (text, a number or true/false), got {}",
                                       describe(value.node())));
            action.parameters.emplace(name, typed_value(read_scalar(value, subst)));
        }
    }
    return action;
}

}  // namespace

std::vector<Placeholder> find_placeholders(std::string_view text) {
    std::vector<Placeholder> out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '{') continue;
        std::size_t j = i + 1;
        while (j < text.size() && identifier_char(text[j], j == i + 1)) ++j;
        if (j > i + 1 && j < text.size() && text[j] == '}') {
            out.push_back({std::string(text.substr(i + 1, j - i - 1)), i, j + 1});
            i = j;
        }
    }
    return out;
}

Scalar Substitution::apply(const Scalar& scalar) const {
    const auto found = find_placeholders(scalar.text);
    if (found.empty()) return scalar;
    // Placeholders were checked against the parameters when the template was
    // read, and every parameter has a value by now.
    if (found.size() == 1 && found[0].begin == 0 && found[0].end == scalar.text.size())
        return values.find(found[0].name)->second;
    Scalar out{std::string(), false};
    std::size_t at = 0;
    for (const Placeholder& p : found) {
        out.text.append(scalar.text, at, p.begin - at);
        out.text += values.find(p.name)->second.text;
        at = p.end;
    }
    out.text.append(scalar.text, at);
    return out;
}

std::string describe(const YAML::Node& node) {
    switch (node.Type()) {
        case YAML::NodeType::Map:
            return "a mapping";
        case YAML::NodeType::Sequence:
            return "a list";
        case YAML::NodeType::Null:
            return "nothing";
        case YAML::NodeType::Scalar:
            return fmt::format("'{}'", node.Scalar());
        default:
            return "an undefined value";
    }
}

std::string position(const Document& document, const Field& field) {
    const YAML::Mark mark = field.node().Mark();
    if (mark.is_null()) return document.source();
    return fmt::format("{}:{}:{}", document.source(), mark.line + 1, mark.column + 1);
}

std::string locate(const Document& document, const Field& field) {
    if (field.path().empty()) return position(document, field);
    return fmt::format("{}: {}", position(document, field), field.path());
}

std::vector<std::pair<std::string, Field>> read_entries(const Document& document, const Field& field,
                                                        std::string_view what) {
    if (!field.node().IsMap())
        field.fail(fmt::format("expected a mapping of {}, got {}", what, describe(field.node())));
    std::vector<std::pair<std::string, Field>> out;
    for (const auto& entry : field.node()) {
        if (!entry.first.IsScalar()) Field(document, entry.first, field.path()).fail("names must be plain text");
        const std::string name = entry.first.Scalar();
        const std::string path = field.path().empty() ? name : fmt::format("{}.{}", field.path(), name);
        for (const auto& [seen, unused] : out)
            if (seen == name) Field(document, entry.first, path).fail(fmt::format("duplicate name '{}'", name));
        out.emplace_back(name, Field(document, entry.second, path));
    }
    return out;
}

Scalar read_scalar(const Field& field, const Substitution* subst) {
    const YAML::Node& node = field.node();
    if (!node.IsScalar()) field.fail(fmt::format("expected a value, got {}", describe(node)));
    // yaml-cpp tags plain scalars "?" and quoted ones "!"; an explicit tag
    // such as !!str also makes text.
    Scalar scalar{node.Scalar(), node.Tag() == "?"};
    return subst != nullptr ? subst->apply(scalar) : scalar;
}

Value typed_value(const Scalar& scalar) {
    if (scalar.plain) {
        if (auto b = parse_bool(scalar.text)) return Value(*b);
        if (auto i = parse_integer(scalar.text)) return Value(*i);
        if (auto d = parse_number(scalar.text)) return Value(*d);
    }
    return Value(scalar.text);
}

std::string read_text(const Field& field, const Substitution* subst) {
    Scalar scalar = read_scalar(field, subst);
    if (scalar.text.empty()) field.fail("must not be empty");
    return std::move(scalar.text);
}

bool read_bool(const Field& field, const Substitution* subst) {
    const Scalar scalar = read_scalar(field, subst);
    auto b = scalar.plain ? parse_bool(scalar.text) : std::nullopt;
    if (!b) field.fail(fmt::format("expected true or false, got '{}'", scalar.text));
    return *b;
}

int64_t read_integer(const Field& field, const Substitution* subst) {
    const Scalar scalar = read_scalar(field, subst);
    auto i = scalar.plain ? parse_integer(scalar.text) : std::nullopt;
    if (!i) field.fail(fmt::format("expected an integer, got '{}'", scalar.text));
    return *i;
}

double read_duration(const Field& field, const Substitution* subst) {
    const Scalar scalar = read_scalar(field, subst);
    if (!scalar.text.empty() && scalar.text[0] == '-')
        field.fail(fmt::format("must not be negative, got '{}'", scalar.text));
    auto seconds = parse_duration(scalar.text);
    if (!seconds)
        field.fail(
            fmt::format("expected a duration such as 250ms, 30s, 5m, 2h or 1h30m (a plain number is "
                        "seconds), got '{}'",
                        scalar.text));
    return *seconds;
}

std::map<std::string, std::string, std::less<>> read_labels(const Document& document, const Field& field,
                                                            const Substitution* subst) {
    std::map<std::string, std::string, std::less<>> labels;
    for (const auto& [name, value] : read_entries(document, field, "label names to values"))
        labels.emplace(name, read_scalar(value, subst).text);
    return labels;
}

void read_rule(const Document& document, const Field& field, const Substitution* subst, Rule& rule,
               RuleSet::Data::Origin& origin) {
    field.expect_map({"id", "description", "condition", "actions", "priority", "enabled", "for", "keep_firing_for",
                      "cooldown", "labels"});
    auto required = [&](std::string_view name) {
        auto f = field.get(name);
        if (!f) field.fail(fmt::format("missing required field '{}'", name));
        return *f;
    };
    const Field id = required("id");
    rule.id = read_text(id, subst);
    for (char c : rule.id)
        if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c)))
            id.fail(fmt::format("rule id '{}' must not contain spaces or control characters", rule.id));
    origin.id = locate(document, id);
    rule.source = position(document, field);
    if (auto f = field.get("description")) rule.description = read_scalar(*f, subst).text;
    const Field condition = required("condition");
    rule.condition = read_text(condition, subst);
    origin.condition = locate(document, condition);
    const Field actions = required("actions");
    const auto items = actions.items();
    if (items.empty()) actions.fail("a rule needs at least one action");
    for (const Field& item : items) {
        std::string type_origin;
        rule.actions.push_back(read_action(document, item, subst, type_origin));
        origin.action_types.push_back(std::move(type_origin));
    }
    if (auto f = field.get("priority")) rule.priority = read_integer(*f, subst);
    if (auto f = field.get("enabled")) rule.enabled = read_bool(*f, subst);
    if (auto f = field.get("for")) rule.for_seconds = read_duration(*f, subst);
    if (auto f = field.get("keep_firing_for")) rule.keep_firing_for_seconds = read_duration(*f, subst);
    if (auto f = field.get("cooldown")) rule.cooldown_seconds = read_duration(*f, subst);
    if (auto f = field.get("labels")) rule.labels = read_labels(document, *f, subst);
}

}  // namespace cohort::detail
