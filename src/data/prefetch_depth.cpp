// The measured prefetch rules, in the order docs/data.md gives them.
#include "data/prefetch_depth.hpp"

#include <cohort/units.hpp>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace cohort::detail {

namespace {

std::string rate_text(double bytes_per_second) {
    return format_size(static_cast<uint64_t>(std::min(bytes_per_second, 0x1p62))) + "/s";
}

// The bytes per second the steps consume, when the measurement says.
std::optional<double> needed_rate(const PrefetchInputs& in, const DataMeasurement& m) {
    if (m.step_time) return static_cast<double>(in.batch_bytes) / *m.step_time;
    if (m.samples_per_second) return *m.samples_per_second * static_cast<double>(in.sample_bytes);
    return std::nullopt;
}

}  // namespace

PrefetchChoice choose_prefetch_depth(const PrefetchInputs& in) {
    PrefetchChoice out;
    uint32_t depth = in.baseline;
    const DataMeasurement* m = in.measured;
    // The measured rules start from the read-ahead that was measured, when
    // the measurement says which; a raise from the baseline would ignore a
    // deeper queue that still waited.
    std::string from = "the baseline";
    if (m != nullptr && m->prefetch_depth && m->data_wait_fraction) {
        depth = *m->prefetch_depth;
        from = "the depth in use";
    }
    bool lowered_for_cache = false;
    if (m == nullptr) {
        out.reason = fmt::format("{}: no measurement: the baseline, {} batches", in.who, depth);
    } else if (!m->data_wait_fraction) {
        out.reason = fmt::format("{}: no data wait measured: the baseline, {} batches", in.who, depth);
    } else {
        const double w = *m->data_wait_fraction;
        out.measured = true;
        if (w > kDataWaitHigh) {
            const auto need = needed_rate(in, *m);
            if (m->read_bytes_per_second && need && *m->read_bytes_per_second < *need) {
                // Storage is slower than the steps: a deeper queue only holds memory.
                out.reason = fmt::format(
                    "{}: data wait {:.2f} of the step (> {}), but storage reads {} and the "
                    "steps need {}: a deeper prefetch cannot close the gap, so {} "
                    "{} batches stays (cache the data or read faster storage)",
                    in.who, w, kDataWaitHigh, rate_text(*m->read_bytes_per_second), rate_text(*need), from, depth);
            } else if (m->prefetch_hit_rate && *m->prefetch_hit_rate >= kHitRateGood) {
                out.reason = fmt::format(
                    "{}: data wait {:.2f} of the step (> {}), but prefetch hit rate {:.2f} "
                    ">= {}: batches were ready, so the wait is not in reading; {} "
                    "{} batches stays",
                    in.who, w, kDataWaitHigh, *m->prefetch_hit_rate, kHitRateGood, from, depth);
            } else {
                const double raised = std::ceil(depth / (1.0 - std::min(w, kDataWaitCap)) - 1e-9);
                const uint32_t before = depth;
                depth = static_cast<uint32_t>(std::min<double>(raised, kMaxPrefetchBatches));
                out.reason = fmt::format(
                    "{}: data wait {:.2f} of the step (> {}){}: raised to ceil({} / (1 - {:.2f})) "
                    "= {} batches from {}",
                    in.who, w, kDataWaitHigh,
                    m->prefetch_hit_rate
                        ? fmt::format(" and prefetch hit rate {:.2f} (< {})", *m->prefetch_hit_rate, kHitRateGood)
                        : std::string(" (hit rate not measured)"),
                    before, std::min(w, kDataWaitCap), depth, from);
            }
        } else if (w <= kDataWaitNone && uint64_t{depth} * in.batch_bytes + in.cache_wanted > in.budget && depth > 1) {
            // No wait: the memory is worth more to the cache than to read-ahead.
            uint32_t lowered = 1;
            for (uint32_t d = depth; d >= 1; --d) {
                if (uint64_t{d} * in.batch_bytes + in.cache_wanted <= in.budget) {
                    lowered = d;
                    break;
                }
            }
            out.reason = fmt::format(
                "{}: data wait {:.2f} (<= {}) and memory is tight ({} x {} of prefetch + {} "
                "to cache > {} budget): lowered from {} to {} batches",
                in.who, w, kDataWaitNone, depth, format_size(in.batch_bytes), format_size(in.cache_wanted),
                format_size(in.budget), depth, lowered);
            depth = lowered;
            lowered_for_cache = true;
        } else {
            out.reason = fmt::format("{}: data wait {:.2f} (<= {}){}: {}, {} batches", in.who, w, kDataWaitHigh,
                                     w <= kDataWaitNone ? " and the memory suffices" : "", from, depth);
        }
    }
    // A rule that will scale the depth down (reduce_prefetch) must still
    // leave the read-ahead chosen above. Not after lowering for the cache:
    // there the memory was the point, and no wait was measured to protect.
    if (in.factor_floor < 1.0 && !lowered_for_cache) {
        const double scaled = std::ceil(depth / in.factor_floor - 1e-9);
        const uint32_t wanted = depth;
        depth = static_cast<uint32_t>(std::min<double>(scaled, kMaxPrefetchBatches));
        out.reason += fmt::format(
            "; divided by the prefetch factor floor {:.2f}, so that {} x {:.2f} still reads {} batches ahead: {} "
            "batches",
            in.factor_floor, depth, in.factor_floor, wanted, depth);
    }
    // Never past the budget, never below one batch.
    const uint64_t fit = in.batch_bytes == 0 ? kMaxPrefetchBatches : in.budget / in.batch_bytes;
    if (depth > fit) {
        const uint32_t capped = static_cast<uint32_t>(std::max<uint64_t>(fit, 1));
        out.reason += fit == 0 ? fmt::format("; one batch ({}) is larger than the memory budget ({}): 1 batch",
                                             format_size(in.batch_bytes), format_size(in.budget))
                               : fmt::format("; capped at {} batches by the memory budget ({} / {} per batch)", capped,
                                             format_size(in.budget), format_size(in.batch_bytes));
        depth = capped;
    }
    out.batches = std::max<uint32_t>(depth, 1);
    return out;
}

}  // namespace cohort::detail
