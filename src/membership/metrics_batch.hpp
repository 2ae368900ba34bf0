// What a member's next heartbeat reports about its training: the steps
// recorded since the last heartbeat that got through (a bounded batch, the
// oldest dropped first), the latest step, the collective it is in and its
// GPU samples. Not synchronised: Membership's mutex guards it.
#pragma once

#include <cohort/coordinator_client.hpp>
#include <cohort/membership.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

namespace cohort::membership {

using Clock = std::chrono::steady_clock;

class MetricsBatch {
public:
    explicit MetricsBatch(std::size_t max_steps) : max_steps_(max_steps) {}

    void record(const StepMetrics& step, Clock::time_point at);
    void set_collective(uint64_t sequence, bool inside);
    void set_gpu_json(std::string json);

    // The metrics of the next heartbeat, or nothing when nothing changed
    // since the last one delivered (the coordinator keeps the latest, and
    // the age of what it keeps should say when it last changed). `basic`:
    // only what every coordinator accepts (step, step_time, samples_per_sec,
    // gpu); the batch is then dropped at delivery. Each take() is followed by
    // delivered() or returned() before the next.
    std::optional<HeartbeatMetrics> take(Clock::time_point now, bool basic);
    // The heartbeat got through, or was refused for good: forget what it carried.
    void delivered();
    // The heartbeat failed: what it carried goes out again with the next one.
    void returned();

    // Whether the program reports its collectives at all, and is in one now.
    bool reports_collectives() const { return collective_seq_.has_value(); }
    bool in_collective() const { return in_collective_; }

    // Steps dropped because the batch was full.
    uint64_t dropped() const { return dropped_; }

private:
    struct Recorded {
        StepMetrics metrics;
        Clock::time_point at;
    };

    void trim();

    std::size_t max_steps_;
    std::deque<Recorded> steps_;      // not yet taken
    std::deque<Recorded> in_flight_;  // taken by the heartbeat under way
    std::optional<StepMetrics> latest_;
    std::optional<uint64_t> collective_seq_;
    bool in_collective_ = false;
    std::string gpu_json_;
    bool changed_ = false;  // since the last take()
    bool taken_changes_ = false;
    uint64_t dropped_ = 0;
};

}  // namespace cohort::membership
