#include "sharding/placement.hpp"

#include <cohort/error.hpp>

#include <algorithm>
#include <bit>
#include <map>
#include <string>

namespace cohort::detail {

namespace {

// Dense ids for equal keys, in first-seen order.
template <typename Key>
uint32_t intern(std::map<Key, uint32_t>& ids, Key key) {
    return ids.emplace(std::move(key), static_cast<uint32_t>(ids.size())).first->second;
}

}  // namespace

Placement::Placement(const Topology& members, uint32_t replication, uint64_t /*shard_count*/, uint64_t cap)
    : loads_(members.size(), 0), cap_(cap) {
    std::map<std::string, uint32_t> hosts;
    std::map<std::array<std::string, 4>, uint32_t> racks;
    double best = 0;
    for (const Node& node : members.nodes()) {
        host_.push_back(intern(hosts, node.host_name()));
        // A node without a rack label is treated as a rack of its own host.
        std::array<std::string, 4> rack = {node.label(Level::region), node.label(Level::zone),
                                           node.label(Level::rack), std::string()};
        if (node.label(Level::rack).empty()) rack[3] = node.host_name();
        rack_.push_back(intern(racks, std::move(rack)));
        const double hw = static_cast<double>(node.gpu_count) * static_cast<double>(node.gpu_memory_bytes);
        hardware_.push_back(hw);
        best = std::max(best, hw);
    }
    for (double& hw : hardware_) hw = best > 0 ? hw / best : 0.0;
    distinct_hosts_ = hosts.size() >= replication;
    distinct_racks_ = racks.size() >= replication;
}

bool Placement::allows(uint32_t m, std::span<const uint32_t> taken, Strictness strictness) const {
    if (strictness != Strictness::over_cap && loads_[m] >= cap_) return false;
    for (uint32_t t : taken) {
        if (t == m) return false;
        if (strictness <= Strictness::any_host && distinct_hosts_ && host_[t] == host_[m]) return false;
        if (strictness == Strictness::strict && distinct_racks_ && rack_[t] == rack_[m]) return false;
    }
    return true;
}

std::optional<uint32_t> Placement::scan(uint32_t start, std::span<const uint32_t> taken) const {
    const uint32_t n = size();
    for (Strictness s : kStrictnessLevels) {
        for (uint32_t k = 0; k < n; ++k) {
            const uint32_t m = (start + k) % n;
            if (allows(m, taken, s)) return m;
        }
    }
    return std::nullopt;
}

uint32_t SlotTable::bits_for(std::size_t members) {
    // At least twice as many slots as members: about two probes per choice.
    return std::max<uint32_t>(1, static_cast<uint32_t>(std::bit_width(std::max<std::size_t>(members, 1) - 1)) + 1);
}

SlotTable::SlotTable(const Topology& members, uint64_t seed, uint32_t bits)
    : seed_(seed), bits_(bits), mask_((uint64_t{1} << bits) - 1), slots_(mask_ + 1, kEmpty) {
    const auto n = static_cast<uint32_t>(members.size());
    if (n > mask_ + 1) throw Error(Errc::internal, "hash slot table smaller than the membership");
    std::vector<std::pair<uint64_t, uint32_t>> by_hash(n);
    for (uint32_t m = 0; m < n; ++m) by_hash[m] = {hash_string(members[m].id, seed), m};
    // Placing members in hash order (not input order) keeps the table the
    // same for the same set of ids.
    std::sort(by_hash.begin(), by_hash.end());
    slot_of_.resize(n);
    for (const auto& [hash, m] : by_hash) {
        uint64_t s = hash & mask_;
        while (slots_[s] != kEmpty) s = (s + 1) & mask_;
        slots_[s] = m;
        slot_of_[m] = s;
    }
}

}  // namespace cohort::detail
