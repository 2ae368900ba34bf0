// Rule templates (the schema is at the top of rule_file.cpp). A template's
// rules stay YAML until a `use:` instantiates them, so every instance is read
// by read_rule with the parameter values substituted, and an error inside one
// names both the `use:` site and the line of the template it came from.
#include "rules/templates.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

namespace cohort::detail {

namespace {

bool is_parameter_name(std::string_view name) {
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
    for (char c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    return true;
}

std::string parameter_list(const RuleTemplate& t) {
    if (t.parameters.empty()) return "it has no parameters";
    std::string out = "its parameters are:";
    for (const TemplateParameter& p : t.parameters) out += fmt::format(" {}", p.name);
    return out;
}

std::optional<std::string_view> closest_parameter(const RuleTemplate& t, std::string_view name) {
    std::vector<std::string_view> names;
    for (const TemplateParameter& p : t.parameters) names.push_back(p.name);
    return closest_word(name, names);
}

void check_parameter_name(const Field& field, const std::string& name) {
    if (!is_parameter_name(name))
        field.fail(
            fmt::format("parameter name '{}' must be letters, digits and '_' (it is written {{{}}} in "
                        "the template's rules)",
                        name, name));
}

// `name: {default: 85}` or `name:` (no default).
TemplateParameter read_parameter(const Field& field, const std::string& name) {
    check_parameter_name(field, name);
    TemplateParameter parameter{name, std::nullopt};
    if (field.is_null()) return parameter;
    if (!field.node().IsMap())
        field.fail(
            fmt::format("expected a mapping such as {{default: 85}}, or nothing, got {}", describe(field.node())));
    field.expect_map({"default", "description"});
    if (auto fallback = field.get("default")) {
        if (!fallback->node().IsScalar())
            fallback->fail(fmt::format("a default must be a single value (text, a number or true/false), got {}",
                                       describe(fallback->node())));
        parameter.fallback = read_scalar(*fallback, nullptr);
    }
    return parameter;
}

// Checks every placeholder of every scalar under `field` and notes which
// parameters are used.
void check_placeholders(const Document& document, const Field& field, const RuleTemplate& t,
                        std::set<std::string, std::less<>>& used) {
    const YAML::Node& node = field.node();
    if (node.IsMap()) {
        for (const auto& entry : node)
            if (entry.first.IsScalar()) check_placeholders(document, *field.get(entry.first.Scalar()), t, used);
    } else if (node.IsSequence()) {
        for (const Field& item : field.items()) check_placeholders(document, item, t, used);
    } else if (node.IsScalar()) {
        for (const Placeholder& p : find_placeholders(node.Scalar())) {
            bool known = false;
            for (const TemplateParameter& parameter : t.parameters) known = known || parameter.name == p.name;
            if (known) {
                used.insert(p.name);
                continue;
            }
            std::string message = fmt::format("unknown placeholder '{{{}}}' in template '{}'", p.name, t.name);
            if (auto near = closest_parameter(t, p.name))
                message += fmt::format(" (did you mean '{{{}}}'?)", *near);
            else
                message += fmt::format(" ({})", parameter_list(t));
            field.fail(message);
        }
    }
}

}  // namespace

RuleTemplate read_template(const Document& document, const Field& field, const std::string& name,
                           std::vector<std::string>& warnings) {
    field.expect_map({"description", "parameters", "rules"});
    RuleTemplate t{name, &document, std::nullopt, {}};
    std::vector<Field> parameter_fields;
    if (auto parameters = field.get("parameters")) {
        if (parameters->node().IsSequence()) {
            for (const Field& item : parameters->items()) {
                const std::string parameter = read_text(item, nullptr);
                for (const TemplateParameter& p : t.parameters)
                    if (p.name == parameter) item.fail(fmt::format("duplicate parameter '{}'", parameter));
                check_parameter_name(item, parameter);
                t.parameters.push_back({parameter, std::nullopt});
                parameter_fields.push_back(item);
            }
        } else {
            for (const auto& [parameter, value] : read_entries(document, *parameters, "parameter names to settings")) {
                t.parameters.push_back(read_parameter(value, parameter));
                parameter_fields.push_back(value);
            }
        }
    }
    auto rules = field.get("rules");
    if (!rules) field.fail("missing required field 'rules'");
    const auto items = rules->items();
    if (items.empty()) rules->fail(fmt::format("template '{}' has no rules", name));
    for (const Field& item : items)
        if (item.node().IsMap() && item.get("use"))
            item.get("use")->fail("a template's rules cannot use another template");
    t.rules = *rules;
    std::set<std::string, std::less<>> used;
    check_placeholders(document, *rules, t, used);
    for (std::size_t i = 0; i < t.parameters.size(); ++i) {
        if (!used.contains(t.parameters[i].name))
            warnings.push_back(fmt::format("{}: parameter '{}' of template '{}' is not used in its rules",
                                           locate(document, parameter_fields[i]), t.parameters[i].name, name));
    }
    return t;
}

std::vector<Instance> instantiate(const Templates& templates, const Document& document, const Field& item) {
    item.expect_map({"use", "with", "id_prefix", "enabled", "priority", "labels"});
    const Field use = *item.get("use");
    const std::string name = read_text(use, nullptr);
    const auto found = templates.find(name);
    if (found == templates.end()) {
        std::vector<std::string_view> names;
        for (const auto& [known, unused] : templates) names.push_back(known);
        std::string message = fmt::format("unknown template '{}'", name);
        if (auto near = closest_word(name, names))
            message += fmt::format(" (did you mean '{}'?)", *near);
        else if (names.empty())
            message += " (no templates are defined)";
        use.fail(message);
    }
    const RuleTemplate& t = found->second;

    Substitution subst;
    const auto with = item.get("with");
    if (with) {
        for (const auto& [parameter, value] : read_entries(document, *with, "parameter names to values")) {
            // No lambda here: clang 14 cannot capture a structured binding.
            if (std::ranges::find(t.parameters, parameter, &TemplateParameter::name) == t.parameters.end()) {
                std::string message = fmt::format("template '{}' has no parameter '{}'", name, parameter);
                if (auto near = closest_parameter(t, parameter))
                    message += fmt::format(" (did you mean '{}'?)", *near);
                else
                    message += fmt::format(" ({})", parameter_list(t));
                value.fail(message);
            }
            if (!value.node().IsScalar())
                value.fail(
                    fmt::format("parameter '{}' of template '{}' needs a single value (text, a number or "
                                "true/false), got {}",
                                parameter, name, describe(value.node())));
            subst.values.emplace(parameter, read_scalar(value, nullptr));
        }
    }
    std::vector<std::string> missing;
    for (const TemplateParameter& p : t.parameters) {
        if (subst.values.contains(p.name)) continue;
        if (p.fallback)
            subst.values.emplace(p.name, *p.fallback);
        else
            missing.push_back(fmt::format("'{}'", p.name));
    }
    if (!missing.empty()) {
        (with ? *with : item)
            .fail(fmt::format("missing {} {} of template '{}' (no default; give {} under 'with')",
                              missing.size() == 1 ? "parameter" : "parameters", fmt::join(missing, ", "), name,
                              missing.size() == 1 ? "it" : "them"));
    }

    std::string id_prefix;
    if (auto f = item.get("id_prefix")) id_prefix = read_text(*f, nullptr);
    const auto enabled = item.get("enabled");
    const auto priority = item.get("priority");
    const auto labels = item.get("labels");

    // Errors inside the template's text name the `use:` first, like a
    // compiler's "in instantiation of".
    const std::string prefix = fmt::format("{}: in template '{}': ", locate(document, item), name);
    std::vector<Instance> out;
    for (const Field& rule_field : t.rules->items()) {
        Instance instance;
        try {
            read_rule(*t.document, rule_field, &subst, instance.rule, instance.origin);
        } catch (const Error& e) {
            throw Error(e.code(), prefix + e.what());
        }
        Rule& rule = instance.rule;
        rule.id = id_prefix + rule.id;
        rule.source = position(document, item);
        if (enabled) rule.enabled = read_bool(*enabled, nullptr);
        if (priority) rule.priority = read_integer(*priority, nullptr);
        if (labels)
            for (auto& [key, value] : read_labels(document, *labels, nullptr)) rule.labels[key] = value;
        RuleSet::Data::Origin& origin = instance.origin;
        origin.id = prefix + origin.id;
        origin.condition = prefix + origin.condition;
        for (std::string& type : origin.action_types) type = prefix + type;
        out.push_back(std::move(instance));
    }
    return out;
}

}  // namespace cohort::detail
