// The coordinator's answers as JSON, both ways: each message's fields are
// named once, in its table.
#include "coordinator/protocol/replies.hpp"

#include "coordinator/protocol/fields.hpp"

#include <boost/json/serialize.hpp>

#include <fmt/format.h>

namespace cohort::coord::protocol {

namespace json = boost::json;

namespace {

constexpr auto kJoinReply = std::tuple{field("state", &JoinReply::state),
                                       field("generation", &JoinReply::generation), field("rank", &JoinReply::rank)};

constexpr auto kHeartbeatReply =
    std::tuple{field("generation", &HeartbeatReply::generation), field("state", &HeartbeatReply::state),
               field("rendezvous", &HeartbeatReply::rendezvous), field("rank", &HeartbeatReply::rank),
               field("world_size", &HeartbeatReply::world_size)};

constexpr auto kRoundReply =
    std::tuple{field("round_open", &RoundReply::round_open), field("generation", &RoundReply::generation)};

// An active member's place; "state" and "peers" are read and written by hand.
constexpr auto kPlace = std::tuple{field("rank", &MemberWorld::rank), field("world_size", &MemberWorld::world_size),
                                   field("local_rank", &MemberWorld::local_rank),
                                   field("local_world_size", &MemberWorld::local_world_size),
                                   field("node_rank", &MemberWorld::node_rank)};

constexpr auto kPeer = std::tuple{field("rank", &WorldPeer::rank), field("id", &WorldPeer::id),
                                  field("host", &WorldPeer::host, Presence::defaulted),
                                  field("address", &WorldPeer::address, Presence::defaulted)};

// A granted lease; "granted" and "finished" are read and written by hand.
constexpr auto kGrant = std::tuple{
    field("lease", &ShardLease::lease),   field("shard_id", &ShardLease::shard_id),
    field("shard", &ShardLease::shard),   field("epoch", &ShardLease::epoch),
    field("bytes", &ShardLease::bytes, Presence::defaulted), field("expiry", &ShardLease::expiry, Presence::defaulted)};

constexpr auto kShardDone = std::tuple{field("outcome", &ShardDone::outcome), field("counted", &ShardDone::counted)};

}  // namespace

json::object to_json(const JoinReply& r) {
    return write_message(r, kJoinReply);
}

JoinReply join_reply_from_json(const json::value& value, std::string_view where, ReadAs as) {
    return read_message<JoinReply>(value, where, as, kJoinReply);
}

json::object to_json(const HeartbeatReply& r) {
    return write_message(r, kHeartbeatReply);
}

HeartbeatReply heartbeat_reply_from_json(const json::value& value, std::string_view where, ReadAs as) {
    return read_message<HeartbeatReply>(value, where, as, kHeartbeatReply);
}

json::object to_json(const RoundReply& r) {
    return write_message(r, kRoundReply);
}

RoundReply round_reply_from_json(const json::value& value, std::string_view where, ReadAs as) {
    return read_message<RoundReply>(value, where, as, kRoundReply);
}

json::array peers_to_json(std::span<const WorldPeer> peers) {
    json::array list;
    list.reserve(peers.size());
    for (const WorldPeer& p : peers) list.push_back(write_message(p, kPeer));
    return list;
}

json::object to_json(const MemberWorld& w, bool with_peers) {
    json::object o;
    o["state"] = w.active ? "active" : "waiting";
    o["generation"] = w.generation;
    if (!w.active) return o;
    write_fields(o, w, kPlace);
    if (with_peers) o["peers"] = peers_to_json(w.peers);
    return o;
}

std::string world_text(const MemberWorld& w, std::string_view peers_text) {
    std::string text = json::serialize(to_json(w, false));
    if (!w.active) return text;
    text.pop_back();  // the closing '}'
    text += ",\"peers\":";
    text += peers_text;
    text += '}';
    return text;
}

MemberWorld world_from_json(const json::value& value, std::string_view where, ReadAs as) {
    const auto reader = reader_for(value, where, as, kPlace, {"state", "generation", "peers"});
    MemberWorld w;
    w.generation = reader.uint("generation");
    const std::string state = reader.string("state");
    if (state != "active" && state != "waiting") {
        reader.fail("state", fmt::format("must be \"active\" or \"waiting\", not \"{}\"", state));
    }
    w.active = state == "active";
    if (!w.active) return w;
    read_fields(reader, w, kPlace);
    if (!reader.has("peers")) return w;
    const json::array& peers = reader.array("peers");
    w.peers.reserve(peers.size());
    for (std::size_t i = 0; i < peers.size(); ++i) {
        w.peers.push_back(read_message<WorldPeer>(peers[i], fmt::format("{}: peers[{}]", where, i), as, kPeer));
    }
    return w;
}

json::object to_json(const ShardLease& l) {
    json::object o;
    o["granted"] = l.granted;
    o["finished"] = l.finished;
    if (l.granted) write_fields(o, l, kGrant);
    return o;
}

ShardLease lease_from_json(const json::value& value, std::string_view where, ReadAs as) {
    const auto reader = reader_for(value, where, as, kGrant, {"granted", "finished"});
    ShardLease l;
    l.finished = reader.boolean("finished");
    // A server older than the "granted" field grants when it names a lease.
    l.granted = reader.boolean_or("granted", reader.has("lease"));
    if (l.granted) read_fields(reader, l, kGrant);
    return l;
}

json::object to_json(const ShardDone& d) {
    return write_message(d, kShardDone);
}

ShardDone done_from_json(const json::value& value, std::string_view where, ReadAs as) {
    return read_message<ShardDone>(value, where, as, kShardDone);
}

}  // namespace cohort::coord::protocol
