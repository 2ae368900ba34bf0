// JobSettings: defaults, validation and JSON.
#include "coordinator/state/settings.hpp"

#include "coordinator/protocol/job_settings.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace cohort::coord {

namespace json = boost::json;

namespace {

// Past a million nodes a setting is a typo, not a cluster.
constexpr uint32_t kMaxNodes = 1u << 20;
// A year: any longer and a duration is a unit mistake (milliseconds?).
constexpr double kMaxSeconds = 365.0 * 24 * 3600;

[[noreturn]] void bad(std::string_view what) {
    throw Error(Errc::invalid_argument, fmt::format("job settings: {}", what));
}

void check_duration(std::string_view name, double value, bool zero_allowed) {
    if (!std::isfinite(value) || value < 0 || (!zero_allowed && value == 0)) {
        bad(fmt::format("{} must be {} seconds, not {}", name, zero_allowed ? "0 or more" : "more than 0", value));
    }
    if (value > kMaxSeconds) {
        bad(fmt::format("{} is {} s, more than a year; durations are in seconds", name, value));
    }
}

}  // namespace

std::string_view to_string(RejoinPolicy policy) noexcept {
    switch (policy) {
        case RejoinPolicy::automatic:
            return "auto";
        case RejoinPolicy::on_request:
            return "on_request";
    }
    return "?";
}

std::optional<RejoinPolicy> parse_rejoin_policy(std::string_view text) noexcept {
    if (text == "auto") return RejoinPolicy::automatic;
    if (text == "on_request") return RejoinPolicy::on_request;
    return std::nullopt;
}

uint32_t JobSettings::world_for(uint64_t waiting) const {
    const auto capped = static_cast<uint32_t>(std::min<uint64_t>(waiting, largest_world()));
    return capped / node_unit * node_unit;
}

void validate(const JobSettings& s) {
    if (s.min_nodes < 1) bad("min_nodes must be at least 1, not 0");
    if (s.node_unit < 1) bad("node_unit must be at least 1, not 0");
    if (s.max_nodes > kMaxNodes) bad(fmt::format("max_nodes {} is more than {} nodes", s.max_nodes, kMaxNodes));
    if (s.max_nodes < s.min_nodes) {
        bad(fmt::format("max_nodes ({}) is below min_nodes ({}); raise max_nodes or lower min_nodes", s.max_nodes,
                        s.min_nodes));
    }
    if (s.largest_world() < s.min_nodes) {
        bad(fmt::format("no world size from min_nodes {} to max_nodes {} is a multiple of node_unit {}", s.min_nodes,
                        s.max_nodes, s.node_unit));
    }
    check_duration("last_call", s.last_call, true);
    check_duration("join_timeout", s.join_timeout, false);
    check_duration("heartbeat_interval", s.heartbeat_interval, false);
    check_duration("failure_timeout", s.failure_timeout, false);
    if (s.failure_timeout <= s.heartbeat_interval) {
        bad(
            fmt::format("failure_timeout ({} s) must be longer than heartbeat_interval ({} s), or members "
                        "would be declared failed between two heartbeats",
                        s.failure_timeout, s.heartbeat_interval));
    }
}

cohort::JobSettings published(const JobSettings& s) {
    cohort::JobSettings out;
    out.min_nodes = s.min_nodes;
    out.max_nodes = s.max_nodes;
    out.last_call = s.last_call;
    out.node_unit = s.node_unit;
    out.join_timeout = s.join_timeout;
    out.heartbeat_interval = s.heartbeat_interval;
    out.failure_timeout = s.failure_timeout;
    out.rejoin = std::string(to_string(s.rejoin));
    out.health = health::published(s.health);
    return out;
}

JobSettings resolve(const cohort::JobSettings& wire, Errc code) {
    constexpr std::string_view kWhere = "job settings";
    const auto nodes = [&](std::string_view key, const std::optional<uint32_t>& v, uint32_t fallback) {
        if (v && *v > kMaxNodes) {
            throw Error(code, fmt::format("{}: {}: {} is more than {} nodes", kWhere, key, *v, kMaxNodes));
        }
        return v.value_or(fallback);
    };
    JobSettings s;
    s.min_nodes = nodes("min_nodes", wire.min_nodes, s.min_nodes);
    // max_nodes defaults to min_nodes, so {"min_nodes": 4} alone is a 4-node job.
    s.max_nodes = nodes("max_nodes", wire.max_nodes, std::max(s.min_nodes, s.max_nodes));
    s.node_unit = nodes("node_unit", wire.node_unit, s.node_unit);
    s.last_call = wire.last_call.value_or(s.last_call);
    s.join_timeout = wire.join_timeout.value_or(s.join_timeout);
    s.heartbeat_interval = wire.heartbeat_interval.value_or(s.heartbeat_interval);
    s.failure_timeout = wire.failure_timeout.value_or(s.failure_timeout);
    if (wire.rejoin) {
        const auto policy = parse_rejoin_policy(*wire.rejoin);
        if (!policy) {
            throw Error(code, fmt::format("{}: rejoin: unknown policy '{}' (expected 'auto' or 'on_request')", kWhere,
                                          *wire.rejoin));
        }
        s.rejoin = *policy;
    }
    s.health = health::resolve(wire.health, fmt::format("{}: health", kWhere), code);
    validate(s);
    return s;
}

json::object to_json(const JobSettings& s) {
    return protocol::write(published(s));
}

JobSettings settings_from_json(const json::value& value, Errc code) {
    return resolve(protocol::read<cohort::JobSettings>(value, "job settings", protocol::ReadAs{code, true}), code);
}

}  // namespace cohort::coord
