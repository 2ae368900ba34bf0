// Sizes as people write them ("64MiB", "1.5GB", "4096"), and the longest
// timeout cohort honours.
#pragma once

#include <cohort/export.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cohort {

// Bytes from a size with an optional decimal (kB, MB, GB, TB, PB) or binary
// (KiB, MiB, GiB, TiB, PiB; k, m, g, t) unit, case-insensitive. Empty for
// anything else, a negative number, or more than 2^63 bytes.
COHORT_API std::optional<uint64_t> parse_size(std::string_view text);
// 1610612736 -> "1.5GiB".
COHORT_API std::string format_size(uint64_t bytes);

// A year: longer than anyone means to wait, and far from overflowing a
// nanosecond steady clock. The C API refuses longer timeouts; C++ callers
// may pass more (milliseconds::max() for "forever") and get a year.
inline constexpr std::chrono::milliseconds kLongestTimeout{int64_t{365} * 24 * 3600 * 1000};

}  // namespace cohort
