// Replanning for a new membership with as few moves as possible:
//  1. placements on members that stayed, stay;
//  2. placements of departed members go to newcomers still short of an even
//     share, else wherever the strategy prefers;
//  3. newcomers still short take placements from the most loaded members;
//  4. members left over the cap (the average fell as newcomers arrived, or
//     spreading rules forced it) shed the excess, to newcomers first.
// Placements that already moved are the first to move again, so a shed never
// costs a move of its own when it can be avoided.
#include "sharding/chooser.hpp"
#include "sharding/plan_builder.hpp"
#include "sharding/rebalance.hpp"

#include <cohort/error.hpp>

#include <set>

#include <fmt/format.h>

namespace cohort {

namespace {
constexpr uint32_t kUnowned = UINT32_MAX;
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
    plan.table_bits_ = std::max(old.table_bits_, detail::SlotTable::bits_for(n));

    const uint32_t r = options.replication;
    const uint64_t placements = plan.shard_count() * r;
    detail::Placement placement(plan.members_, cap(options, placements, n), even_split(options), placements);

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
    std::set<std::pair<uint64_t, uint32_t>> short_newcomers;  // (load, member)
    std::vector<uint32_t> newcomers;
    for (uint32_t m = 0; m < n; ++m) {
        if (!newcomer[m]) continue;
        newcomers.push_back(m);
        if (placement.load(m) < even) short_newcomers.emplace(placement.load(m), m);
    }

    // 2. Re-home orphaned placements.
    std::vector<bool> moved(placements, false);
    std::vector<uint32_t> taken;
    auto chooser = detail::make_chooser({*plan.shards_, plan.members_, options, placement, plan.table_bits_});
    for (uint64_t p : orphans) {
        taken.clear();
        for (uint64_t q = p / r * r; q < p / r * r + r; ++q)
            if (q != p && plan.owners_[q] != kUnowned) taken.push_back(plan.owners_[q]);
        std::optional<uint32_t> to;
        for (const auto& [load, m] : short_newcomers) {
            if (placement.allows(m, taken, detail::kStrict)) {
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
        placement.take(*to);
        moved[p] = true;
    }

    // 3 and 4.
    detail::Rebalancer rebalancer(plan.owners_, r, placement, std::move(moved));
    rebalancer.fill(newcomers, even);
    if (options.strategy != Strategy::custom) rebalancer.shed_over_cap(newcomer);

    for (uint64_t p = 0; p < placements; ++p)
        if (old.members_[old.owners_[p]].id != plan.members_[plan.owners_[p]].id) ++plan.moved_;
    finish(plan);
    return plan;
}

}  // namespace cohort
