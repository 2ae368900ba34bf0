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

// How strict a placement is: which spreading rules for the replicas of one
// shard hold, and whether the member must be under the cap. A spreading rule
// lets a member take a replica only if its host (rack) holds no more of the
// shard's replicas than every other host (rack) does: with at least
// `replication` hosts that means distinct hosts, with fewer it spreads the
// replicas as evenly as the hosts allow. Listed strictest first.
enum class Spread { hosts_and_racks, hosts, none };
// The stricter of two spreads.
constexpr Spread stricter(Spread a, Spread b) { return a < b ? a : b; }
struct Strictness {
    Spread spread;
    bool within_cap;
};
inline constexpr Strictness kStrict{Spread::hosts_and_racks, true};
// The order in which rules are given up when no member qualifies: a member
// goes over the cap before replicas share a rack, and shares a rack before
// replicas share a host.
inline constexpr Strictness kStrictnessLevels[] = {
    {Spread::hosts_and_racks, true}, {Spread::hosts_and_racks, false}, {Spread::hosts, true},
    {Spread::hosts, false},          {Spread::none, true},             {Spread::none, false}};

class Placement {
public:
    // Members hold at most `cap` placements. With `even`, the cap is exact:
    // of `placements` over the members, only placements % members of them
    // may reach ceil(average); the rest stop at floor(average).
    Placement(const Topology& members, uint64_t cap, bool even = false,
              uint64_t placements = 0);

    uint32_t size() const { return static_cast<uint32_t>(host_.size()); }
    uint64_t cap() const { return cap_; }
    uint64_t load(uint32_t m) const { return loads_[m]; }
    std::vector<uint64_t>& loads() { return loads_; }
    double hardware(uint32_t m) const { return hardware_[m]; }

    // May member m hold another replica of a shard already held by `taken`?
    bool allows(uint32_t m, std::span<const uint32_t> taken, Strictness strictness) const;
    // The strictest spread member m keeps with the shard's other replicas.
    Spread spread_with(uint32_t m, std::span<const uint32_t> others) const;
    // Whether m is below its cap, counting the even split's quota.
    bool has_room(uint32_t m) const {
        return loads_[m] + 1 < cap_ || (loads_[m] + 1 == cap_ && at_cap_ < cap_quota_);
    }
    // Over the cap, or at it beyond the even split's quota.
    bool over_cap(uint32_t m) const {
        return loads_[m] > cap_ || (loads_[m] == cap_ && at_cap_ > cap_quota_);
    }
    void take(uint32_t m) {
        if (++loads_[m] == cap_) ++at_cap_;
    }
    void release(uint32_t m) {
        if (loads_[m]-- == cap_) --at_cap_;
    }

    // The first qualifying member in index order starting at `start`, at
    // the strictest level possible (or at exactly `level`).
    std::optional<uint32_t> scan(uint32_t start, std::span<const uint32_t> taken) const;
    std::optional<uint32_t> scan(uint32_t start, std::span<const uint32_t> taken, Strictness level) const;

private:
    // m's group (host or rack) holds no more of `taken` than any other group.
    static bool evenly_spread(const std::vector<uint32_t>& group, uint32_t groups, uint32_t m,
                              std::span<const uint32_t> taken);

    std::vector<uint32_t> host_;
    std::vector<uint32_t> rack_;
    std::vector<double> hardware_;  // gpu_count * gpu_memory relative to the best, [0, 1]
    std::vector<uint64_t> loads_;
    uint64_t cap_;
    uint64_t cap_quota_;   // members that may reach cap_
    uint64_t at_cap_ = 0;  // members at cap_ or above
    uint32_t hosts_ = 0;
    uint32_t racks_ = 0;
};

// Rendezvous hashing made cheap. Each member owns kSlotsPerMember slots of
// a table of 2^bits slots, at hashes of its id alone. A shard's preference
// order is the order in which its own pseudo-random probe sequence meets the
// members' slots; members sharing a slot are met in order of a per-shard
// hash of (shard, member), as in textbook rendezvous hashing. So the
// relative order of two members for a shard depends only on the shard and
// those two members: a membership change leaves everyone else's order alone.
// Finding the first choice costs a few probes instead of one hash per member,
// and with several slots each, members are first choices about equally often.
class SlotTable {
public:
    static constexpr uint32_t kSlotsPerMember = 8;

    SlotTable(const Topology& members, uint64_t seed, uint32_t bits);
    // At least two slots per virtual slot, so about half the table is empty.
    static uint32_t bits_for(std::size_t members);

    uint32_t bits() const { return bits_; }
    uint64_t shard_key(uint64_t shard) const { return mix64(seed_ ^ mix64(shard + 1)); }
    // The members at probe `i` of a shard's sequence, unordered (hot path).
    std::span<const uint32_t> slot(uint64_t key, uint64_t i) const {
        const uint64_t s = mix64(key + i * 0x9e3779b97f4a7c15ULL) & mask_;
        return {members_.data() + begin_[s], members_.data() + begin_[s + 1]};
    }
    // The same members appended to `out`, best first for this shard.
    void probe(uint64_t key, uint64_t i, std::vector<uint32_t>& out) const;
    // The slots member m owns.
    std::span<const uint64_t> slots_of(uint32_t m) const {
        return {slot_of_.data() + std::size_t{m} * kSlotsPerMember, kSlotsPerMember};
    }

private:
    uint64_t seed_;
    uint32_t bits_;
    uint64_t mask_;
    std::vector<uint32_t> begin_;    // CSR offsets per slot
    std::vector<uint32_t> members_;  // member indices grouped by slot
    std::vector<uint64_t> slot_of_;  // kSlotsPerMember per member
    std::vector<uint64_t> hashes_;   // per member, for ordering within a slot
};

}  // namespace cohort::detail
