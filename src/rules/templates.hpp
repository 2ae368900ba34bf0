// Rule templates: parameterised groups of rules, read from `templates:` and
// instantiated by `- use: NAME` items of a `rules:` list.
#pragma once

#include "config/document.hpp"
#include "rules/rule_reader.hpp"
#include "rules/rule_set_data.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cohort::detail {

struct TemplateParameter {
    std::string name;
    std::optional<Scalar> fallback;  // the `default`, if any
};

struct RuleTemplate {
    std::string name;
    const Document* document = nullptr;  // outlives the template (the loader keeps it)
    std::optional<Field> rules;          // the template's `rules` list
    std::vector<TemplateParameter> parameters;
};

using Templates = std::map<std::string, RuleTemplate, std::less<>>;

// Reads and checks one template: every `{placeholder}` in its rules names a
// parameter. A parameter no rule uses is a warning.
RuleTemplate read_template(const Document& document, const Field& field, const std::string& name,
                           std::vector<std::string>& warnings);

// The rules one `- use: NAME` item yields, with their origins.
struct Instance {
    Rule rule;
    RuleSet::Data::Origin origin;
};
std::vector<Instance> instantiate(const Templates& templates, const Document& document, const Field& item);

}  // namespace cohort::detail
