// What a job did while this process watched it, for GET /metrics: how long
// each round stayed open and why it opened, the step times heartbeats
// reported, and the members that failed or left. Fed by
// CoordinatorState::emit (live events only, not a journal replayed at
// start-up), never saved: Prometheus counters start again from zero when
// the process does, which rate() expects.
#pragma once

#include "coordinator/state/histogram.hpp"
#include "coordinator/state/member.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cohort::coord {

// Why a round opened, from its reason text (rendezvous.cpp and tick()
// write them): a bounded set, so it can be a Prometheus label.
enum class RoundCause : int32_t {
    created = 0,    // "job created": the first world
    failed = 1,     // "node 'x' failed...", "N nodes failed...", reported dead
    left = 2,       // "node 'x' left"
    rejoined = 3,   // "node 'x' joined again while in generation N" (a restarted process)
    grew = 4,       // "N node(s) waiting to join the world of M" (rejoin automatic)
    requested = 5,  // "requested by node 'x'" (POST .../round)
    other = 6,      // anything else
};
inline constexpr int kRoundCauseCount = 7;

RoundCause round_cause(std::string_view reason) noexcept;
std::string_view to_string(RoundCause cause) noexcept;

class JobActivity {
public:
    // Seconds: a round that closes at once up to one held open for minutes
    // by last_call or join_timeout.
    static constexpr std::array<double, 12> kRoundBounds{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
    // Seconds: a toy step of a millisecond up to a large model's minute.
    static constexpr std::array<double, 14> kStepBounds{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                        0.25,  0.5,    1,     2.5,  5,     10,   60};

    JobActivity();

    // A round that opened for `reason` at `opened_at` formed a world at `closed_at`.
    void round_closed(std::string_view reason, double opened_at, double closed_at);
    void step(double seconds) { steps_.observe(seconds); }
    // A member failed, left or timed out.
    void removed(MemberState state) { ++removed_[static_cast<std::size_t>(state)]; }

    // Round durations, by RoundCause.
    const Histogram& rounds(RoundCause cause) const { return rounds_[static_cast<std::size_t>(cause)]; }
    const Histogram& steps() const { return steps_; }
    // Members removed in each state (failed, left, timed_out; the others stay 0).
    uint64_t removals(MemberState state) const { return removed_[static_cast<std::size_t>(state)]; }

private:
    std::array<Histogram, kRoundCauseCount> rounds_;
    Histogram steps_;
    std::array<uint64_t, kMemberStateCount> removed_{};
};

}  // namespace cohort::coord
