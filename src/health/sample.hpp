// What a member's heartbeat says about its training: the steps it finished
// since the previous heartbeat, where it stands in the collectives, and its
// latest GPU sample. This is the heartbeat's `metrics` object on the wire.
#pragma once

#include <cohort/error.hpp>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::health {

// One finished training step. Every timing is optional: workers report what
// they measure. All in seconds except samples_per_sec.
struct StepSample {
    // When the step ended on the coordinator's clock. In a Report, relative
    // to when the heartbeat was sent: -age, so 0 or less.
    double time = 0;
    uint64_t step = 0;
    std::optional<double> step_time;        // the whole step
    std::optional<double> samples_per_sec;  // the member's own throughput
    std::optional<double> data_wait;        // waiting for input
    std::optional<double> collective_wait;  // waiting for the other ranks in collectives

    bool operator==(const StepSample&) const = default;
};

// A heartbeat's metrics as sent.
struct Report {
    // The latest step (the top-level fields). It may also be the last of
    // `samples`; NodeWindow keeps one sample per step.
    std::optional<uint64_t> step;
    std::optional<double> step_time;
    std::optional<double> samples_per_sec;
    std::optional<double> data_wait;
    std::optional<double> collective_wait;
    // The sequence number of the latest collective the member entered, and
    // whether it is inside it now.
    std::optional<uint64_t> collective_seq;
    std::optional<bool> in_collective;
    boost::json::value gpu;           // a GpuSample::to_json object as sent; null: none
    std::vector<StepSample> samples;  // the steps since the previous heartbeat, oldest first

    bool operator==(const Report&) const = default;
};

// Error(code) "<where>: <field>: ..." for unknown fields, wrong types and
// negative numbers; "<where>: samples[2]: ..." inside the batch, where each
// sample needs a `step` and its `age` defaults to 0.
Report report_from_json(const boost::json::value& value, std::string_view where, Errc code = Errc::invalid_argument);
// The wire form back: report_from_json(to_json(r)) == r.
boost::json::object to_json(const Report& report);

// The steps a report carries, oldest first, with times on the coordinator's
// clock: `samples` and then the top-level step, if it has one.
std::vector<StepSample> reported_steps(const Report& report, double received_at);

}  // namespace cohort::health
