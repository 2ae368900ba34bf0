// The one way cohort turns a timeout into a deadline (the longest timeout
// it honours, kLongestTimeout, is public: cohort/units.hpp).
#pragma once

#include <cohort/units.hpp>

#include <algorithm>
#include <chrono>

namespace cohort::detail {

// now + timeout, with timeout clamped to 0..kLongestTimeout first.
inline std::chrono::steady_clock::time_point deadline_after(
    std::chrono::milliseconds timeout, std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) {
    return now + std::clamp(timeout, std::chrono::milliseconds(0), kLongestTimeout);
}

}  // namespace cohort::detail
