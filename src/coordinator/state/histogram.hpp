// A histogram with fixed upper bounds, as Prometheus exposes one: counts per
// bucket, their sum and total. Monitoring only: nothing saves or replays it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cohort::coord {

class Histogram {
public:
    // `bounds`: ascending upper bounds (a static array: the histogram keeps
    // the span); a bucket above the last one catches the rest.
    explicit Histogram(std::span<const double> bounds) : bounds_(bounds), counts_(bounds.size() + 1) {}

    void observe(double value) {
        std::size_t i = 0;
        while (i < bounds_.size() && value > bounds_[i]) ++i;
        ++counts_[i];
        sum_ += value;
        ++count_;
    }
    std::span<const double> bounds() const { return bounds_; }
    // Observations at or under bounds()[i]; i == bounds().size(): all of them.
    uint64_t cumulative(std::size_t i) const {
        uint64_t n = 0;
        for (std::size_t k = 0; k <= i && k < counts_.size(); ++k) n += counts_[k];
        return n;
    }
    uint64_t count() const { return count_; }
    double sum() const { return sum_; }

private:
    std::span<const double> bounds_;
    std::vector<uint64_t> counts_;  // not cumulative; the last: above every bound
    double sum_ = 0;
    uint64_t count_ = 0;
};

}  // namespace cohort::coord
