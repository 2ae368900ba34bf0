#include <cohort/error.hpp>
#include <cohort/rank_order.hpp>

#include "core/text.hpp"

#include <algorithm>
#include <array>
#include <numeric>

#include <fmt/format.h>

namespace cohort {

namespace {

// Levels from the widest down, the order in which ranks are grouped.
constexpr std::array<Level, kLevelCount> kWidestFirst = {Level::region, Level::zone, Level::rack,
                                                         Level::network_switch, Level::host};

const std::string& label_at(const Node& node, Level level) {
    return level == Level::host ? node.host_name() : node.label(level);
}

}  // namespace

RankOrder::RankOrder(const Topology& topology, RoleMask roles) : topology_(topology) {
    std::vector<uint32_t> chosen;
    for (uint32_t i = 0; i < topology.size(); ++i) {
        const Node& node = topology[i];
        if (node.status == NodeStatus::ready && (roles & role_bit(node.role)) != 0) chosen.push_back(i);
    }
    if (chosen.empty()) {
        throw Error(Errc::unsatisfiable,
                    fmt::format("no node to rank: none of the {} nodes is ready with a role in the "
                                "requested set (by default worker and chief)",
                                topology.size()));
    }

    // The chief leads: every group that contains it sorts first at its level.
    // With several chiefs, the one whose id sorts first leads.
    const Node* chief = nullptr;
    for (uint32_t i : chosen) {
        const Node& node = topology[i];
        if (node.role == Role::chief && (chief == nullptr || detail::natural_less(node.id, chief->id)))
            chief = &node;
    }
    // in_chief_group[i][k]: node i shares the chief's group at kWidestFirst[k].
    std::vector<std::array<bool, kLevelCount>> in_chief_group(topology.size());
    for (uint32_t i : chosen) {
        bool same = chief != nullptr;
        for (int k = 0; k < kLevelCount; ++k) {
            same = same && label_at(topology[i], kWidestFirst[k]) == label_at(*chief, kWidestFirst[k]);
            in_chief_group[i][k] = same;
        }
    }

    std::sort(chosen.begin(), chosen.end(), [&](uint32_t a, uint32_t b) {
        const Node& x = topology[a];
        const Node& y = topology[b];
        for (int k = 0; k < kLevelCount; ++k) {
            if (in_chief_group[a][k] != in_chief_group[b][k]) return in_chief_group[a][k];
            const std::string& lx = label_at(x, kWidestFirst[k]);
            const std::string& ly = label_at(y, kWidestFirst[k]);
            if (lx != ly) return detail::natural_less(lx, ly);
        }
        if ((&x == chief) != (&y == chief)) return &x == chief;
        return detail::natural_less(x.id, y.id);
    });

    const auto n = static_cast<uint32_t>(chosen.size());
    ranks_.resize(n);
    for (auto& g : groups_) g.assign(n, 0);
    for (uint32_t r = 0; r < n; ++r) {
        ranks_[r].node_index = chosen[r];
        if (r == 0) continue;
        // A node starts a new group at a level if any label from the widest
        // level down to that one differs from the previous rank's.
        bool differs = false;
        for (Level level : kWidestFirst) {
            const int l = static_cast<int>(level);
            differs = differs || label_at(topology[chosen[r]], level) != label_at(topology[chosen[r - 1]], level);
            groups_[l][r] = groups_[l][r - 1] + (differs ? 1 : 0);
        }
    }

    const auto& hosts = groups_[static_cast<int>(Level::host)];
    host_count_ = hosts[n - 1] + 1;
    for (uint32_t begin = 0; begin < n;) {
        uint32_t end = begin;
        while (end < n && hosts[end] == hosts[begin]) ++end;
        for (uint32_t r = begin; r < end; ++r) {
            ranks_[r].local_rank = r - begin;
            ranks_[r].local_world_size = end - begin;
            ranks_[r].node_rank = hosts[r];
        }
        begin = end;
    }
}

std::optional<uint32_t> RankOrder::rank_of(std::string_view node_id) const {
    auto index = topology_.find(node_id);
    if (!index) return std::nullopt;
    for (uint32_t r = 0; r < ranks_.size(); ++r)
        if (ranks_[r].node_index == *index) return r;
    return std::nullopt;
}

uint32_t ring_crossings(const RankOrder& order, Level level) {
    const uint32_t n = order.world_size();
    if (n < 2) return 0;
    uint32_t crossings = 0;
    for (uint32_t r = 0; r < n; ++r) crossings += order.group(r, level) != order.group((r + 1) % n, level) ? 1 : 0;
    return crossings;
}

}  // namespace cohort
