// Topology-aware rank order: ranks are contiguous within a host, then within
// a switch, rack, zone and region, so that ring neighbours share the closest
// level they can. Deterministic: the same nodes in any order get the same ranks.
#pragma once

#include <cohort/export.hpp>

#include <cohort/node.hpp>
#include <cohort/topology.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace cohort {

// Bit (1 << Role) for each role to rank.
using RoleMask = uint32_t;
inline constexpr RoleMask role_bit(Role role) { return 1u << static_cast<int>(role); }
inline constexpr RoleMask kTrainingRoles = role_bit(Role::worker) | role_bit(Role::chief);
inline constexpr RoleMask kAllRoles = 0x1Fu;

struct RankInfo {
    uint32_t node_index = 0;        // into the topology
    uint32_t local_rank = 0;        // within its host
    uint32_t local_world_size = 0;  // ranked nodes on its host
    uint32_t node_rank = 0;         // index of its host among ranked hosts
};

class COHORT_API RankOrder {
public:
    // Ranks the ready nodes whose role is in `roles`. The chief, if any, gets
    // rank 0: its groups are put first at every level, which keeps every
    // group contiguous. Throws Error(unsatisfiable) if nothing is ranked.
    RankOrder(const Topology& topology, RoleMask roles = kTrainingRoles);

    uint32_t world_size() const { return static_cast<uint32_t>(ranks_.size()); }
    uint32_t host_count() const { return host_count_; }
    const RankInfo& operator[](uint32_t rank) const { return ranks_[rank]; }
    std::span<const RankInfo> ranks() const { return ranks_; }
    std::optional<uint32_t> rank_of(std::string_view node_id) const;
    const Topology& topology() const { return topology_; }

    // The group key of `rank` at `level`: equal keys mean the same group.
    uint32_t group(uint32_t rank, Level level) const {
        return groups_[static_cast<int>(level)][rank];
    }

private:
    Topology topology_;
    std::vector<RankInfo> ranks_;
    std::vector<uint32_t> groups_[kLevelCount];
    uint32_t host_count_ = 0;
};

// How many edges of the closed ring 0 -> 1 -> ... -> n-1 -> 0 join ranks in
// different groups at `level`. For this library's orders it equals the number
// of groups at that level, or 0 when there is one: the minimum possible.
COHORT_API uint32_t ring_crossings(const RankOrder& order, Level level);

}  // namespace cohort
