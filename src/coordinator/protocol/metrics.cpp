// Heartbeat metrics: reading what a member sends, and writing it. The fields
// are named once, in the tables below.
#include "coordinator/protocol/metrics.hpp"

#include <string>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fmt/format.h>

namespace cohort::coord::protocol {

namespace json = boost::json;

namespace {

// The timings a step has both at the top level and in `samples`.
template <class T>
constexpr auto timings() {
    return std::tuple{non_negative("step_time", &T::step_time), non_negative("samples_per_sec", &T::samples_per_sec),
                      non_negative("data_wait", &T::data_wait), non_negative("collective_wait", &T::collective_wait)};
}

// A batched step: `age` (seconds before the heartbeat was sent) defaults to 0.
constexpr auto kSample = std::tuple_cat(
    std::tuple{non_negative("age", &StepSample::age, Presence::defaulted), field("step", &StepSample::step)},
    timings<StepSample>());

// The top level; "gpu" and "samples" are read and written by hand.
constexpr auto kLatest = std::tuple_cat(std::tuple{field("step", &HeartbeatMetrics::step)}, timings<HeartbeatMetrics>(),
                                        std::tuple{field("collective_seq", &HeartbeatMetrics::collective_seq),
                                                   field("in_collective", &HeartbeatMetrics::in_collective)});

}  // namespace

template <>
HeartbeatMetrics read<HeartbeatMetrics>(const json::value& value, std::string_view where, ReadAs as) {
    const auto reader = reader_for(value, where, as, kLatest, {"gpu", "samples"});
    HeartbeatMetrics m;
    read_fields(reader, m, kLatest);
    if (const json::value* gpu = reader.find("gpu"); gpu != nullptr && !gpu->is_null()) {
        m.gpu_json = json::serialize(*gpu);
    }
    if (reader.has("samples")) {
        const json::array& list = reader.array("samples");
        m.samples.reserve(list.size());
        for (std::size_t i = 0; i < list.size(); ++i) {
            m.samples.push_back(
                read_message<StepSample>(list[i], fmt::format("{}: samples[{}]", where, i), as, kSample));
        }
    }
    return m;
}

json::object write(const HeartbeatMetrics& m) {
    json::object o = write_message(m, kLatest);
    if (!m.gpu_json.empty()) o["gpu"] = gpu_value(m);
    if (!m.samples.empty()) {
        json::array list;
        list.reserve(m.samples.size());
        for (const StepSample& s : m.samples) list.push_back(write_message(s, kSample));
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
