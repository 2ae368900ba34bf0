// A job's settings: how big its world may be, how long a round waits for
// stragglers, and how fast a silent member is given up on. Every duration
// is in seconds. docs/coordinator.md documents them for users.
#pragma once

#include "health/settings.hpp"

#include <cohort/coordinator_protocol.hpp>
#include <cohort/error.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord {

// What a running job does with a node that joins late.
enum class RejoinPolicy : int32_t {
    automatic = 0,   // "auto": below max_nodes, a waiting node opens a new round
    on_request = 1,  // "on_request": it waits until a member asks for a round
};

std::string_view to_string(RejoinPolicy policy) noexcept;
std::optional<RejoinPolicy> parse_rejoin_policy(std::string_view text) noexcept;

struct JobSettings {
    uint32_t min_nodes = 1;           // a round needs at least this many
    uint32_t max_nodes = 1;           // a round closes at once when this many wait
    double last_call = 3.0;           // past min_nodes: wait this long after the last arrival
    uint32_t node_unit = 1;           // the world size is a multiple of this
    double join_timeout = 600.0;      // a node waiting longer is told it was not admitted
    double heartbeat_interval = 1.0;  // how often members are expected to heartbeat
    double failure_timeout = 5.0;     // a member silent this long has failed
    RejoinPolicy rejoin = RejoinPolicy::automatic;
    // Straggler and hang detection over the members' heartbeat metrics.
    health::Settings health;

    // The largest world the settings allow: max_nodes rounded down to node_unit.
    uint32_t largest_world() const { return max_nodes / node_unit * node_unit; }
    // `waiting` nodes' world: at most largest_world(), rounded down to node_unit.
    uint32_t world_for(uint64_t waiting) const;

    bool operator==(const JobSettings&) const = default;
};

// Error(invalid_argument), "job settings: ..." with what to change.
void validate(const JobSettings& settings);

// The settings as a client spells them (every field set) and back: unset
// fields take the defaults, and the result is validated; Error(code)
// "job settings: <field>: ..." otherwise.
cohort::JobSettings published(const JobSettings& settings);
JobSettings resolve(const cohort::JobSettings& settings, Errc code = Errc::invalid_argument);

boost::json::object to_json(const JobSettings& settings);
// Absent fields keep their defaults; the result is validated. Error(code)
// for unknown fields and wrong types.
JobSettings settings_from_json(const boost::json::value& value, Errc code = Errc::invalid_argument);

}  // namespace cohort::coord
