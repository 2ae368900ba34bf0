// core/deadline.hpp: the one clamp every wait in the library goes through.
#include "core/deadline.hpp"

#include <gtest/gtest.h>

namespace cohort::detail {
namespace {

using namespace std::chrono_literals;

TEST(Deadline, ClampsToZeroAndAYear) {
    const auto now = std::chrono::steady_clock::now();
    EXPECT_EQ(deadline_after(250ms, now), now + 250ms);
    EXPECT_EQ(deadline_after(0ms, now), now);
    EXPECT_EQ(deadline_after(-5ms, now), now);
    // "Forever" must not overflow into the past: it becomes a year, the
    // longest timeout the C API accepts.
    EXPECT_EQ(deadline_after(std::chrono::milliseconds::max(), now), now + kLongestTimeout);
    EXPECT_EQ(deadline_after(kLongestTimeout, now), now + kLongestTimeout);
    EXPECT_EQ(kLongestTimeout, std::chrono::hours(24 * 365));
    EXPECT_GT(deadline_after(std::chrono::milliseconds::max()), std::chrono::steady_clock::now());
}

}  // namespace
}  // namespace cohort::detail
