// The replies that are more than a table of fields: the member's world and
// a shard lease.
#include "coordinator/protocol/replies.hpp"

#include <boost/json/serialize.hpp>

#include <fmt/format.h>

namespace cohort::coord::protocol {

namespace json = boost::json;

namespace {

// An active member's place; "state" and "peers" are read and written by hand.
constexpr auto kPlace =
    std::tuple{field("rank", &MemberWorld::rank), field("world_size", &MemberWorld::world_size),
               field("local_rank", &MemberWorld::local_rank), field("local_world_size", &MemberWorld::local_world_size),
               field("node_rank", &MemberWorld::node_rank)};

// A granted lease; "granted" and "finished" are read and written by hand.
constexpr auto kGrant = std::tuple{field("lease", &ShardLease::lease),
                                   field("shard_id", &ShardLease::shard_id),
                                   field("shard", &ShardLease::shard),
                                   field("epoch", &ShardLease::epoch),
                                   field("bytes", &ShardLease::bytes, Presence::defaulted),
                                   field("expiry", &ShardLease::expiry, Presence::defaulted)};

}  // namespace

json::array peers_to_json(std::span<const WorldPeer> peers) {
    json::array list;
    list.reserve(peers.size());
    for (const WorldPeer& p : peers) list.push_back(write(p));
    return list;
}

json::object write(const MemberWorld& w, bool with_peers) {
    json::object o;
    o["state"] = w.active ? "active" : "waiting";
    o["generation"] = w.generation;
    if (!w.active) return o;
    write_fields(o, w, kPlace);
    if (with_peers) o["peers"] = peers_to_json(w.peers);
    return o;
}

std::string world_text(const MemberWorld& w, std::string_view peers_text) {
    std::string text = json::serialize(write(w, false));
    if (!w.active) return text;
    text.pop_back();  // the closing '}'
    text += ",\"peers\":";
    text += peers_text;
    text += '}';
    return text;
}

template <>
MemberWorld read<MemberWorld>(const json::value& value, std::string_view where, ReadAs as) {
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
        w.peers.push_back(read<WorldPeer>(peers[i], fmt::format("{}: peers[{}]", where, i), as));
    }
    return w;
}

json::object write(const ShardLease& l) {
    json::object o;
    o["granted"] = l.granted;
    o["finished"] = l.finished;
    if (l.granted) write_fields(o, l, kGrant);
    return o;
}

template <>
ShardLease read<ShardLease>(const json::value& value, std::string_view where, ReadAs as) {
    const auto reader = reader_for(value, where, as, kGrant, {"granted", "finished"});
    ShardLease l;
    l.finished = reader.boolean("finished");
    // A server older than the "granted" field grants when it names a lease.
    l.granted = reader.boolean_or("granted", reader.has("lease"));
    if (l.granted) read_fields(reader, l, kGrant);
    return l;
}

}  // namespace cohort::coord::protocol
