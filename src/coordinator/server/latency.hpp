// A Prometheus histogram of request handling times, in seconds.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace cohort::coord::server {

class LatencyHistogram {
public:
    // Upper bounds of the buckets, seconds; +Inf follows.
    static constexpr std::array<double, 12> kBounds{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                    0.005,   0.01,   0.025,   0.05,   0.1,   0.5};

    void record(double seconds);
    // The series of a histogram named `name`, HELP and TYPE lines included.
    std::string prometheus(std::string_view name, std::string_view help) const;

private:
    std::array<uint64_t, kBounds.size() + 1> counts_{};  // not cumulative; last: above every bound
    double sum_ = 0;
    uint64_t count_ = 0;
};

}  // namespace cohort::coord::server
