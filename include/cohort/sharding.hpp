// Shard plans: which nodes hold which shards, with replication, five
// strategies and minimal-movement replanning. docs/sharding.md explains each.
#pragma once

#include <cohort/export.hpp>

#include <cohort/rank_order.hpp>
#include <cohort/shards.hpp>
#include <cohort/topology.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

enum class Strategy : int32_t { round_robin = 0, hash = 1, locality = 2, random = 3, custom = 4 };

COHORT_API std::string_view to_string(Strategy strategy) noexcept;
COHORT_API std::optional<Strategy> parse_strategy(std::string_view text) noexcept;

// Chooses the member for replica `replica` of `shard`, given the members
// already chosen for that shard. Returns an index below `member_count`.
using AssignFunction = std::function<uint32_t(uint64_t shard, uint32_t replica,
                                              std::span<const uint32_t> taken,
                                              uint32_t member_count)>;

struct LocalityEntry {
    std::string node_id;
    std::string file_path;
    double score = 1.0;  // in [0, 1]; 1 = the file is on the node's disk
};

// Reads a locality map, YAML or JSON: {NODE_ID: {FILE_PATH: SCORE}}.
// Errors name file:line:column and the entry.
COHORT_API std::vector<LocalityEntry> load_locality(const std::filesystem::path& path);

struct PlanOptions {
    Strategy strategy = Strategy::hash;
    // Which ready nodes hold shards: by default those that train.
    RoleMask roles = kTrainingRoles;
    uint32_t replication = 1;
    uint64_t seed = 0;
    // hash: a member holds at most ceil(average * (1 + load_slack)). 0 makes
    // loads exactly even; more slack lets more shards sit at their first choice.
    double load_slack = 0.0;
    double locality_weight = 1.0;
    double load_weight = 0.5;
    double hardware_weight = 0.1;
    std::vector<LocalityEntry> locality;  // locality strategy
    AssignFunction custom;                // custom strategy
};

class COHORT_API ShardPlan {
public:
    // Every shard gets `replication` distinct members among the ready nodes
    // of `members` whose role is in options.roles, spread over hosts and
    // racks as far as they allow (distinct ones where there are enough); a
    // member goes over its load cap before two replicas share a rack.
    // Throws Error(invalid_argument) for bad options and
    // Error(unsatisfiable) when replication exceeds the member count.
    static ShardPlan create(const ShardSet& shards, const Topology& members,
                            const PlanOptions& options = {});

    // For a new membership: placements on departed members move, plus the
    // fewest needed to give newcomers an even share; all others stay.
    ShardPlan replan(const Topology& new_members) const;
    ShardPlan replan(const Topology& new_members, const PlanOptions& options) const;

    uint64_t shard_count() const { return shards_->size(); }
    uint32_t replication() const { return options_.replication; }
    const Topology& members() const { return members_; }
    const ShardSet& shards() const { return *shards_; }
    const PlanOptions& options() const { return options_; }
    uint32_t member_count() const { return static_cast<uint32_t>(members_.size()); }

    // Member index holding replica `replica` of `shard`; replica 0 is primary.
    uint32_t owner(uint64_t shard, uint32_t replica = 0) const {
        return owners_[shard * options_.replication + replica];
    }
    std::span<const uint32_t> owners(uint64_t shard) const {
        return {owners_.data() + shard * options_.replication, options_.replication};
    }
    uint64_t load(uint32_t member) const { return loads_[member]; }
    std::span<const uint64_t> loads() const { return loads_; }
    // The shards a member holds, ascending.
    std::span<const uint64_t> member_shards(uint32_t member) const {
        return {by_member_.data() + by_member_offsets_[member], by_member_.data() + by_member_offsets_[member + 1]};
    }
    // Placements this plan moved relative to the plan it was replanned from.
    uint64_t moved() const { return moved_; }
    uint32_t hash_table_bits() const { return table_bits_; }

    std::string to_json() const;

private:
    friend class PlanBuilder;
    ShardPlan() = default;

    std::shared_ptr<const ShardSet> shards_;
    Topology members_;  // the ready nodes with a chosen role, in the caller's order
    PlanOptions options_;
    std::vector<uint32_t> owners_;  // shard-major, `replication` per shard
    std::vector<uint64_t> loads_;
    std::vector<uint64_t> by_member_offsets_;  // CSR index: member -> shards
    std::vector<uint64_t> by_member_;
    uint64_t moved_ = 0;
    uint32_t table_bits_ = 0;  // hash strategy's slot table, kept by replans
};

}  // namespace cohort
