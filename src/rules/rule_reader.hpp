// Reading one rule of a rule file, with the scalar typing the schema uses and
// the placeholder substitution templates need. Shared by the file loader
// (rule_file.cpp) and template instantiation (templates.cpp).
#pragma once

#include "config/document.hpp"
#include "rules/rule_set_data.hpp"

#include <cohort/expression.hpp>
#include <cohort/rules.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail {

// A scalar's text and whether it was written plain (unquoted), which is what
// decides its type: plain 30 is an integer, '30' is text.
struct Scalar {
    std::string text;
    bool plain = true;
};

// A `{name}` in a template's text.
struct Placeholder {
    std::string name;
    std::size_t begin = 0, end = 0;  // offsets of '{' and one past '}'
};
std::vector<Placeholder> find_placeholders(std::string_view text);

// The parameter values of one `use:` of a template. A scalar that is exactly
// one placeholder takes the value as it was written (typed); otherwise the
// values' texts are spliced in and the result is text.
struct Substitution {
    std::map<std::string, Scalar, std::less<>> values;
    Scalar apply(const Scalar& scalar) const;
};

// "a mapping", "a list", "nothing", "'text'".
std::string describe(const YAML::Node& node);
// "file:line:column: field.path" for error messages that are raised later
// (condition compilation, duplicate ids, missing action handlers).
std::string locate(const Document& document, const Field& field);
// "file:line:column" of a field.
std::string position(const Document& document, const Field& field);

// The entries of a mapping with text keys, in order; `what` says what the
// mapping holds ("label names to values") for the error message.
std::vector<std::pair<std::string, Field>> read_entries(const Document& document, const Field& field,
                                                        std::string_view what);
// A scalar (not a mapping, list or null), substituted when `subst` is given.
Scalar read_scalar(const Field& field, const Substitution* subst);
// YAML core-schema typing: plain true/false, integers and numbers are typed,
// everything else (quoted text included) is a string.
Value typed_value(const Scalar& scalar);
std::string read_text(const Field& field, const Substitution* subst);  // non-empty
bool read_bool(const Field& field, const Substitution* subst);
int64_t read_integer(const Field& field, const Substitution* subst);
double read_duration(const Field& field, const Substitution* subst);  // seconds, >= 0
std::map<std::string, std::string, std::less<>> read_labels(const Document& document, const Field& field,
                                                            const Substitution* subst);

// One rule mapping (not a `use:`). Errors point into `document`.
void read_rule(const Document& document, const Field& field, const Substitution* subst, Rule& rule,
               RuleSet::Data::Origin& origin);

}  // namespace cohort::detail
