// What the coordinator's commands answer, and their JSON for the server.
#pragma once

#include "coordinator/state/member.hpp"
#include "coordinator/state/shard_queue.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

namespace cohort::coord {

struct JoinReply {
    MemberState state = MemberState::waiting;  // waiting, or active when the join closed a round
    uint64_t generation = 0;                   // the job's
    std::optional<uint32_t> rank;              // when active
};

struct HeartbeatReply {
    uint64_t generation = 0;                   // the job's current generation
    MemberState state = MemberState::waiting;  // waiting or active
    // A new round is open and the member is in the running world: it should
    // leave its communicator and join again to take part.
    bool rendezvous = false;
    // While active: the member's rank and the world's size, so a member
    // learns them from a heartbeat without reading the world.
    std::optional<uint32_t> rank;
    std::optional<uint32_t> world_size;
};

struct Peer {
    uint32_t rank = 0;
    std::string id;
    std::string host;
    std::string address;
};

// A member's world: its rank and every peer's data-plane address.
struct WorldView {
    uint64_t generation = 0;
    uint32_t rank = 0;
    uint32_t world_size = 0;
    uint32_t local_rank = 0;
    uint32_t local_world_size = 0;
    uint32_t node_rank = 0;   // its host's index among the world's hosts
    std::vector<Peer> peers;  // by rank, itself included
};

struct ShardGrant {
    uint64_t lease = 0;
    std::string shard_id;
    uint64_t shard = 0;  // index in the plan
    uint32_t epoch = 0;
    uint64_t bytes = 0;
    double expiry = 0;
};

// A grant; or nothing now (every shard left is leased: ask again after a
// while); or nothing ever (finished: every epoch is done).
struct NextShard {
    std::optional<ShardGrant> grant;
    bool finished = false;
};

boost::json::object to_json(const JoinReply& reply);
boost::json::object to_json(const HeartbeatReply& reply);
boost::json::object to_json(const WorldView& view);
boost::json::object to_json(const NextShard& next);
boost::json::object to_json(DoneOutcome outcome);

}  // namespace cohort::coord
