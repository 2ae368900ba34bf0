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

Placement::Placement(const Topology& members, uint64_t cap, bool even, uint64_t placements)
    : loads_(members.size(), 0), cap_(cap), cap_quota_(members.size()) {
    if (even && !members.empty()) {
        const uint64_t n = members.size();
        cap_ = placements / n + (placements % n != 0 ? 1 : 0);
        cap_quota_ = placements % n != 0 ? placements % n : n;
    }
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
    hosts_ = static_cast<uint32_t>(hosts.size());
    racks_ = static_cast<uint32_t>(racks.size());
}

bool Placement::evenly_spread(const std::vector<uint32_t>& group, uint32_t groups, uint32_t m,
                              std::span<const uint32_t> taken) {
    uint32_t mine = 0;
    for (uint32_t t : taken) mine += group[t] == group[m] ? 1 : 0;
    if (mine == 0) return true;
    // Some group holds none of the shard yet: m's group must wait its turn.
    if (taken.size() < groups) return false;
    // Every group may hold some (fewer groups than replicas): m's group may
    // take another only if no group holds fewer. Taken is a handful of
    // members, so counting pairwise is cheapest.
    uint32_t present = 0;
    for (std::size_t i = 0; i < taken.size(); ++i) {
        bool first = true;
        uint32_t count = 0;
        for (std::size_t j = 0; j < taken.size(); ++j) {
            if (group[taken[j]] != group[taken[i]]) continue;
            if (j < i) first = false;
            ++count;
        }
        if (!first) continue;
        ++present;
        if (count < mine) return false;
    }
    return present == groups;
}

bool Placement::allows(uint32_t m, std::span<const uint32_t> taken, Strictness strictness) const {
    if (strictness.within_cap && !has_room(m)) return false;
    for (uint32_t t : taken)
        if (t == m) return false;
    if (strictness.spread != Spread::none && !evenly_spread(host_, hosts_, m, taken)) return false;
    if (strictness.spread == Spread::hosts_and_racks && !evenly_spread(rack_, racks_, m, taken)) return false;
    return true;
}

Spread Placement::spread_with(uint32_t m, std::span<const uint32_t> others) const {
    if (!evenly_spread(host_, hosts_, m, others)) return Spread::none;
    if (!evenly_spread(rack_, racks_, m, others)) return Spread::hosts;
    return Spread::hosts_and_racks;
}

std::optional<uint32_t> Placement::scan(uint32_t start, std::span<const uint32_t> taken) const {
    for (Strictness s : kStrictnessLevels)
        if (auto m = scan(start, taken, s)) return m;
    return std::nullopt;
}

std::optional<uint32_t> Placement::scan(uint32_t start, std::span<const uint32_t> taken, Strictness level) const {
    const uint32_t n = size();
    for (uint32_t k = 0; k < n; ++k) {
        const uint32_t m = (start + k) % n;
        if (allows(m, taken, level)) return m;
    }
    return std::nullopt;
}

uint32_t SlotTable::bits_for(std::size_t members) {
    const std::size_t virtual_slots = std::max<std::size_t>(members, 1) * kSlotsPerMember;
    return static_cast<uint32_t>(std::bit_width(virtual_slots - 1)) + 1;
}

SlotTable::SlotTable(const Topology& members, uint64_t seed, uint32_t bits)
    : seed_(seed), bits_(bits), mask_((uint64_t{1} << bits) - 1), begin_(mask_ + 2, 0) {
    const auto n = static_cast<uint32_t>(members.size());
    hashes_.resize(n);
    slot_of_.resize(std::size_t{n} * kSlotsPerMember);
    for (uint32_t m = 0; m < n; ++m) {
        hashes_[m] = hash_string(members[m].id, seed);
        for (uint32_t v = 0; v < kSlotsPerMember; ++v) {
            const uint64_t s = hash_combine(hashes_[m], v) & mask_;
            slot_of_[std::size_t{m} * kSlotsPerMember + v] = s;
            ++begin_[s + 1];
        }
    }
    for (std::size_t s = 1; s < begin_.size(); ++s) begin_[s] += begin_[s - 1];
    members_.resize(slot_of_.size());
    std::vector<uint32_t> fill(begin_.begin(), begin_.end() - 1);
    for (uint32_t m = 0; m < n; ++m)
        for (uint32_t v = 0; v < kSlotsPerMember; ++v) members_[fill[slot_of_[std::size_t{m} * kSlotsPerMember + v]]++] = m;
}

void SlotTable::probe(uint64_t key, uint64_t i, std::vector<uint32_t>& out) const {
    const auto here = slot(key, i);
    const auto first = static_cast<std::ptrdiff_t>(out.size());
    out.insert(out.end(), here.begin(), here.end());
    if (here.size() > 1) {
        // Highest random weight first within a shared slot; a member owning
        // two slots that coincide appears once.
        std::sort(out.begin() + first, out.end(), [&](uint32_t a, uint32_t b) {
            const uint64_t wa = hash_combine(key, hashes_[a]);
            const uint64_t wb = hash_combine(key, hashes_[b]);
            return wa != wb ? wa > wb : hashes_[a] < hashes_[b];
        });
        out.erase(std::unique(out.begin() + first, out.end()), out.end());
    }
}

}  // namespace cohort::detail
