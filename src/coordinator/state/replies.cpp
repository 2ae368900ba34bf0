// Command replies as JSON.
#include "coordinator/state/replies.hpp"

#include <boost/json/array.hpp>

namespace cohort::coord {

namespace json = boost::json;

json::object to_json(const JoinReply& reply) {
    json::object o;
    o["state"] = to_string(reply.state);
    o["generation"] = reply.generation;
    if (reply.rank) o["rank"] = *reply.rank;
    return o;
}

json::object to_json(const HeartbeatReply& reply) {
    json::object o;
    o["generation"] = reply.generation;
    o["state"] = to_string(reply.state);
    o["rendezvous"] = reply.rendezvous;
    if (reply.rank) o["rank"] = *reply.rank;
    if (reply.world_size) o["world_size"] = *reply.world_size;
    return o;
}

json::object to_json(const WorldView& view) {
    json::array peers;
    for (const Peer& p : view.peers) {
        json::object o;
        o["rank"] = p.rank;
        o["id"] = p.id;
        o["host"] = p.host;
        o["address"] = p.address;
        peers.push_back(std::move(o));
    }
    json::object o;
    o["generation"] = view.generation;
    o["rank"] = view.rank;
    o["world_size"] = view.world_size;
    o["local_rank"] = view.local_rank;
    o["local_world_size"] = view.local_world_size;
    o["node_rank"] = view.node_rank;
    o["peers"] = std::move(peers);
    return o;
}

json::object to_json(const NextShard& next) {
    json::object o;
    if (next.grant) {
        const ShardGrant& g = *next.grant;
        o["lease"] = g.lease;
        o["shard_id"] = g.shard_id;
        o["shard"] = g.shard;
        o["epoch"] = g.epoch;
        o["bytes"] = g.bytes;
        o["expiry"] = g.expiry;
    }
    o["finished"] = next.finished;
    return o;
}

json::object to_json(DoneOutcome outcome) {
    json::object o;
    o["outcome"] = to_string(outcome);
    o["counted"] = outcome != DoneOutcome::already_done;
    return o;
}

}  // namespace cohort::coord
