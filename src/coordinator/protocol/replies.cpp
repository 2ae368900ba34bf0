// The coordinator's answers as JSON, both ways.
#include "coordinator/protocol/replies.hpp"

#include "core/json_fields.hpp"

#include <boost/json/serialize.hpp>

#include <fmt/format.h>

namespace cohort::coord::protocol {

namespace json = boost::json;

namespace {

uint32_t u32(const detail::FieldReader& reader, std::string_view key) {
    const uint64_t v = reader.uint(key);
    if (v > UINT32_MAX) reader.fail(key, fmt::format("{} is past {}", v, UINT32_MAX));
    return static_cast<uint32_t>(v);
}

detail::FieldReader reader_for(const json::value& value, std::string_view where, ReadAs as,
                               std::initializer_list<std::string_view> fields) {
    detail::FieldReader reader(value, std::string(where), as.code);
    if (as.strict) reader.allow(fields);
    return reader;
}

}  // namespace

json::object to_json(const JoinReply& r) {
    json::object o;
    o["state"] = r.state;
    o["generation"] = r.generation;
    if (r.rank) o["rank"] = *r.rank;
    return o;
}

JoinReply join_reply_from_json(const json::value& value, std::string_view where, ReadAs as) {
    const auto reader = reader_for(value, where, as, {"state", "generation", "rank"});
    JoinReply r;
    r.state = reader.string("state");
    r.generation = reader.uint("generation");
    if (const json::value* rank = reader.find("rank"); rank != nullptr && !rank->is_null())
        r.rank = u32(reader, "rank");
    return r;
}

json::object to_json(const HeartbeatReply& r) {
    json::object o;
    o["generation"] = r.generation;
    o["state"] = r.state;
    o["rendezvous"] = r.rendezvous;
    if (r.rank) o["rank"] = *r.rank;
    if (r.world_size) o["world_size"] = *r.world_size;
    return o;
}

HeartbeatReply heartbeat_reply_from_json(const json::value& value, std::string_view where, ReadAs as) {
    const auto reader = reader_for(value, where, as, {"generation", "state", "rendezvous", "rank", "world_size"});
    HeartbeatReply r;
    r.generation = reader.uint("generation");
    r.state = reader.string("state");
    r.rendezvous = reader.boolean("rendezvous");
    if (reader.has("rank")) r.rank = u32(reader, "rank");
    if (reader.has("world_size")) r.world_size = u32(reader, "world_size");
    return r;
}

json::object to_json(const RoundReply& r) {
    json::object o;
    o["round_open"] = r.round_open;
    o["generation"] = r.generation;
    return o;
}

RoundReply round_reply_from_json(const json::value& value, std::string_view where, ReadAs as) {
    const auto reader = reader_for(value, where, as, {"round_open", "generation"});
    return RoundReply{reader.boolean("round_open"), reader.uint("generation")};
}

json::array peers_to_json(std::span<const WorldPeer> peers) {
    json::array list;
    list.reserve(peers.size());
    for (const WorldPeer& p : peers) {
        json::object o;
        o["rank"] = p.rank;
        o["id"] = p.id;
        o["host"] = p.host;
        o["address"] = p.address;
        list.push_back(std::move(o));
    }
    return list;
}

json::object to_json(const MemberWorld& w, bool with_peers) {
    json::object o;
    o["state"] = w.active ? "active" : "waiting";
    o["generation"] = w.generation;
    if (!w.active) return o;
    o["rank"] = w.rank;
    o["world_size"] = w.world_size;
    o["local_rank"] = w.local_rank;
    o["local_world_size"] = w.local_world_size;
    o["node_rank"] = w.node_rank;
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
    const auto reader = reader_for(
        value, where, as,
        {"state", "generation", "rank", "world_size", "local_rank", "local_world_size", "node_rank", "peers"});
    MemberWorld w;
    w.generation = reader.uint("generation");
    const std::string state = reader.string("state");
    if (state != "active" && state != "waiting") {
        reader.fail("state", fmt::format("must be \"active\" or \"waiting\", not \"{}\"", state));
    }
    w.active = state == "active";
    if (!w.active) return w;
    w.rank = u32(reader, "rank");
    w.world_size = u32(reader, "world_size");
    w.local_rank = u32(reader, "local_rank");
    w.local_world_size = u32(reader, "local_world_size");
    w.node_rank = u32(reader, "node_rank");
    if (!reader.has("peers")) return w;
    const json::array& peers = reader.array("peers");
    w.peers.reserve(peers.size());
    for (std::size_t i = 0; i < peers.size(); ++i) {
        const auto peer =
            reader_for(peers[i], fmt::format("{}: peers[{}]", where, i), as, {"rank", "id", "host", "address"});
        w.peers.push_back(
            WorldPeer{u32(peer, "rank"), peer.string("id"), peer.string_or("host", ""), peer.string_or("address", "")});
    }
    return w;
}

json::object to_json(const ShardLease& l) {
    json::object o;
    o["granted"] = l.granted;
    o["finished"] = l.finished;
    if (!l.granted) return o;
    o["lease"] = l.lease;
    o["shard_id"] = l.shard_id;
    o["shard"] = l.shard;
    o["epoch"] = l.epoch;
    o["bytes"] = l.bytes;
    o["expiry"] = l.expiry;
    return o;
}

ShardLease lease_from_json(const json::value& value, std::string_view where, ReadAs as) {
    const auto reader =
        reader_for(value, where, as, {"granted", "finished", "lease", "shard_id", "shard", "epoch", "bytes", "expiry"});
    ShardLease l;
    l.finished = reader.boolean("finished");
    // A server older than the "granted" field grants when it names a lease.
    l.granted = reader.boolean_or("granted", reader.has("lease"));
    if (!l.granted) return l;
    l.lease = reader.uint("lease");
    l.shard_id = reader.string("shard_id");
    l.shard = reader.uint("shard");
    l.epoch = u32(reader, "epoch");
    l.bytes = reader.uint_or("bytes", 0);
    l.expiry = reader.number_or("expiry", 0);
    return l;
}

json::object to_json(const ShardDone& d) {
    json::object o;
    o["outcome"] = d.outcome;
    o["counted"] = d.counted;
    return o;
}

ShardDone done_from_json(const json::value& value, std::string_view where, ReadAs as) {
    const auto reader = reader_for(value, where, as, {"outcome", "counted"});
    return ShardDone{reader.string("outcome"), reader.boolean("counted")};
}

}  // namespace cohort::coord::protocol
