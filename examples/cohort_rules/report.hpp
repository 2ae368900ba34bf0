// cohort-rules's output: text for people, JSON for programs.
#pragma once

#include <cohort/cohort.hpp>

#include <string>
#include <utility>
#include <vector>

namespace cohort_rules {

// "FILE: ok (N rules)" and one "FILE: warning: ..." line per warning.
void print_check(const std::string& file, const cohort::RuleSet& rules);
// Each rule's state after the evaluation, in rule-set order.
using States = std::vector<std::pair<std::string, cohort::RuleState>>;
void print_evaluation(const cohort::Evaluation& evaluation, double time, const States& states, bool json);
void print_explain(const cohort::Rule& rule, const std::vector<cohort::ExplainStep>& steps, bool json);

}  // namespace cohort_rules
