// What a RuleSet holds: its rules and definitions, plus where each part was
// written, so that errors found later (when an engine compiles the set
// against its own symbols, or checks action handlers) still point at the
// file, line and column.
#pragma once

#include <cohort/expression.hpp>
#include <cohort/rules.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

struct RuleSet::Data {
    std::vector<Rule> rules;
    Definitions definitions;
    std::map<std::string, Type, std::less<>> variables;
    bool allow_unhandled_actions = false;
    std::vector<std::string> warnings;

    // "file:line:column: field.path" of the parts of one rule. For a rule a
    // template made, the `use:` site comes first, then the template's text.
    struct Origin {
        std::string id;
        std::string condition;
        std::vector<std::string> action_types;  // one per action
    };
    std::vector<Origin> origins;  // one per rule
    std::map<std::string, std::string, std::less<>> variable_origins;
    std::map<std::string, std::string, std::less<>> macro_origins;

    // Declares the variables in `symbols`, compiles every macro (so a broken
    // one is reported where it is written) and every rule's condition, in
    // rule order. Throws Error(parse) naming the place.
    std::vector<Expression> compile(const std::shared_ptr<Symbols>& symbols) const;
    // The rule's condition text and the definitions of the macros and lists
    // it uses: equal fingerprints mean an unchanged condition across reloads.
    std::string fingerprint(std::size_t rule) const;
    // The macros and lists `text` names, following macros into macros.
    std::set<std::string, std::less<>> used_definitions(std::string_view text) const;
};

}  // namespace cohort
