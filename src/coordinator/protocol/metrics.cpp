// Heartbeat metrics: reading what a member sends, and writing it.
#include "coordinator/protocol/metrics.hpp"

#include "core/json_fields.hpp"

#include <string>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fmt/format.h>

namespace cohort::coord::protocol {

namespace json = boost::json;

namespace {

std::optional<double> non_negative(const detail::FieldReader& reader, std::string_view key) {
    if (!reader.has(key)) return std::nullopt;
    const double v = reader.number(key);
    if (v < 0) reader.fail(key, fmt::format("must not be negative, not {}", v));
    return v;
}

// The timings a step has both at the top level and in `samples`.
template <class T>
void read_timings(const detail::FieldReader& reader, T& s) {
    s.step_time = non_negative(reader, "step_time");
    s.samples_per_sec = non_negative(reader, "samples_per_sec");
    s.data_wait = non_negative(reader, "data_wait");
    s.collective_wait = non_negative(reader, "collective_wait");
}

template <class T>
void write_timings(json::object& o, const T& s) {
    if (s.step_time) o["step_time"] = *s.step_time;
    if (s.samples_per_sec) o["samples_per_sec"] = *s.samples_per_sec;
    if (s.data_wait) o["data_wait"] = *s.data_wait;
    if (s.collective_wait) o["collective_wait"] = *s.collective_wait;
}

StepSample batched_sample(const json::value& value, std::string where, ReadAs as) {
    detail::FieldReader reader(value, std::move(where), as.code);
    if (as.strict) reader.allow({"age", "step", "step_time", "samples_per_sec", "data_wait", "collective_wait"});
    StepSample s;
    s.age = non_negative(reader, "age").value_or(0);
    s.step = reader.uint("step");
    read_timings(reader, s);
    return s;
}

}  // namespace

HeartbeatMetrics metrics_from_json(const json::value& value, std::string_view where, ReadAs as) {
    detail::FieldReader reader(value, std::string(where), as.code);
    if (as.strict) {
        reader.allow({"step", "step_time", "samples_per_sec", "data_wait", "collective_wait", "collective_seq",
                      "in_collective", "gpu", "samples"});
    }
    HeartbeatMetrics m;
    if (reader.has("step")) m.step = reader.uint("step");
    read_timings(reader, m);
    if (reader.has("collective_seq")) m.collective_seq = reader.uint("collective_seq");
    if (reader.has("in_collective")) m.in_collective = reader.boolean_or("in_collective", false);
    if (const json::value* gpu = reader.find("gpu"); gpu != nullptr && !gpu->is_null()) {
        m.gpu_json = json::serialize(*gpu);
    }
    if (reader.has("samples")) {
        const json::array& list = reader.array("samples");
        m.samples.reserve(list.size());
        for (std::size_t i = 0; i < list.size(); ++i) {
            m.samples.push_back(batched_sample(list[i], fmt::format("{}: samples[{}]", where, i), as));
        }
    }
    return m;
}

json::object to_json(const HeartbeatMetrics& m) {
    json::object o;
    if (m.step) o["step"] = *m.step;
    write_timings(o, m);
    if (m.collective_seq) o["collective_seq"] = *m.collective_seq;
    if (m.in_collective) o["in_collective"] = *m.in_collective;
    if (!m.gpu_json.empty()) o["gpu"] = gpu_value(m);
    if (!m.samples.empty()) {
        json::array list;
        list.reserve(m.samples.size());
        for (const StepSample& s : m.samples) {
            json::object item;
            item["age"] = s.age;
            item["step"] = s.step;
            write_timings(item, s);
            list.push_back(std::move(item));
        }
        o["samples"] = std::move(list);
    }
    return o;
}

json::value gpu_value(const HeartbeatMetrics& m) {
    if (m.gpu_json.empty()) return nullptr;
    boost::system::error_code ec;
    json::value v = json::parse(m.gpu_json, ec);
    if (ec) return nullptr;
    return v;
}

}  // namespace cohort::coord::protocol
