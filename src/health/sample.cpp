// Heartbeat metrics as the health windows keep them: steps on the
// coordinator's clock.
#include "health/sample.hpp"

namespace cohort::health {

std::vector<StepSample> reported_steps(const HeartbeatMetrics& m, double received_at) {
    std::vector<StepSample> steps;
    steps.reserve(m.samples.size() + 1);
    for (const cohort::StepSample& s : m.samples) {
        steps.push_back(
            StepSample{received_at - s.age, s.step, s.step_time, s.samples_per_sec, s.data_wait, s.collective_wait});
    }
    if (m.step) {
        steps.push_back(
            StepSample{received_at, *m.step, m.step_time, m.samples_per_sec, m.data_wait, m.collective_wait});
    }
    return steps;
}

}  // namespace cohort::health
