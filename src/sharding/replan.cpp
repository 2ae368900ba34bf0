// Replanning for a new membership with as few moves as possible:
//  1. placements on members that stayed, stay;
//  2. placements of departed members go to newcomers still short of an even
//     share, else wherever the strategy prefers;
//  3. newcomers still short take placements from the most loaded members;
//  4. only if a member is left over its cap does it shed the excess.
#include "sharding/chooser.hpp"
#include "sharding/plan_builder.hpp"

#include <cohort/error.hpp>

#include <set>

#include <fmt/format.h>

namespace cohort {

namespace {

constexpr uint32_t kUnowned = UINT32_MAX;

// The placements each member holds, for taking some away.
class Holdings {
public:
    Holdings(const std::vector<uint32_t>& owners, uint32_t members) : lists_(members) {
        for (uint64_t p = 0; p < owners.size(); ++p) lists_[owners[p]].push_back(p);
    }
    // Removes and returns the newest placement of `from` for which `fits`.
    template <typename Fits>
    std::optional<uint64_t> take(uint32_t from, Fits&& fits) {
        auto& list = lists_[from];
        for (std::size_t i = list.size(); i-- > 0;) {
            if (fits(list[i])) {
                const uint64_t p = list[i];
                list[i] = list.back();
                list.pop_back();
                return p;
            }
        }
        return std::nullopt;
    }
    void give(uint32_t to, uint64_t placement) { lists_[to].push_back(placement); }

private:
    std::vector<std::vector<uint64_t>> lists_;
};

}  // namespace

ShardPlan PlanBuilder::replan(const ShardPlan& old, const Topology& new_members, const PlanOptions& options) {
    ShardPlan plan;
    plan.members_ = ready_members(new_members, options.roles);
    const uint32_t n = plan.member_count();
    validate(options, n);
    if (options.replication != old.replication()) {
        throw Error(Errc::invalid_argument,
                    fmt::format("a replan keeps the replication factor ({}), but {} was asked for; make a new plan",
                                old.replication(), options.replication));
    }
    plan.shards_ = old.shards_;
    plan.options_ = options;
    // Keep the hash slot table so preferences stay stable, unless the
    // membership outgrew it.
    plan.table_bits_ = n <= (uint64_t{1} << old.table_bits_) ? old.table_bits_ : detail::SlotTable::bits_for(n);

    const uint32_t r = options.replication;
    const uint64_t count = plan.shard_count();
    const uint64_t placements = count * r;
    detail::Placement placement(plan.members_, r, count, cap(options, placements, n));

    std::vector<uint32_t> renumber(old.member_count(), kUnowned);
    std::vector<bool> newcomer(n, true);
    for (uint32_t m = 0; m < old.member_count(); ++m) {
        if (auto index = plan.members_.find(old.members_[m].id)) {
            renumber[m] = static_cast<uint32_t>(*index);
            newcomer[*index] = false;
        }
    }
    plan.owners_.resize(placements);
    std::vector<uint64_t> orphans;
    for (uint64_t p = 0; p < placements; ++p) {
        plan.owners_[p] = renumber[old.owners_[p]];
        if (plan.owners_[p] == kUnowned) orphans.push_back(p);
        else placement.take(plan.owners_[p]);
    }

    const uint64_t even = placements / n;  // every newcomer gets at least this
    auto other_owners = [&](uint64_t p, std::vector<uint32_t>& out) {
        out.clear();
        const uint64_t first = p / r * r;
        for (uint64_t q = first; q < first + r; ++q)
            if (q != p && plan.owners_[q] != kUnowned) out.push_back(plan.owners_[q]);
    };
    std::vector<uint32_t> taken;

    // Members ordered by load, kept in step with `placement`.
    std::set<std::pair<uint64_t, uint32_t>> by_load;
    for (uint32_t m = 0; m < n; ++m) by_load.emplace(placement.load(m), m);
    auto take = [&](uint32_t m) {
        by_load.erase({placement.load(m), m});
        placement.take(m);
        by_load.emplace(placement.load(m), m);
    };
    auto release = [&](uint32_t m) {
        by_load.erase({placement.load(m), m});
        placement.release(m);
        by_load.emplace(placement.load(m), m);
    };
    // Newcomers short of an even share, least loaded first.
    std::set<std::pair<uint64_t, uint32_t>> short_newcomers;
    for (uint32_t m = 0; m < n; ++m)
        if (newcomer[m] && placement.load(m) < even) short_newcomers.emplace(placement.load(m), m);

    // 2. Re-home orphaned placements.
    auto chooser = detail::make_chooser({*plan.shards_, plan.members_, options, placement, plan.table_bits_});
    for (uint64_t p : orphans) {
        other_owners(p, taken);
        std::optional<uint32_t> to;
        for (const auto& [load, m] : short_newcomers) {
            if (placement.allows(m, taken, detail::Strictness::any_host)) {
                to = m;
                break;
            }
        }
        if (to) {
            short_newcomers.erase({placement.load(*to), *to});
            if (placement.load(*to) + 1 < even) short_newcomers.emplace(placement.load(*to) + 1, *to);
        } else {
            to = chooser->choose(p / r, static_cast<uint32_t>(p % r), taken);
        }
        plan.owners_[p] = *to;
        take(*to);
    }

    // 3. Newcomers short of an even share take from the most loaded.
    Holdings holdings(plan.owners_, n);
    auto move = [&](uint32_t from, uint32_t to, detail::Strictness strictness) {
        auto p = holdings.take(from, [&](uint64_t q) {
            other_owners(q, taken);
            return placement.allows(to, taken, strictness);
        });
        if (!p) return false;
        plan.owners_[*p] = to;
        holdings.give(to, *p);
        release(from);
        take(to);
        return true;
    };
    for (const auto& [load, m] : std::vector(short_newcomers.begin(), short_newcomers.end())) {
        while (placement.load(m) < even) {
            // The most loaded donor that has a placement m may take.
            bool moved = false;
            for (auto it = by_load.rbegin(); it != by_load.rend() && it->first > placement.load(m) + 1; ++it) {
                if (it->second != m && move(it->second, m, detail::Strictness::over_cap)) {
                    moved = true;
                    break;
                }
            }
            if (!moved) break;
        }
    }

    // 4. Nobody stays over the cap (only possible after newcomers arrive).
    if (options.strategy != Strategy::custom) {
        while (!by_load.empty() && by_load.rbegin()->first > placement.cap()) {
            const uint32_t from = by_load.rbegin()->second;
            bool moved = false;
            for (auto it = by_load.begin(); it != by_load.end() && it->first + 1 < placement.load(from); ++it) {
                if (move(from, it->second, detail::Strictness::any_host)) {
                    moved = true;
                    break;
                }
            }
            if (!moved) break;
        }
    }

    for (uint64_t p = 0; p < placements; ++p)
        if (old.members_[old.owners_[p]].id != plan.members_[plan.owners_[p]].id) ++plan.moved_;
    finish(plan);
    return plan;
}

}  // namespace cohort
