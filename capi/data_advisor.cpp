// C ABI: the data path's advisor, over a shard plan.
#include "handles.hpp"

#include <fmt/format.h>

using cohort::capi::guard;
using cohort::capi::require;

extern "C" {

int cohort_shard_plan_advise(const cohort_shard_plan* plan, const char* options_json, char** advice_json,
                             size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(plan, fn, "plan");
        require(options_json, fn, "options_json");
        require(advice_json, fn, "advice_json");
        const cohort::DataAdvisor advisor(
            cohort::data_advisor_options_from_json(options_json, fmt::format("{}: options_json", fn)));
        const std::string text = advisor.advise(plan->impl).to_json();
        *advice_json = cohort::capi::copy_out(text);
        if (length) *length = text.size();
    });
}

}  // extern "C"
