// A generation's world: who has which rank. Ranks follow the topology-aware
// order (cohort::RankOrder) and stay stable from round to round; see
// stable_rank_order() for how the two combine.
#pragma once

#include <cohort/coordinator_protocol.hpp>
#include <cohort/error.hpp>
#include <cohort/node.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord {

struct WorldSlot {
    std::string id;
    std::string host;  // Node::host_name()
    std::string address;
    uint32_t local_rank = 0;        // among the world's nodes on its host, in rank order
    uint32_t local_world_size = 0;  // the world's nodes on its host
    uint32_t node_rank = 0;         // its host's index, hosts numbered by their lowest rank

    bool operator==(const WorldSlot&) const = default;
};

struct World {
    uint64_t generation = 0;  // 0: no world has formed yet
    double formed_at = 0;
    std::vector<WorldSlot> slots;  // by rank

    uint32_t size() const { return static_cast<uint32_t>(slots.size()); }
    std::optional<uint32_t> rank_of(std::string_view id) const;
    // Every rank's id, host and data-plane address: the world message's peers.
    std::vector<WorldPeer> peers() const;
    bool operator==(const World&) const = default;
};

// Node ids in rank order for a new round.
//
// T is the topology order of all the nodes (RankOrder over a Topology built
// from their descriptors). With no survivors the ranks are T. Otherwise:
// - survivors (nodes of the previous world, given in their previous rank
//   order) keep that relative order, so the first of them -- the previous
//   rank 0 whenever it survives -- is rank 0;
// - each newcomer goes right after the survivor it follows in T read
//   cyclically from the first survivor (newcomers after the same survivor
//   keep their T order). A replacement on a survivor's host thus lands next
//   to its host mates, and when the previous world was in topology order
//   the result is T rotated to start at the first survivor.
std::vector<std::string> stable_rank_order(std::span<const Node> survivors, std::span<const Node> newcomers);

// `nodes` in rank order, with local ranks computed from their hosts.
World make_world(uint64_t generation, double formed_at, std::span<const Node> nodes);

boost::json::object to_json(const World& world);
World world_from_json(const boost::json::value& value, std::string_view where, Errc code = Errc::parse);

}  // namespace cohort::coord
