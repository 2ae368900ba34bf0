#include "data/verdict.hpp"

#include <cmath>

namespace cohort::data {

Verdict fold(const std::vector<PolicyAction>& actions, int default_boost) {
    Verdict v;
    for (const PolicyAction& a : actions) {
        if (a.type == "reduce_prefetch" && std::isfinite(a.factor) && a.factor >= 0 &&
            (v.factor_by == nullptr || a.factor < v.factor)) {
            v.factor = a.factor;
            v.factor_by = &a;
        } else if (a.type == "delay_transfer" && std::isfinite(a.delay_seconds) && a.delay_seconds > v.delay_seconds) {
            v.delay_seconds = a.delay_seconds;
            v.delay_by = &a;
        } else if (a.type == "prioritize") {
            const int boost = a.boost.value_or(default_boost);
            if (v.boost_by == nullptr || boost > v.boost) {
                v.boost = boost;
                v.boost_by = &a;
            }
        } else if (a.type == "stage_transfer" && v.stage_by == nullptr) {
            v.stage_by = &a;
        }
    }
    return v;
}

}  // namespace cohort::data
