// Members: state names and JSON.
#include "coordinator/state/member.hpp"

#include "coordinator/protocol/descriptor.hpp"
#include "coordinator/protocol/metrics.hpp"
#include "core/json_fields.hpp"

#include <array>

#include <fmt/format.h>

namespace cohort::coord {

namespace json = boost::json;

namespace {

constexpr std::array<std::string_view, kMemberStateCount> kStateNames = {"waiting", "active", "stale",
                                                                         "failed",  "left",   "timed_out"};

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
        o["metrics"] = protocol::write(*m.metrics);
        o["metrics_at"] = m.metrics_at;
    }
    return o;
}

Member member_from_json(const json::value& value, std::string_view where, Errc code) {
    detail::FieldReader reader(value, std::string(where), code);
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
        m.metrics = protocol::read<HeartbeatMetrics>(reader.value("metrics"), fmt::format("{}: metrics", where),
                                                     protocol::ReadAs{code, true});
        m.metrics_at = reader.number("metrics_at");
    }
    return m;
}

}  // namespace cohort::coord
