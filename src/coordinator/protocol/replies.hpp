// The coordinator's answers (docs/coordinator.md): the one reader and
// writer of each reply type, used by the server that sends it, the client
// that reads it and the C layer that hands it on as text.
#pragma once

#include "coordinator/protocol/read_as.hpp"

#include <cohort/coordinator_protocol.hpp>

#include <span>
#include <string>
#include <string_view>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord::protocol {

boost::json::object to_json(const JoinReply& reply);
JoinReply join_reply_from_json(const boost::json::value& value, std::string_view where, ReadAs as);

boost::json::object to_json(const HeartbeatReply& reply);
HeartbeatReply heartbeat_reply_from_json(const boost::json::value& value, std::string_view where, ReadAs as);

boost::json::object to_json(const RoundReply& reply);
RoundReply round_reply_from_json(const boost::json::value& value, std::string_view where, ReadAs as);

// {"state": "waiting", "generation"} while the member waits; when active
// also "rank", "world_size", "local_rank", "local_world_size", "node_rank"
// and, with_peers, "peers": [{"rank", "id", "host", "address"}].
boost::json::object to_json(const MemberWorld& world, bool with_peers);
boost::json::array peers_to_json(std::span<const WorldPeer> peers);
// The same text as serialising to_json(world, true), with the peer list
// given as text: every member of a generation shares one, so a server
// writes it once per generation rather than once per member.
std::string world_text(const MemberWorld& world, std::string_view peers_text);
MemberWorld world_from_json(const boost::json::value& value, std::string_view where, ReadAs as);

// {"granted", "finished", and when granted "lease", "shard_id", "shard",
// "epoch", "bytes", "expiry"}.
boost::json::object to_json(const ShardLease& lease);
ShardLease lease_from_json(const boost::json::value& value, std::string_view where, ReadAs as);

// {"outcome": "counted" | "counted_late" | "already_done", "counted"}.
boost::json::object to_json(const ShardDone& done);
ShardDone done_from_json(const boost::json::value& value, std::string_view where, ReadAs as);

}  // namespace cohort::coord::protocol
