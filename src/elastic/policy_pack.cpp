// Checking a policy pack against what the auto-scaler provides, and finding
// the shipped one.
#include "elastic/policy_pack.hpp"

#include "core/text.hpp"
#include "rules/shipped_pack.hpp"

#include <cohort/error.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace cohort::detail {
namespace {

constexpr std::string_view kPackName = "elastic.yaml";

const PolicyVariable* find_variable(std::string_view name) {
    for (const PolicyVariable& v : kPolicyVariables)
        if (v.name == name) return &v;
    return nullptr;
}

// The first rule whose condition names `variable`, for locating a message.
std::string where_used(const RuleSet& rules, std::string_view variable) {
    for (const Rule& rule : rules.rules())
        if (rule.condition.find(variable) != std::string::npos)
            return fmt::format("{}: rule '{}': ", rule.source, rule.id);
    return {};
}

void check_variables(const RuleSet& rules, const Symbols& symbols) {
    std::vector<std::string_view> names;
    for (const PolicyVariable& v : kPolicyVariables) names.push_back(v.name);
    for (uint32_t slot = 0; slot < symbols.size(); ++slot) {
        const std::string& name = symbols.name(slot);
        const PolicyVariable* known = find_variable(name);
        if (known == nullptr) {
            std::string message = fmt::format("{}the policy uses variable '{}', which the auto-scaler does not set",
                                              where_used(rules, name), name);
            if (auto near = closest_word(name, names)) message += fmt::format(" (did you mean '{}'?)", *near);
            message += fmt::format("; it sets: {}", fmt::join(names, ", "));
            throw Error(Errc::parse, message);
        }
        const std::optional<Type> declared = symbols.declared(slot);
        // An int is accepted where a number is declared (Context::set allows it).
        if (declared && *declared != known->type && !(known->type == Type::integer && *declared == Type::number))
            throw Error(Errc::parse,
                        fmt::format("the policy declares variable '{}' as {}, but the auto-scaler sets it as {}; "
                                    "declare it '{}'",
                                    name, to_string(*declared), to_string(known->type), to_string(known->type)));
    }
}

void check_action(const Rule& rule, const Action& action) {
    const bool on_node = action.type == "relaunch" || action.type == "replace" || action.type == "remove";
    const bool on_job = action.type == "restart_workers" || action.type == "scale_up";
    const auto at = [&] { return fmt::format("{}: rule '{}': action '{}'", rule.source, rule.id, action.type); };
    if (on_node && !action.target.empty() && action.target != "node")
        throw Error(Errc::parse, fmt::format("{} acts on the event's node: its target must be 'node' or left out, "
                                             "not '{}'",
                                             at(), action.target));
    if (on_job && !action.target.empty() && action.target != "job")
        throw Error(Errc::parse, fmt::format("{} acts on the job: its target must be 'job' or left out, not '{}'", at(),
                                             action.target));
    for (const auto& [name, value] : action.parameters) {
        if (action.type == "scale_up" && name == "count") {
            if (value.type() != Type::integer || value.as_int() < 1 || value.as_int() > 1'000'000)
                throw Error(Errc::parse, fmt::format("{}: parameter 'count' must be a whole number of workers, 1 or "
                                                     "more (e.g. {{count: 2}}), not {}",
                                                     at(), value.to_string()));
            continue;
        }
        throw Error(Errc::parse,
                    fmt::format("{} takes {}, not '{}'", at(),
                                action.type == "scale_up" ? "one parameter, 'count'" : "no parameters", name));
    }
}


}  // namespace

void check_policy(const RuleSet& rules, const Symbols& symbols) {
    check_variables(rules, symbols);
    for (const Rule& rule : rules.rules()) {
        if (!rule.enabled) continue;  // as the engine: a rule that never fires is not checked
        for (const Action& action : rule.actions) check_action(rule, action);
    }
}

std::optional<int> scale_up_count(const Action& action) {
    auto it = action.parameters.find("count");
    if (it == action.parameters.end()) return std::nullopt;
    return static_cast<int>(it->second.as_int());
}

std::filesystem::path find_default_policy() {
    return find_shipped_pack(kPackName, "AutoScaler: the elastic policy",
                             "Pass a rule file to the AutoScaler or set COHORT_RULES_DIR");
}

}  // namespace cohort::detail
