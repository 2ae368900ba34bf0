// The coordinator's answers (docs/coordinator.md): each reply's one reader
// and writer (protocol::write, protocol::read<T>), used by the server that
// sends it, the client that reads it and the C layer that hands it on.
#pragma once

#include "coordinator/protocol/fields.hpp"

#include <cohort/coordinator_protocol.hpp>

#include <span>
#include <string>
#include <string_view>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord::protocol {

template <>
struct Schema<JoinReply> {
    static constexpr auto fields =
        std::tuple{field("state", &JoinReply::state), field("generation", &JoinReply::generation),
                   field("rank", &JoinReply::rank)};
};

template <>
struct Schema<HeartbeatReply> {
    static constexpr auto fields =
        std::tuple{field("generation", &HeartbeatReply::generation), field("state", &HeartbeatReply::state),
                   field("rendezvous", &HeartbeatReply::rendezvous), field("rank", &HeartbeatReply::rank),
                   field("world_size", &HeartbeatReply::world_size)};
};

template <>
struct Schema<RoundReply> {
    static constexpr auto fields =
        std::tuple{field("round_open", &RoundReply::round_open), field("generation", &RoundReply::generation)};
};

template <>
struct Schema<ReportReply> {
    static constexpr auto fields =
        std::tuple{field("member", &ReportReply::member), field("outcome", &ReportReply::outcome)};
};

template <>
struct Schema<WorldPeer> {
    static constexpr auto fields = std::tuple{field("rank", &WorldPeer::rank), field("id", &WorldPeer::id),
                                              field("host", &WorldPeer::host, Presence::defaulted),
                                              field("address", &WorldPeer::address, Presence::defaulted)};
};

// {"outcome": "released" | "requeued" | "reported", "released"}.
template <>
struct Schema<ShardRelease> {
    static constexpr auto fields =
        std::tuple{field("outcome", &ShardRelease::outcome), field("released", &ShardRelease::released)};
};

// {"outcome": "counted" | "counted_late" | "already_done", "counted"}.
template <>
struct Schema<ShardDone> {
    static constexpr auto fields =
        std::tuple{field("outcome", &ShardDone::outcome), field("counted", &ShardDone::counted)};
};

// {"state": "waiting", "generation"} while the member waits; when active
// also "rank", "world_size", "local_rank", "local_world_size", "node_rank"
// and, with_peers, "peers": [{"rank", "id", "host", "address"}].
boost::json::object write(const MemberWorld& world, bool with_peers);
template <>
MemberWorld read<MemberWorld>(const boost::json::value& value, std::string_view where, ReadAs as);
boost::json::array peers_to_json(std::span<const WorldPeer> peers);
// The same text as serialising write(world, true), with the peer list
// given as text: every member of a generation shares one, so a server
// writes it once per generation rather than once per member.
std::string world_text(const MemberWorld& world, std::string_view peers_text);

// {"granted", "finished", and when granted "lease", "shard_id", "shard",
// "epoch", "bytes", "expiry"}.
boost::json::object write(const ShardLease& lease);
template <>
ShardLease read<ShardLease>(const boost::json::value& value, std::string_view where, ReadAs as);

}  // namespace cohort::coord::protocol
