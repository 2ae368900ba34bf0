// Moving placements between members after the fact: newcomers taking an
// even share in a replan, and members over their cap shedding the excess.
#pragma once

#include "sharding/placement.hpp"

#include <set>
#include <span>
#include <utility>
#include <vector>

namespace cohort::detail {

class Rebalancer {
public:
    // `owners` is shard-major with `replication` entries per shard; every
    // entry must be a member. Placements flagged in `moved` already changed
    // owner, so moving them again costs nothing: they go first.
    Rebalancer(std::vector<uint32_t>& owners, uint32_t replication, Placement& placement, std::vector<bool> moved);

    // Moves one placement from `from` to `to` that `to` may take under
    // `strictness` (only one that already moved, if `moved_only`); false if
    // there is none.
    bool move(uint32_t from, uint32_t to, Strictness strictness, bool moved_only = false);
    // Whether `to` may take placement p from `from` under `level`, keeping at
    // least the spread p has on `from`.
    bool may_take(uint32_t to, uint64_t p, uint32_t from, Strictness level);
    // Each member in `takers` (below `target`) takes placements from the most
    // loaded members until it reaches `target` or nothing fits.
    void fill(std::span<const uint32_t> takers, uint64_t target);
    // Members over the cap give placements away while any member can take
    // one: placements that already moved to anyone with room (`preferred`
    // members first), others only to `preferred` members.
    void shed_over_cap(const std::vector<bool>& preferred);
    // When the spreading rules keep some members over the cap, the cap no
    // longer evens out the loads: move placements from the most to the
    // least loaded members, while their loads differ by more than one and
    // some move keeps the spread. Only where every placement may move
    // (create), since it ignores `moved`.
    void level();

private:
    bool shed_one(uint32_t from, const std::vector<bool>& preferred, bool moved_only);
    bool shed_by_exchange(uint32_t from);
    void move_placement(uint64_t placement, uint32_t from, uint32_t to);
    void retake(uint32_t from, uint32_t to);
    // The members of the placement's shard other than its own owner.
    std::span<const uint32_t> others(uint64_t placement);

    std::vector<uint32_t>& owners_;
    uint32_t replication_;
    Placement& placement_;
    std::vector<bool> moved_;
    std::vector<std::vector<uint64_t>> held_;         // member -> placements
    std::set<std::pair<uint64_t, uint32_t>> by_load_;  // (load, member)
    std::vector<uint32_t> scratch_;
};

}  // namespace cohort::detail
