// RuleSet: the parsed rules and the parts of their definitions that an
// engine needs again when it compiles them against its own symbols.
#include "rules/rule_set_data.hpp"

#include <cohort/error.hpp>

#include <cctype>

#include <fmt/format.h>

namespace cohort {

namespace {

// Calls `f` with every name in a condition's text, skipping string literals
// and numbers with units (`100MB`). Cheaper and more forgiving than parsing:
// it only has to find which macros and lists a condition may use.
template <typename F>
void for_each_name(std::string_view text, F&& f) {
    auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; };
    std::size_t i = 0;
    while (i < text.size()) {
        const char c = text[i];
        if (c == '\'' || c == '"') {
            ++i;
            while (i < text.size() && text[i] != c) i += text[i] == '\\' ? 2 : 1;
            ++i;
        } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            std::size_t j = i;
            while (j < text.size() && word_char(text[j])) ++j;
            f(text.substr(i, j - i));
            i = j;
        } else if (std::isdigit(static_cast<unsigned char>(c))) {
            while (i < text.size() && word_char(text[i])) ++i;
        } else {
            ++i;
        }
    }
}

}  // namespace

std::vector<Expression> RuleSet::Data::compile(const std::shared_ptr<Symbols>& symbols) const {
    for (const auto& [name, type] : variables) {
        // Symbols::declare would say so too, but not where.
        if (auto slot = symbols->find(name)) {
            if (auto known = symbols->declared(*slot); known && *known != type) {
                throw Error(Errc::parse,
                            fmt::format("{}: variable '{}' is declared {} here, but this engine already knows it as {} "
                                        "from an earlier rule set (a variable keeps its type for the life of an "
                                        "engine)",
                                        variable_origins.at(name), name, to_string(type), to_string(*known)));
            }
        }
        symbols->declare(name, type);
    }
    // A broken macro is reported at its own definition, before any rule
    // that uses it.
    for (const auto& [name, text] : definitions.macros)
        Expression::compile(text, symbols, definitions, macro_origins.at(name));
    std::vector<Expression> out;
    out.reserve(rules.size());
    for (std::size_t i = 0; i < rules.size(); ++i) {
        Expression condition = Expression::compile(rules[i].condition, symbols, definitions, origins[i].condition);
        if (auto type = condition.type(); type && *type != Type::boolean)
            throw Error(Errc::parse, fmt::format("{}: the condition gives a {}, not true or false",
                                                 origins[i].condition, to_string(*type)));
        out.push_back(std::move(condition));
    }
    return out;
}

std::set<std::string, std::less<>> RuleSet::Data::used_definitions(std::string_view text) const {
    std::set<std::string, std::less<>> used;
    std::vector<std::string_view> pending{text};
    while (!pending.empty()) {
        const std::string_view next = pending.back();
        pending.pop_back();
        for_each_name(next, [&](std::string_view name) {
            if (auto macro = definitions.macros.find(name); macro != definitions.macros.end()) {
                if (used.emplace(name).second) pending.push_back(macro->second);
            } else if (definitions.lists.contains(name)) {
                used.emplace(name);
            }
        });
    }
    return used;
}

std::string RuleSet::Data::fingerprint(std::size_t rule) const {
    std::string out = rules[rule].condition;
    for (const std::string& name : used_definitions(out)) {
        if (auto macro = definitions.macros.find(name); macro != definitions.macros.end()) {
            out += fmt::format("\nmacro {} = {}", name, macro->second);
        } else {
            out += fmt::format("\nlist {} =", name);
            for (const Value& v : definitions.lists.find(name)->second) out += " " + v.to_string();
        }
    }
    return out;
}

RuleSet::RuleSet(std::unique_ptr<Data> data) : data_(std::move(data)) {}
RuleSet::RuleSet(RuleSet&&) noexcept = default;
RuleSet& RuleSet::operator=(RuleSet&&) noexcept = default;
RuleSet::~RuleSet() = default;

const std::vector<Rule>& RuleSet::rules() const {
    return data_->rules;
}
const Definitions& RuleSet::definitions() const {
    return data_->definitions;
}
const std::map<std::string, Type, std::less<>>& RuleSet::variables() const {
    return data_->variables;
}
bool RuleSet::allows_unhandled_actions() const {
    return data_->allow_unhandled_actions;
}
const std::vector<std::string>& RuleSet::warnings() const {
    return data_->warnings;
}

}  // namespace cohort
