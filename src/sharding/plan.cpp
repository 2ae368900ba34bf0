#include "sharding/plan_builder.hpp"

#include "sharding/chooser.hpp"
#include "sharding/rebalance.hpp"

#include <cohort/error.hpp>

#include <cmath>

#include <fmt/format.h>

namespace cohort {

namespace {

constexpr std::string_view kStrategyNames[] = {"round_robin", "hash", "locality", "random", "custom"};

}  // namespace

std::string_view to_string(Strategy strategy) noexcept { return kStrategyNames[static_cast<int>(strategy)]; }

std::optional<Strategy> parse_strategy(std::string_view text) noexcept {
    for (std::size_t i = 0; i < std::size(kStrategyNames); ++i)
        if (kStrategyNames[i] == text) return static_cast<Strategy>(i);
    if (text == "round-robin") return Strategy::round_robin;
    return std::nullopt;
}

void PlanBuilder::validate(const PlanOptions& options, uint32_t member_count) {
    if (static_cast<uint32_t>(options.strategy) > static_cast<uint32_t>(Strategy::custom))
        throw Error(Errc::invalid_argument, fmt::format("unknown sharding strategy {}", static_cast<int>(options.strategy)));
    if (options.replication == 0) throw Error(Errc::invalid_argument, "replication must be at least 1");
    if (options.roles == 0 || (options.roles & ~kAllRoles) != 0)
        throw Error(Errc::invalid_argument, fmt::format("role mask {:#x} names no known role", options.roles));
    if (member_count == 0) {
        throw Error(Errc::unsatisfiable,
                    "no member to assign shards to: no node is ready with a role that holds shards "
                    "(by default worker and chief)");
    }
    if (options.replication > member_count) {
        throw Error(Errc::unsatisfiable,
                    fmt::format("replication {} needs at least {} ready members, but there are only {}",
                                options.replication, options.replication, member_count));
    }
    if (!std::isfinite(options.load_slack) || options.load_slack < 0 || options.load_slack > 100)
        throw Error(Errc::invalid_argument, fmt::format("load_slack must be in [0, 100], got {}", options.load_slack));
    for (double w : {options.locality_weight, options.load_weight, options.hardware_weight}) {
        if (!std::isfinite(w) || w < 0)
            throw Error(Errc::invalid_argument, fmt::format("weights must be finite and non-negative, got {}", w));
    }
    for (const LocalityEntry& e : options.locality) {
        if (!(e.score >= 0.0 && e.score <= 1.0)) {
            throw Error(Errc::invalid_argument, fmt::format("locality score for node '{}' and file '{}' must be in "
                                                            "[0, 1], got {}",
                                                            e.node_id, e.file_path, e.score));
        }
    }
    if (options.strategy == Strategy::custom && !options.custom)
        throw Error(Errc::invalid_argument, "the custom strategy needs an assignment function");
}

Topology PlanBuilder::ready_members(const Topology& topology, RoleMask roles) {
    Topology ready;
    for (const Node& node : topology.nodes())
        if (node.status == NodeStatus::ready && (roles & role_bit(node.role)) != 0) ready.add(node);
    return ready;
}

uint64_t PlanBuilder::cap(const PlanOptions& options, uint64_t placements, uint32_t members) {
    const uint64_t even = placements / members + (placements % members != 0 ? 1 : 0);
    switch (options.strategy) {
        case Strategy::hash: {
            const double slack = std::ceil(static_cast<double>(placements) / members * (1.0 + options.load_slack));
            return std::max<uint64_t>(even, static_cast<uint64_t>(slack));
        }
        case Strategy::locality: return even + 1;
        case Strategy::custom: return UINT64_MAX;
        default: return even;
    }
}

bool PlanBuilder::even_split(const PlanOptions& options) {
    switch (options.strategy) {
        case Strategy::round_robin:
        case Strategy::random: return true;
        case Strategy::hash: return options.load_slack == 0.0;
        default: return false;
    }
}

void PlanBuilder::finish(ShardPlan& plan) {
    const uint32_t n = plan.member_count();
    plan.loads_.assign(n, 0);
    for (uint32_t m : plan.owners_) ++plan.loads_[m];
    plan.by_member_offsets_.assign(n + 1, 0);
    for (uint32_t m = 0; m < n; ++m) plan.by_member_offsets_[m + 1] = plan.by_member_offsets_[m] + plan.loads_[m];
    plan.by_member_.resize(plan.owners_.size());
    std::vector<uint64_t> fill(plan.by_member_offsets_.begin(), plan.by_member_offsets_.end() - 1);
    const uint32_t r = plan.options_.replication;
    for (uint64_t i = 0; i < plan.owners_.size(); ++i) plan.by_member_[fill[plan.owners_[i]]++] = i / r;
}

ShardPlan PlanBuilder::create(const ShardSet& shards, const Topology& members, const PlanOptions& options) {
    ShardPlan plan;
    plan.members_ = ready_members(members, options.roles);
    validate(options, plan.member_count());
    plan.shards_ = std::make_shared<const ShardSet>(shards);
    plan.options_ = options;
    plan.table_bits_ = detail::SlotTable::bits_for(plan.member_count());

    const uint32_t r = options.replication;
    const uint64_t count = shards.size();
    detail::Placement placement(plan.members_, cap(options, count * r, plan.member_count()),
                                even_split(options), count * r);
    auto chooser = detail::make_chooser({shards, plan.members_, options, placement, plan.table_bits_});
    plan.owners_.resize(count * r);
    for (uint64_t s = 0; s < count; ++s) {
        uint32_t* owners = plan.owners_.data() + s * r;
        for (uint32_t k = 0; k < r; ++k) {
            owners[k] = chooser->choose(s, k, {owners, k});
            placement.take(owners[k]);
        }
    }
    // Greedy choices can paint themselves into a corner (the only members
    // with room already hold the shard); repair by shedding the excess.
    if (options.strategy != Strategy::custom) {
        // Every placement is new, so any may move.
        detail::Rebalancer rebalancer(plan.owners_, r, placement, std::vector<bool>(plan.owners_.size(), true));
        rebalancer.shed_over_cap(std::vector<bool>(plan.member_count(), false));
        rebalancer.level();
    }
    finish(plan);
    return plan;
}

ShardPlan ShardPlan::create(const ShardSet& shards, const Topology& members, const PlanOptions& options) {
    return PlanBuilder::create(shards, members, options);
}

ShardPlan ShardPlan::replan(const Topology& new_members) const { return replan(new_members, options_); }

ShardPlan ShardPlan::replan(const Topology& new_members, const PlanOptions& options) const {
    return PlanBuilder::replan(*this, new_members, options);
}

}  // namespace cohort
