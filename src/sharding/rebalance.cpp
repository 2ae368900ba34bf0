#include "sharding/rebalance.hpp"

#include <algorithm>
#include <optional>
#include <unordered_set>

namespace cohort::detail {

Rebalancer::Rebalancer(std::vector<uint32_t>& owners, uint32_t replication, Placement& placement,
                       std::vector<bool> moved)
    : owners_(owners), replication_(replication), placement_(placement), moved_(std::move(moved)),
      held_(placement.size()) {
    for (uint64_t p = 0; p < owners_.size(); ++p) held_[owners_[p]].push_back(p);
    for (uint32_t m = 0; m < placement_.size(); ++m) by_load_.emplace(placement_.load(m), m);
}

std::span<const uint32_t> Rebalancer::others(uint64_t p) {
    scratch_.clear();
    const uint64_t first = p / replication_ * replication_;
    for (uint64_t q = first; q < first + replication_; ++q)
        if (q != p) scratch_.push_back(owners_[q]);
    return scratch_;
}

bool Rebalancer::may_take(uint32_t to, uint64_t p, uint32_t from, Strictness level) {
    const auto rest = others(p);
    const Strictness kept{stricter(level.spread, placement_.spread_with(from, rest)), level.within_cap};
    return placement_.allows(to, rest, kept);
}

bool Rebalancer::move(uint32_t from, uint32_t to, Strictness strictness, bool moved_only) {
    auto& list = held_[from];
    // Already-moved placements first, then the rest; newest first in each.
    for (bool want_moved : {true, false}) {
        if (!want_moved && moved_only) break;
        for (std::size_t i = list.size(); i-- > 0;) {
            const uint64_t p = list[i];
            if (moved_[p] != want_moved || !may_take(to, p, from, strictness)) continue;
            list[i] = list.back();
            list.pop_back();
            owners_[p] = to;
            moved_[p] = true;
            held_[to].push_back(p);
            retake(from, to);
            return true;
        }
    }
    return false;
}

void Rebalancer::retake(uint32_t from, uint32_t to) {
    by_load_.erase({placement_.load(from), from});
    by_load_.erase({placement_.load(to), to});
    placement_.release(from);
    placement_.take(to);
    by_load_.emplace(placement_.load(from), from);
    by_load_.emplace(placement_.load(to), to);
}

// The rules a rebalancing move keeps: the spread of replicas over racks and
// hosts if it can, else at least the spread the placement has now. Balance
// never costs spread: a member stays over the cap rather than put two
// replicas of a shard in one rack (see may_take).
constexpr Strictness kMoveLevels[] = {{Spread::hosts_and_racks, true}, {Spread::none, true}};

void Rebalancer::fill(std::span<const uint32_t> takers, uint64_t target) {
    for (uint32_t m : takers) {
        while (placement_.load(m) < target) {
            bool moved = false;
            for (Strictness level : kMoveLevels) {
                // From the most loaded member that has a placement m may
                // take; `move` changes by_load_, so stop once it succeeds.
                for (auto it = by_load_.rbegin(); it != by_load_.rend() && it->first > placement_.load(m) + 1; ++it) {
                    if (it->second != m && move(it->second, m, level)) {
                        moved = true;
                        break;
                    }
                }
                if (moved) break;
            }
            if (!moved) break;
        }
    }
}

bool Rebalancer::shed_one(uint32_t from, const std::vector<bool>& preferred, bool moved_only) {
    for (Strictness level : kMoveLevels) {
        for (bool want_preferred : {true, false}) {
            // Placements that never moved go to preferred members only: a
            // replan moves nothing between members that stayed.
            if (!want_preferred && !moved_only) break;
            for (auto it = by_load_.begin(); it != by_load_.end() && it->first < placement_.cap(); ++it) {
                // `move` changes by_load_: leave as soon as it succeeds.
                if (preferred[it->second] == want_preferred && move(from, it->second, level, moved_only)) return true;
            }
        }
    }
    return false;
}

// When the only members with room already hold the shard of every moved
// placement `from` has, a moved placement elsewhere (on `via`) can go to a
// member with room while `from` hands one of its moved placements to `via`:
// two moves, both of placements that moved anyway.
bool Rebalancer::shed_by_exchange(uint32_t from) {
    for (Strictness level : kMoveLevels) {
        const Strictness over_cap{level.spread, false};  // `via` gives one back first
        for (uint32_t via = 0; via < held_.size(); ++via) {
            if (via == from) continue;
            for (uint64_t p : held_[from]) {
                if (!moved_[p] || !may_take(via, p, from, over_cap)) continue;
                for (auto it = by_load_.begin(); it != by_load_.end() && it->first < placement_.cap(); ++it) {
                    const uint32_t to = it->second;
                    if (to == via || to == from || !move(via, to, level, true)) continue;
                    move_placement(p, from, via);
                    return true;
                }
            }
        }
    }
    return false;
}

void Rebalancer::move_placement(uint64_t p, uint32_t from, uint32_t to) {
    auto& list = held_[from];
    list.erase(std::find(list.begin(), list.end(), p));
    owners_[p] = to;
    moved_[p] = true;
    held_[to].push_back(p);
    retake(from, to);
}

void Rebalancer::shed_over_cap(const std::vector<bool>& preferred) {
    std::vector<uint32_t> stuck;  // over the cap with nowhere to shed to
    while (!by_load_.empty() && placement_.over_cap(by_load_.rbegin()->second)) {
        const uint32_t from = by_load_.rbegin()->second;
        // A placement that already moved can move again for free, so any
        // such move beats the best move of one that has not.
        if (shed_one(from, preferred, true) || shed_by_exchange(from) || shed_one(from, preferred, false)) continue;
        // Set it aside so the loop can reach the next member over the cap.
        by_load_.erase({placement_.load(from), from});
        stuck.push_back(from);
    }
    for (uint32_t m : stuck) by_load_.emplace(placement_.load(m), m);
}

void Rebalancer::level() {
    // Nothing to do unless the spreading rules held someone over the cap:
    // otherwise the cap already evened the loads out.
    bool forced = false;
    for (uint32_t m = 0; m < placement_.size() && !forced; ++m) forced = placement_.over_cap(m);
    if (!forced) return;
    // A pair that found no movable placement is not tried again, which
    // bounds the scans by members x placements even when a member's whole
    // list is pinned by the spread (a lone rack's node holding every shard).
    std::unordered_set<uint64_t> failed;
    std::set<std::pair<uint64_t, uint32_t>> open = by_load_;  // (load, member) not yet done
    while (open.size() > 1) {
        const auto [low, to] = *open.begin();
        std::optional<uint32_t> gave;  // the member `to` took a placement from
        for (auto it = open.rbegin(); it != open.rend() && it->first > low + 1 && !gave; ++it) {
            const uint32_t from = it->second;
            const uint64_t pair = uint64_t{from} << 32 | to;
            if (failed.contains(pair)) continue;
            for (Strictness level : kMoveLevels) {
                // Loads only: the cap is what went wrong here.
                if (move(from, to, {level.spread, false})) {
                    gave = from;
                    break;
                }
            }
            if (!gave) failed.insert(pair);
        }
        open.erase({low, to});
        if (!gave) continue;  // nothing fits `to`: done with it
        open.erase({placement_.load(*gave) + 1, *gave});
        open.emplace(placement_.load(*gave), *gave);
        open.emplace(placement_.load(to), to);
    }
}

}  // namespace cohort::detail
