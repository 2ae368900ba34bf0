// A policy's actions on one transfer folded into what the scheduler does:
// the smallest prefetch factor, the longest delay, the largest boost, and
// whether to stage (the first action of each type that wins is kept, so the
// scheduler can name its rule).
#pragma once

#include <cohort/transfers.hpp>

#include <vector>

namespace cohort::data {

struct Verdict {
    double factor = 1.0;
    const PolicyAction* factor_by = nullptr;
    double delay_seconds = 0;
    const PolicyAction* delay_by = nullptr;
    int boost = 0;
    const PolicyAction* boost_by = nullptr;
    const PolicyAction* stage_by = nullptr;
};

// `default_boost`: a prioritize action's boost when it names none.
Verdict fold(const std::vector<PolicyAction>& actions, int default_boost);

}  // namespace cohort::data
