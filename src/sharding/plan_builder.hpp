// Builds ShardPlans: the shared steps of create() and replan().
#pragma once

#include <cohort/sharding.hpp>

namespace cohort {

class PlanBuilder {
public:
    static ShardPlan create(const ShardSet& shards, const Topology& members, const PlanOptions& options);
    static ShardPlan replan(const ShardPlan& old, const Topology& new_members, const PlanOptions& options);

private:
    // Checks options against the member count; throws Error naming the problem.
    static void validate(const PlanOptions& options, uint32_t member_count);
    static Topology ready_members(const Topology& topology, RoleMask roles);
    // The most placements one member may hold under this strategy.
    static uint64_t cap(const PlanOptions& options, uint64_t placements, uint32_t members);
    // Whether the cap is an exact even split (loads within one of each other).
    static bool even_split(const PlanOptions& options);
    // Fills loads_ and the member -> shards index from owners_.
    static void finish(ShardPlan& plan);
};

}  // namespace cohort
