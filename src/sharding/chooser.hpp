// A ReplicaChooser picks the member for one replica of one shard. Each
// strategy is one chooser, used both to build a plan and, in a replan, to
// re-home the placements of departed members.
#pragma once

#include "sharding/placement.hpp"

#include <cohort/sharding.hpp>

#include <memory>
#include <span>

namespace cohort::detail {

class ReplicaChooser {
public:
    virtual ~ReplicaChooser() = default;
    // Never returns a member in `taken`. Throws Error on failure.
    virtual uint32_t choose(uint64_t shard, uint32_t replica, std::span<const uint32_t> taken) = 0;
};

struct ChooserContext {
    const ShardSet& shards;
    const Topology& members;
    const PlanOptions& options;
    Placement& placement;
    uint32_t table_bits;  // hash strategy
};

// Built after `placement` holds the loads it starts from.
std::unique_ptr<ReplicaChooser> make_chooser(const ChooserContext& context);
std::unique_ptr<ReplicaChooser> make_locality_chooser(const ChooserContext& context);

}  // namespace cohort::detail
