// Members and heartbeat metrics: names and JSON.
#include "coordinator/state/member.hpp"

#include "coordinator/state/descriptor.hpp"
#include "coordinator/state/json_fields.hpp"

#include <array>

#include <fmt/format.h>

namespace cohort::coord {

namespace json = boost::json;

namespace {

constexpr std::array<std::string_view, kMemberStateCount> kStateNames = {"waiting", "active", "stale",
                                                                         "failed",  "left",   "timed_out"};

double non_negative(const FieldReader& reader, std::string_view key) {
    const double v = reader.number(key);
    if (v < 0) reader.fail(key, fmt::format("must not be negative, not {}", v));
    return v;
}

}  // namespace

std::string_view to_string(MemberState state) noexcept {
    return kStateNames[static_cast<std::size_t>(state)];
}

std::optional<MemberState> parse_member_state(std::string_view text) noexcept {
    for (std::size_t i = 0; i < kStateNames.size(); ++i) {
        if (kStateNames[i] == text) return static_cast<MemberState>(i);
    }
    return std::nullopt;
}

json::object to_json(const HeartbeatMetrics& m) {
    json::object o;
    if (m.step) o["step"] = *m.step;
    if (m.step_time) o["step_time"] = *m.step_time;
    if (m.samples_per_sec) o["samples_per_sec"] = *m.samples_per_sec;
    if (m.data_wait) o["data_wait"] = *m.data_wait;
    if (m.collective_wait) o["collective_wait"] = *m.collective_wait;
    if (m.collective_seq) o["collective_seq"] = *m.collective_seq;
    if (m.in_collective) o["in_collective"] = *m.in_collective;
    if (!m.gpu.is_null()) o["gpu"] = m.gpu;
    if (!m.samples.is_null()) o["samples"] = m.samples;
    return o;
}

HeartbeatMetrics metrics_from_json(const json::value& value, std::string_view where, Errc code) {
    FieldReader reader(value, std::string(where), code);
    reader.allow({"step", "step_time", "samples_per_sec", "data_wait", "collective_wait", "collective_seq",
                  "in_collective", "gpu", "samples"});
    HeartbeatMetrics m;
    if (reader.has("step")) m.step = reader.uint("step");
    if (reader.has("step_time")) m.step_time = non_negative(reader, "step_time");
    if (reader.has("samples_per_sec")) m.samples_per_sec = non_negative(reader, "samples_per_sec");
    if (reader.has("data_wait")) m.data_wait = non_negative(reader, "data_wait");
    if (reader.has("collective_wait")) m.collective_wait = non_negative(reader, "collective_wait");
    if (reader.has("collective_seq")) m.collective_seq = reader.uint("collective_seq");
    if (reader.has("in_collective")) m.in_collective = reader.boolean_or("in_collective", false);
    if (const json::value* gpu = reader.find("gpu")) m.gpu = *gpu;
    if (reader.has("samples")) m.samples = reader.array("samples");
    return m;
}

json::object to_json(const Member& m) {
    json::object o;
    o["node"] = descriptor_to_json(m.node);
    o["state"] = to_string(m.state);
    o["joined_at"] = m.joined_at;
    o["last_heartbeat"] = m.last_heartbeat;
    o["state_since"] = m.state_since;
    if (!m.reason.empty()) o["reason"] = m.reason;
    o["generation"] = m.generation;
    o["rank"] = m.rank;
    o["heartbeats"] = m.heartbeats;
    if (m.metrics) {
        o["metrics"] = to_json(*m.metrics);
        o["metrics_at"] = m.metrics_at;
    }
    return o;
}

Member member_from_json(const json::value& value, std::string_view where, Errc code) {
    FieldReader reader(value, std::string(where), code);
    reader.allow({"node", "state", "joined_at", "last_heartbeat", "state_since", "reason", "generation", "rank",
                  "heartbeats", "metrics", "metrics_at"});
    Member m;
    m.node = descriptor_from_json(reader.value("node"), fmt::format("{}: node", where), code);
    const std::string state = reader.string("state");
    const auto parsed = parse_member_state(state);
    if (!parsed) reader.fail("state", fmt::format("unknown member state '{}'", state));
    m.state = *parsed;
    m.joined_at = reader.number("joined_at");
    m.last_heartbeat = reader.number("last_heartbeat");
    m.state_since = reader.number("state_since");
    m.reason = reader.string_or("reason", "");
    m.generation = reader.uint("generation");
    const uint64_t rank = reader.uint("rank");
    if (rank > UINT32_MAX) reader.fail("rank", "is out of range");
    m.rank = static_cast<uint32_t>(rank);
    m.heartbeats = reader.uint("heartbeats");
    if (reader.has("metrics")) {
        m.metrics = metrics_from_json(reader.value("metrics"), fmt::format("{}: metrics", where), code);
        m.metrics_at = reader.number("metrics_at");
    }
    return m;
}

}  // namespace cohort::coord
