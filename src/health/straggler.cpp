// Busy times and the relative and individual scores made from them.
#include "health/straggler.hpp"

#include <algorithm>

namespace cohort::health {

namespace {

// Seconds busy for one sample in `unit`, or nothing.
std::optional<double> busy_in(const StepSample& s, BusyUnit unit) {
    if (unit == BusyUnit::step && s.step_time) {
        const double busy = *s.step_time - s.collective_wait.value_or(0);
        if (busy > 0) return busy;
    }
    if (unit == BusyUnit::sample && s.samples_per_sec && *s.samples_per_sec > 0) return 1 / *s.samples_per_sec;
    return std::nullopt;
}

BusyUnit unit_of(const std::deque<StepSample>& samples) {
    for (auto it = samples.rbegin(); it != samples.rend(); ++it) {
        if (it->step_time) return BusyUnit::step;
        if (it->samples_per_sec && *it->samples_per_sec > 0) return BusyUnit::sample;
    }
    return BusyUnit::none;
}

// The median of `values` (reordered), the mean of the middle two when even.
double median(std::vector<double>& values) {
    const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
    std::nth_element(values.begin(), middle, values.end());
    if (values.size() % 2 == 1) return *middle;
    return (*std::max_element(values.begin(), middle) + *middle) / 2;
}

}  // namespace

std::string_view to_string(BusyUnit unit) noexcept {
    switch (unit) {
        case BusyUnit::none:
            return "none";
        case BusyUnit::step:
            return "step";
        case BusyUnit::sample:
            return "sample";
    }
    return "?";
}

Busy busy_of(const NodeWindow& window, const Settings& settings, std::vector<double>& scratch) {
    Busy b;
    b.unit = unit_of(window.samples());
    if (b.unit == BusyUnit::none) return b;
    scratch.clear();
    for (const StepSample& s : window.samples()) {
        if (const auto busy = busy_in(s, b.unit)) scratch.push_back(*busy);
    }
    b.count = scratch.size();
    if (b.count == 0) {
        b.unit = BusyUnit::none;
        return b;
    }
    // Slide a run of k over the values; the last run is the recent one.
    const std::size_t k = std::min(settings.recent, b.count);
    double sum = 0;
    for (std::size_t i = 0; i < k; ++i) sum += scratch[i];
    double lowest = sum;
    for (std::size_t i = k; i < b.count; ++i) {
        sum += scratch[i] - scratch[i - k];
        lowest = std::min(lowest, sum);
    }
    // The recent mean afresh: the sliding sum drifts by a few ulps per step.
    double recent = 0;
    for (std::size_t i = b.count - k; i < b.count; ++i) recent += scratch[i];
    b.recent = recent / static_cast<double>(k);
    b.best = std::min(lowest / static_cast<double>(k), b.recent);  // rounding must not lift best over recent
    return b;
}

std::vector<Scores> score(std::span<const Busy> busy, const Settings& settings) {
    std::vector<Scores> scores(busy.size());
    std::vector<double> recent;
    for (BusyUnit unit : {BusyUnit::step, BusyUnit::sample}) {
        recent.clear();
        for (const Busy& b : busy) {
            if (b.unit == unit && b.count >= settings.min_samples) recent.push_back(b.recent);
        }
        if (recent.size() < 2) continue;
        const double reference =
            settings.reference == Reference::best ? *std::min_element(recent.begin(), recent.end()) : median(recent);
        for (std::size_t i = 0; i < busy.size(); ++i) {
            if (busy[i].unit == unit && busy[i].count >= settings.min_samples) {
                scores[i].relative = std::clamp(reference / busy[i].recent, 0.0, 1.0);
            }
        }
    }
    for (std::size_t i = 0; i < busy.size(); ++i) {
        if (busy[i].unit != BusyUnit::none && busy[i].count >= settings.min_samples) {
            scores[i].individual = std::clamp(busy[i].best / busy[i].recent, 0.0, 1.0);
        }
    }
    return scores;
}

}  // namespace cohort::health
