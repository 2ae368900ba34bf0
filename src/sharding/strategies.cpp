// The round-robin, random, hash and custom choosers (locality has its own file).
#include "sharding/chooser.hpp"

#include <cohort/error.hpp>

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace cohort::detail {

namespace {

[[noreturn]] void no_member(uint64_t shard) {
    throw Error(Errc::unsatisfiable, fmt::format("no member can take shard {}", shard));
}

// Where replica k of the i-th shard dealt goes first. Shards go round the
// members in turn; replica k sits k * stride further on, and the stride
// changes every round so that no two members always hold the same shards
// (which would leave nowhere for one's shards to go when the other leaves).
uint32_t deal(uint64_t i, uint32_t k, uint32_t n, uint32_t replication) {
    if (k == 0 || n < 2) return static_cast<uint32_t>(i % n);
    const uint64_t strides = std::max<uint64_t>(1, (n - 1) / std::max<uint32_t>(1, replication - 1));
    const uint64_t stride = 1 + (i / n) % strides;
    return static_cast<uint32_t>((i + k * stride) % n);
}

// Shard i starts at member i (mod n); replica k as dealt, or the next that
// qualifies.
class RoundRobinChooser final : public ReplicaChooser {
public:
    RoundRobinChooser(Placement& placement, uint32_t replication)
        : placement_(placement), replication_(replication) {}
    uint32_t choose(uint64_t shard, uint32_t replica, std::span<const uint32_t> taken) override {
        auto m = placement_.scan(deal(shard, replica, placement_.size(), replication_), taken);
        if (!m) no_member(shard);
        return *m;
    }

private:
    Placement& placement_;
    uint32_t replication_;
};

// Round robin over a seeded shuffle of the shards and of the members: as
// even as round robin, with no pattern tied to file order or member order.
class RandomChooser final : public ReplicaChooser {
public:
    RandomChooser(const ChooserContext& c) : placement_(c.placement), replication_(c.options.replication) {
        Rng rng(mix64(c.options.seed ^ 0x72616e646f6dULL));
        const uint64_t count = c.shards.size();
        std::vector<uint64_t> order(count);
        std::iota(order.begin(), order.end(), uint64_t{0});
        for (uint64_t i = count; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
        position_.resize(count);
        for (uint64_t i = 0; i < count; ++i) position_[order[i]] = i;
        members_.resize(placement_.size());
        std::iota(members_.begin(), members_.end(), uint32_t{0});
        for (uint32_t i = placement_.size(); i > 1; --i) std::swap(members_[i - 1], members_[rng.below(i)]);
    }
    uint32_t choose(uint64_t shard, uint32_t replica, std::span<const uint32_t> taken) override {
        const uint32_t n = placement_.size();
        const uint32_t start = deal(position_[shard], replica, n, replication_);
        for (Strictness s : kStrictnessLevels) {
            for (uint32_t k = 0; k < n; ++k) {
                const uint32_t m = members_[(start + k) % n];
                if (placement_.allows(m, taken, s)) return m;
            }
        }
        no_member(shard);
    }

private:
    Placement& placement_;
    uint32_t replication_;
    std::vector<uint64_t> position_;
    std::vector<uint32_t> members_;
};

class HashChooser final : public ReplicaChooser {
public:
    HashChooser(const ChooserContext& c)
        : placement_(c.placement), table_(c.members, c.options.seed, c.table_bits),
          // Past this many probes a scan (which stops at the first member
          // with room) is cheaper than probing on for the few left.
          max_probes_(32 * ((uint64_t{1} << c.table_bits) / std::max<uint32_t>(1, c.placement.size()) + 1)) {}

    uint32_t choose(uint64_t shard, uint32_t /*replica*/, std::span<const uint32_t> taken) override {
        const uint64_t key = table_.shard_key(shard);
        {
            const Strictness s = kStrict;
            for (uint64_t i = 0; i < max_probes_; ++i) {
                const auto here = table_.slot(key, i);
                if (here.size() == 1) {
                    if (placement_.allows(here[0], taken, s)) return here[0];
                } else if (!here.empty()) {
                    ordered_.clear();
                    table_.probe(key, i, ordered_);
                    for (uint32_t m : ordered_)
                        if (placement_.allows(m, taken, s)) return m;
                }
            }
        }
        // Only when nearly every member is full or the spreading rules rule
        // out the rest: a scan finds the few left, relaxing rules in order.
        auto m = placement_.scan(static_cast<uint32_t>(key % placement_.size()), taken);
        if (!m) no_member(shard);
        return *m;
    }

private:
    Placement& placement_;
    SlotTable table_;
    uint64_t max_probes_;
    std::vector<uint32_t> ordered_;
};

class CustomChooser final : public ReplicaChooser {
public:
    CustomChooser(const ChooserContext& c) : function_(c.options.custom), count_(c.placement.size()) {}
    uint32_t choose(uint64_t shard, uint32_t replica, std::span<const uint32_t> taken) override {
        const uint32_t m = function_(shard, replica, taken, count_);
        if (m >= count_) {
            throw Error(Errc::callback, fmt::format("custom strategy returned member {} for shard {} replica {}, "
                                                    "but there are only {} members",
                                                    m, shard, replica, count_));
        }
        if (std::find(taken.begin(), taken.end(), m) != taken.end()) {
            throw Error(Errc::callback, fmt::format("custom strategy returned member {} for shard {} replica {}, "
                                                    "which already holds a replica of that shard",
                                                    m, shard, replica));
        }
        return m;
    }

private:
    const AssignFunction& function_;
    uint32_t count_;
};

}  // namespace

std::unique_ptr<ReplicaChooser> make_chooser(const ChooserContext& context) {
    switch (context.options.strategy) {
        case Strategy::round_robin:
            return std::make_unique<RoundRobinChooser>(context.placement, context.options.replication);
        case Strategy::random: return std::make_unique<RandomChooser>(context);
        case Strategy::hash: return std::make_unique<HashChooser>(context);
        case Strategy::locality: return make_locality_chooser(context);
        case Strategy::custom: return std::make_unique<CustomChooser>(context);
    }
    throw Error(Errc::invalid_argument, "unknown sharding strategy");
}

}  // namespace cohort::detail
