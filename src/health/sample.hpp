// The steps a member finished, on the coordinator's clock: what the health
// windows keep of each heartbeat's metrics (cohort::HeartbeatMetrics, the
// wire message, whose steps are timed by their age when it was sent).
#pragma once

#include <cohort/coordinator_protocol.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace cohort::health {

// One finished training step. Every timing is optional: workers report what
// they measure. All in seconds except samples_per_sec.
struct StepSample {
    // When the step ended on the coordinator's clock.
    double time = 0;
    uint64_t step = 0;
    std::optional<double> step_time;        // the whole step
    std::optional<double> samples_per_sec;  // the member's own throughput
    std::optional<double> data_wait;        // waiting for input
    std::optional<double> collective_wait;  // waiting for the other ranks in collectives

    bool operator==(const StepSample&) const = default;
};

// The steps a heartbeat's metrics carry, oldest first, with times on the
// coordinator's clock: `samples` and then the top-level step, if it has one.
std::vector<StepSample> reported_steps(const HeartbeatMetrics& metrics, double received_at);

}  // namespace cohort::health
