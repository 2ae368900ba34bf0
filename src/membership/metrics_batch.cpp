// MetricsBatch: step samples between heartbeats.
#include "membership/metrics_batch.hpp"

#include <utility>

namespace cohort::membership {

namespace {

// A negative value is one the program did not measure: it is not sent.
std::optional<double> measured(double value) {
    if (value < 0) return std::nullopt;
    return value;
}

}  // namespace

void MetricsBatch::record(const StepMetrics& step, Clock::time_point at) {
    steps_.push_back(Recorded{step, at});
    latest_ = step;
    changed_ = true;
    trim();
}

void MetricsBatch::set_collective(uint64_t sequence, bool inside) {
    if (collective_seq_ == sequence && in_collective_ == inside) return;
    collective_seq_ = sequence;
    in_collective_ = inside;
    changed_ = true;
}

void MetricsBatch::set_gpu_json(std::string json) {
    if (json == gpu_json_) return;
    gpu_json_ = std::move(json);
    changed_ = true;
}

std::optional<HeartbeatMetrics> MetricsBatch::take(Clock::time_point now, bool basic) {
    in_flight_ = std::move(steps_);
    steps_.clear();
    taken_changes_ = changed_;
    if (!changed_) return std::nullopt;
    changed_ = false;

    // The coordinator replaces what it keeps with each report, so every
    // report repeats the latest step and the GPU samples.
    HeartbeatMetrics m;
    if (latest_) {
        m.step = latest_->step;
        m.step_time = measured(latest_->step_time);
        m.samples_per_sec = measured(latest_->samples_per_sec);
    }
    m.gpu_json = gpu_json_;
    if (basic) return m;
    if (latest_) {
        m.data_wait = measured(latest_->data_wait);
        m.collective_wait = measured(latest_->collective_wait);
    }
    if (collective_seq_) {
        m.collective_seq = collective_seq_;
        m.in_collective = in_collective_;
    }
    m.samples.reserve(in_flight_.size());
    for (const Recorded& r : in_flight_) {
        StepSample s;
        s.age = std::chrono::duration<double>(now - r.at).count();
        s.step = r.metrics.step;
        s.step_time = measured(r.metrics.step_time);
        s.samples_per_sec = measured(r.metrics.samples_per_sec);
        s.data_wait = measured(r.metrics.data_wait);
        s.collective_wait = measured(r.metrics.collective_wait);
        m.samples.push_back(s);
    }
    return m;
}

void MetricsBatch::delivered() {
    in_flight_.clear();
    taken_changes_ = false;
}

void MetricsBatch::returned() {
    // The samples taken are older than any recorded since.
    while (!in_flight_.empty()) {
        steps_.push_front(std::move(in_flight_.back()));
        in_flight_.pop_back();
    }
    changed_ = changed_ || taken_changes_;
    taken_changes_ = false;
    trim();
}

void MetricsBatch::trim() {
    while (steps_.size() > max_steps_) {
        steps_.pop_front();
        ++dropped_;
    }
}

}  // namespace cohort::membership
