// The machinery every strategy shares: who the members are (hosts, racks,
// hardware), how loaded they are, and whether a member may take a replica.
#pragma once

#include <cohort/sharding.hpp>

#include "core/hash.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace cohort::detail {

// How strict a placement is. Strategies try kStrict first and relax only when
// no member qualifies: first the rack rule, then the host rule, then the cap.
enum class Strictness { strict = 0, any_rack = 1, any_host = 2, over_cap = 3 };
inline constexpr Strictness kStrictnessLevels[] = {Strictness::strict, Strictness::any_rack,
                                                    Strictness::any_host, Strictness::over_cap};

class Placement {
public:
    Placement(const Topology& members, uint32_t replication, uint64_t shard_count, uint64_t cap);

    uint32_t size() const { return static_cast<uint32_t>(host_.size()); }
    uint64_t cap() const { return cap_; }
    uint64_t load(uint32_t m) const { return loads_[m]; }
    std::vector<uint64_t>& loads() { return loads_; }
    double hardware(uint32_t m) const { return hardware_[m]; }

    // May member m hold another replica of a shard already held by `taken`?
    bool allows(uint32_t m, std::span<const uint32_t> taken, Strictness strictness) const;
    void take(uint32_t m) { ++loads_[m]; }
    void release(uint32_t m) { --loads_[m]; }

    // The first qualifying member in index order starting at `start`.
    std::optional<uint32_t> scan(uint32_t start, std::span<const uint32_t> taken) const;

private:
    std::vector<uint32_t> host_;
    std::vector<uint32_t> rack_;
    std::vector<double> hardware_;  // gpu_count * gpu_memory relative to the best, [0, 1]
    std::vector<uint64_t> loads_;
    uint64_t cap_;
    bool distinct_hosts_;
    bool distinct_racks_;
};

// Rendezvous hashing made cheap: each member owns one slot of a table of
// 2^bits >= 2 * members slots, at the hash of its id (or the next free slot,
// members placed in hash order), and a shard's preference order is the order
// in which its own pseudo-random probe sequence meets the members' slots.
// A member's rank for a shard thus depends only on the shard and the
// member's slot, so a membership change leaves every other member's relative
// order alone, yet finding the top choice costs about 2^bits / members
// probes instead of one hash per member, and every member is equally likely
// to be a shard's first choice.
class SlotTable {
public:
    static constexpr uint32_t kEmpty = UINT32_MAX;

    SlotTable(const Topology& members, uint64_t seed, uint32_t bits);
    static uint32_t bits_for(std::size_t members);

    uint32_t bits() const { return bits_; }
    uint64_t shard_key(uint64_t shard) const { return mix64(seed_ ^ mix64(shard + 1)); }
    // The member at probe `i` of a shard's sequence, or kEmpty.
    uint32_t probe(uint64_t key, uint64_t i) const {
        return slots_[mix64(key + i * 0x9e3779b97f4a7c15ULL) & mask_];
    }
    // The slot member m owns.
    uint64_t slot_of(uint32_t m) const { return slot_of_[m]; }

private:
    uint64_t seed_;
    uint32_t bits_;
    uint64_t mask_;
    std::vector<uint32_t> slots_;    // member index or kEmpty
    std::vector<uint64_t> slot_of_;  // per member
};

}  // namespace cohort::detail
