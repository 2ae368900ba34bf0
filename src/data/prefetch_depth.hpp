// The DataAdvisor's measured prefetch rules: from the baseline depth and a
// node's (or the job's) measurements to the depth it should use, bounded by
// the memory budget. docs/data.md ("The measured rules") states each rule.
#pragma once

#include <cohort/data_advisor.hpp>

#include <cstdint>
#include <string>

namespace cohort::detail {

// The rules' thresholds, named in docs/data.md.
inline constexpr double kDataWaitHigh = 0.05;   // above: reads hold the step up
inline constexpr double kDataWaitNone = 0.01;   // at or below: no wait to speak of
inline constexpr double kHitRateGood = 0.9;     // at or above: prefetched batches were ready
inline constexpr double kDataWaitCap = 0.9375;  // the raise is at most 1 / (1 - cap) = 16 times
inline constexpr uint32_t kMaxPrefetchBatches = 64;

struct PrefetchInputs {
    uint32_t baseline = 0;
    uint64_t batch_bytes = 0;
    uint64_t sample_bytes = 0;
    uint64_t budget = 0;        // memory per node
    uint64_t cache_wanted = 0;  // bytes the node would cache in memory, 0 without a cache
    const DataMeasurement* measured = nullptr;
    std::string who;  // for the reason: "worker-3", "the job"
    // The smallest prefetch factor that will apply, in (0, 1]: the depth the
    // rules call for is divided by it (DataAdvisorOptions::prefetch_factor_floor).
    double factor_floor = 1.0;
};

struct PrefetchChoice {
    uint32_t batches = 0;
    bool measured = false;  // a measurement moved or held the depth
    std::string reason;
};

// Deterministic, monotone: never lower for a larger data wait, a lower hit
// rate, a deeper read-ahead in use or a smaller factor floor, never higher
// for a smaller budget; always in 1..kMaxPrefetchBatches.
PrefetchChoice choose_prefetch_depth(const PrefetchInputs& in);

}  // namespace cohort::detail
