// A member of a job: the node's descriptor, where it stands in the
// rendezvous, and what its last heartbeat said.
#pragma once

#include <cohort/coordinator_protocol.hpp>
#include <cohort/error.hpp>
#include <cohort/node.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord {

enum class MemberState : int32_t {
    waiting = 0,    // joined; waits for a round to admit it
    active = 1,     // has a rank in the job's current world
    stale = 2,      // was in an older world and did not join the round that replaced it
    failed = 3,     // silent for failure_timeout
    left = 4,       // said goodbye
    timed_out = 5,  // waited join_timeout without being admitted
};
inline constexpr int kMemberStateCount = 6;

std::string_view to_string(MemberState state) noexcept;
std::optional<MemberState> parse_member_state(std::string_view text) noexcept;
// Waiting, active or stale: expected to heartbeat.
inline bool is_live(MemberState state) {
    return state == MemberState::waiting || state == MemberState::active || state == MemberState::stale;
}

struct Member {
    Node node;
    MemberState state = MemberState::waiting;
    double joined_at = 0;       // the last join: join_timeout counts from here
    double last_heartbeat = 0;  // a join counts as one
    double state_since = 0;
    std::string reason;  // why it is stale, failed, left or timed out
    // The generation of the world it is in (active) or was last in; 0: none
    // yet. `rank` is its rank there.
    uint64_t generation = 0;
    uint32_t rank = 0;
    uint64_t heartbeats = 0;
    std::optional<HeartbeatMetrics> metrics;  // the latest a heartbeat carried
    double metrics_at = 0;
};

boost::json::object to_json(const Member& member);
Member member_from_json(const boost::json::value& value, std::string_view where, Errc code = Errc::parse);

}  // namespace cohort::coord
