// Heartbeat metrics: parsing what a member sends, and printing it back.
#include "health/sample.hpp"

#include "coordinator/state/json_fields.hpp"

#include <string>

#include <fmt/format.h>

namespace cohort::health {

namespace json = boost::json;

namespace {

std::optional<double> non_negative(const coord::FieldReader& reader, std::string_view key) {
    if (!reader.has(key)) return std::nullopt;
    const double v = reader.number(key);
    if (v < 0) reader.fail(key, fmt::format("must not be negative, not {}", v));
    return v;
}

// The timings a step has both at the top level and in `samples`.
void read_timings(const coord::FieldReader& reader, StepSample& s) {
    s.step_time = non_negative(reader, "step_time");
    s.samples_per_sec = non_negative(reader, "samples_per_sec");
    s.data_wait = non_negative(reader, "data_wait");
    s.collective_wait = non_negative(reader, "collective_wait");
}

void write_timings(json::object& o, const std::optional<double>& step_time, const std::optional<double>& rate,
                   const std::optional<double>& data_wait, const std::optional<double>& collective_wait) {
    if (step_time) o["step_time"] = *step_time;
    if (rate) o["samples_per_sec"] = *rate;
    if (data_wait) o["data_wait"] = *data_wait;
    if (collective_wait) o["collective_wait"] = *collective_wait;
}

StepSample batched_sample(const json::value& value, std::string where, Errc code) {
    coord::FieldReader reader(value, std::move(where), code);
    reader.allow({"age", "step", "step_time", "samples_per_sec", "data_wait", "collective_wait"});
    StepSample s;
    s.time = -non_negative(reader, "age").value_or(0);
    s.step = reader.uint("step");
    read_timings(reader, s);
    return s;
}

}  // namespace

Report report_from_json(const json::value& value, std::string_view where, Errc code) {
    coord::FieldReader reader(value, std::string(where), code);
    reader.allow({"step", "step_time", "samples_per_sec", "data_wait", "collective_wait", "collective_seq",
                  "in_collective", "gpu", "samples"});
    Report r;
    if (reader.has("step")) r.step = reader.uint("step");
    StepSample latest;
    read_timings(reader, latest);
    r.step_time = latest.step_time;
    r.samples_per_sec = latest.samples_per_sec;
    r.data_wait = latest.data_wait;
    r.collective_wait = latest.collective_wait;
    if (reader.has("collective_seq")) r.collective_seq = reader.uint("collective_seq");
    if (reader.has("in_collective")) r.in_collective = reader.boolean_or("in_collective", false);
    if (const json::value* gpu = reader.find("gpu")) r.gpu = *gpu;
    if (reader.has("samples")) {
        const json::array& list = reader.array("samples");
        r.samples.reserve(list.size());
        for (std::size_t i = 0; i < list.size(); ++i) {
            r.samples.push_back(batched_sample(list[i], fmt::format("{}: samples[{}]", where, i), code));
        }
    }
    return r;
}

json::object to_json(const Report& r) {
    json::object o;
    if (r.step) o["step"] = *r.step;
    write_timings(o, r.step_time, r.samples_per_sec, r.data_wait, r.collective_wait);
    if (r.collective_seq) o["collective_seq"] = *r.collective_seq;
    if (r.in_collective) o["in_collective"] = *r.in_collective;
    if (!r.gpu.is_null()) o["gpu"] = r.gpu;
    if (!r.samples.empty()) {
        json::array list;
        list.reserve(r.samples.size());
        for (const StepSample& s : r.samples) {
            json::object item;
            item["age"] = s.time == 0 ? 0.0 : -s.time;  // never -0
            item["step"] = s.step;
            write_timings(item, s.step_time, s.samples_per_sec, s.data_wait, s.collective_wait);
            list.push_back(std::move(item));
        }
        o["samples"] = std::move(list);
    }
    return o;
}

std::vector<StepSample> reported_steps(const Report& r, double received_at) {
    std::vector<StepSample> steps;
    steps.reserve(r.samples.size() + 1);
    for (StepSample s : r.samples) {
        s.time += received_at;
        steps.push_back(s);
    }
    if (r.step) {
        steps.push_back(
            StepSample{received_at, *r.step, r.step_time, r.samples_per_sec, r.data_wait, r.collective_wait});
    }
    return steps;
}

}  // namespace cohort::health
