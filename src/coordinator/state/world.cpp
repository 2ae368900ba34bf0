// Worlds: the stable rank order and local ranks, and their JSON.
#include "coordinator/state/world.hpp"

#include "coordinator/protocol/fields.hpp"
#include "core/json_fields.hpp"

#include <cohort/rank_order.hpp>
#include <cohort/topology.hpp>

#include <map>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <boost/json/array.hpp>

namespace cohort::coord {

namespace json = boost::json;

std::optional<uint32_t> World::rank_of(std::string_view id) const {
    for (uint32_t r = 0; r < slots.size(); ++r) {
        if (slots[r].id == id) return r;
    }
    return std::nullopt;
}

std::vector<std::string> stable_rank_order(std::span<const Node> survivors, std::span<const Node> newcomers) {
    Topology topology;
    for (const auto* group : {&survivors, &newcomers}) {
        for (const Node& node : *group) {
            Node ready = node;
            ready.status = NodeStatus::ready;
            topology.add(std::move(ready));
        }
    }
    if (topology.empty()) return {};
    // Every role: the coordinator ranks whoever joined, not only trainers.
    const RankOrder order(topology, kAllRoles);
    std::vector<std::string> t;
    t.reserve(order.world_size());
    for (const RankInfo& info : order.ranks()) t.push_back(topology[info.node_index].id);
    if (survivors.empty()) return t;

    std::unordered_set<std::string_view> survivor_ids;
    for (const Node& node : survivors) survivor_ids.insert(node.id);
    std::size_t start = 0;
    while (t[start] != survivors.front().id) ++start;
    std::unordered_map<std::string_view, std::vector<std::string_view>> after;
    std::string_view current = survivors.front().id;
    for (std::size_t k = 0; k < t.size(); ++k) {
        const std::string& id = t[(start + k) % t.size()];
        if (survivor_ids.contains(id))
            current = id;
        else
            after[current].push_back(id);
    }
    std::vector<std::string> ranks;
    ranks.reserve(t.size());
    for (const Node& node : survivors) {
        ranks.push_back(node.id);
        if (const auto it = after.find(node.id); it != after.end()) {
            for (std::string_view id : it->second) ranks.emplace_back(id);
        }
    }
    return ranks;
}

World make_world(uint64_t generation, double formed_at, std::span<const Node> nodes) {
    World world;
    world.generation = generation;
    world.formed_at = formed_at;
    std::map<std::string, uint32_t> on_host;  // nodes per host
    std::map<std::string, uint32_t> host_rank;
    for (const Node& node : nodes) {
        ++on_host[node.host_name()];
        host_rank.emplace(node.host_name(), static_cast<uint32_t>(host_rank.size()));
    }
    std::map<std::string, uint32_t> seen;
    for (const Node& node : nodes) {
        const std::string& host = node.host_name();
        world.slots.push_back(WorldSlot{node.id, host, node.address, seen[host]++, on_host[host], host_rank[host]});
    }
    return world;
}

std::vector<WorldPeer> World::peers() const {
    std::vector<WorldPeer> out;
    out.reserve(slots.size());
    for (uint32_t r = 0; r < size(); ++r) out.push_back(WorldPeer{r, slots[r].id, slots[r].host, slots[r].address});
    return out;
}

namespace {

constexpr auto kSlot = std::tuple{protocol::field("id", &WorldSlot::id),
                                  protocol::field("host", &WorldSlot::host),
                                  protocol::field("address", &WorldSlot::address, protocol::Presence::defaulted),
                                  protocol::field("local_rank", &WorldSlot::local_rank),
                                  protocol::field("local_world_size", &WorldSlot::local_world_size),
                                  protocol::field("node_rank", &WorldSlot::node_rank)};

}  // namespace

json::object to_json(const World& world) {
    json::array slots;
    for (const WorldSlot& slot : world.slots) slots.push_back(protocol::write_message(slot, kSlot));
    json::object out;
    out["generation"] = world.generation;
    out["formed_at"] = world.formed_at;
    out["ranks"] = std::move(slots);
    return out;
}

World world_from_json(const json::value& value, std::string_view where, Errc code) {
    detail::FieldReader reader(value, std::string(where), code);
    reader.allow({"generation", "formed_at", "ranks"});
    World world;
    world.generation = reader.uint("generation");
    world.formed_at = reader.number("formed_at");
    const json::array& ranks = reader.array("ranks");
    for (std::size_t r = 0; r < ranks.size(); ++r) {
        world.slots.push_back(protocol::read_message<WorldSlot>(ranks[r], fmt::format("{}: ranks[{}]", where, r),
                                                                protocol::ReadAs{code, true}, kSlot));
    }
    return world;
}

}  // namespace cohort::coord
