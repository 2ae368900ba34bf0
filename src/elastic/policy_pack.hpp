// What an elastic policy pack may use: the variables the auto-scaler sets
// for each event and the actions it turns into plan steps. A pack that
// uses anything else is refused when it loads, naming the rule.
#pragma once

#include <cohort/expression.hpp>
#include <cohort/rules.hpp>

#include <array>
#include <filesystem>
#include <optional>
#include <string_view>

namespace cohort::detail {

struct PolicyVariable {
    std::string_view name;
    Type type;
};

inline constexpr std::array<PolicyVariable, 17> kPolicyVariables{{
    {"event", Type::string},
    {"cause", Type::string},
    {"node", Type::string},
    {"host", Type::string},
    {"detail", Type::string},
    {"exit_code", Type::integer},
    {"node_relaunches", Type::integer},
    {"job_relaunches", Type::integer},
    {"max_node_relaunches", Type::integer},
    {"max_job_relaunches", Type::integer},
    {"nodes", Type::integer},
    {"min_nodes", Type::integer},
    {"max_nodes", Type::integer},
    {"free_slots", Type::integer},
    {"host_blacklisted", Type::boolean},
    {"straggler_score", Type::number},
    {"straggler_for", Type::number},
}};

inline constexpr std::array<std::string_view, 5> kPolicyActions{"relaunch", "replace", "remove", "restart_workers",
                                                                "scale_up"};

// Throws Error(parse) for a variable the auto-scaler does not set or sets
// with another type, and for an action with a bad target or parameter.
void check_policy(const RuleSet& rules, const Symbols& symbols);

// scale_up's `count`, when the action gives one (checked by check_policy).
std::optional<int> scale_up_count(const Action& action);

// The shipped elastic.yaml; Error(not_found) listing where it looked.
std::filesystem::path find_default_policy();

}  // namespace cohort::detail
