// The one way cohort turns a timeout into a deadline, and the longest
// timeout it honours.
#pragma once

#include <algorithm>
#include <chrono>

namespace cohort::detail {

// A year: longer than anyone means to wait, and far from overflowing a
// nanosecond steady clock. The C API refuses longer timeouts; C++ callers
// may pass more (milliseconds::max() for "forever") and get a year.
inline constexpr std::chrono::milliseconds kLongestTimeout{int64_t{365} * 24 * 3600 * 1000};

// now + timeout, with timeout clamped to 0..kLongestTimeout first.
inline std::chrono::steady_clock::time_point deadline_after(
    std::chrono::milliseconds timeout, std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) {
    return now + std::clamp(timeout, std::chrono::milliseconds(0), kLongestTimeout);
}

}  // namespace cohort::detail
