// The locality strategy: each replica goes to the member with the best
//   locality_weight * (share of the shard's bytes it holds locally)
// + hardware_weight * (its GPU capacity relative to the best member)
// - load_weight     * (its load relative to the cap),
// never past the cap of ceil(placements / members) + 1. Only members named
// in the locality map for a shard's files can score locality, so a choice
// looks at those plus the best of the rest, kept in a heap.
#include "sharding/chooser.hpp"

#include <cohort/error.hpp>

#include <algorithm>
#include <queue>
#include <unordered_map>

#include <fmt/format.h>

namespace cohort::detail {

namespace {

class LocalityChooser final : public ReplicaChooser {
public:
    explicit LocalityChooser(const ChooserContext& c)
        : shards_(c.shards), options_(c.options), placement_(c.placement), by_file_(c.shards.dataset().size()),
          locality_(c.placement.size(), 0.0) {
        const Dataset& dataset = c.shards.dataset();
        for (const LocalityEntry& e : c.options.locality) {
            auto file = dataset.find(e.file_path);
            if (!file) {
                throw Error(Errc::invalid_argument,
                            fmt::format("locality entry for node '{}' names file '{}', which is not in the dataset",
                                        e.node_id, e.file_path));
            }
            // Nodes that are not members (they left, or are not ready) are skipped.
            auto member = c.members.find(e.node_id);
            if (!member) continue;
            // A node named twice for one file keeps its best score.
            auto& entries = by_file_[*file];
            auto same = std::find_if(entries.begin(), entries.end(), [&](const auto& x) { return x.first == *member; });
            if (same != entries.end()) same->second = std::max(same->second, e.score);
            else entries.push_back({static_cast<uint32_t>(*member), e.score});
        }
        for (uint32_t m = 0; m < placement_.size(); ++m) push(m);
    }

    uint32_t choose(uint64_t shard, uint32_t /*replica*/, std::span<const uint32_t> taken) override {
        if (last_) push(*last_);  // its load changed when it took the last placement
        const uint64_t bytes = shards_.bytes(shard);
        touched_.clear();
        for (const Segment& seg : shards_.segments(shard)) {
            for (const auto& [m, score] : by_file_[seg.file]) {
                if (locality_[m] == 0.0) touched_.push_back(m);
                locality_[m] += score * static_cast<double>(seg.bytes()) / static_cast<double>(bytes);
            }
        }
        std::optional<uint32_t> best;
        for (Strictness s : kStrictnessLevels) {
            double best_value = 0;
            auto consider = [&](uint32_t m) {
                const double v = value(m) + options_.locality_weight * locality_[m];
                if (!best || v > best_value || (v == best_value && m < *best)) {
                    best = m;
                    best_value = v;
                }
            };
            for (uint32_t m : touched_)
                if (placement_.allows(m, taken, s)) consider(m);
            if (s.within_cap) {
                if (auto m = best_without_locality(taken, s)) consider(*m);
            } else if (!best) {
                // Everyone is full: the heap holds no one, so look at all.
                best = placement_.scan(static_cast<uint32_t>(shard % placement_.size()), taken, s);
            }
            if (best) break;
        }
        for (uint32_t m : touched_) locality_[m] = 0.0;
        if (!best) throw Error(Errc::unsatisfiable, fmt::format("no member can take shard {}", shard));
        last_ = *best;
        return *best;
    }

private:
    struct Entry {
        double value;
        uint32_t member;
        uint64_t load;  // the member's load when pushed; stale once it differs
        bool operator<(const Entry& o) const { return value != o.value ? value < o.value : member > o.member; }
    };

    double value(uint32_t m) const {
        return options_.hardware_weight * placement_.hardware(m) -
               options_.load_weight * static_cast<double>(placement_.load(m)) / static_cast<double>(placement_.cap());
    }
    void push(uint32_t m) {
        if (placement_.load(m) < placement_.cap()) heap_.push({value(m), m, placement_.load(m)});
    }

    // The best member by hardware and load alone that may take the replica.
    std::optional<uint32_t> best_without_locality(std::span<const uint32_t> taken, Strictness s) {
        std::optional<uint32_t> found;
        stash_.clear();
        while (!heap_.empty()) {
            const Entry top = heap_.top();
            heap_.pop();
            if (top.load != placement_.load(top.member) || top.load >= placement_.cap()) continue;  // stale or full
            stash_.push_back(top);
            if (placement_.allows(top.member, taken, s)) {
                found = top.member;
                break;
            }
        }
        for (const Entry& e : stash_) heap_.push(e);
        return found;
    }

    const ShardSet& shards_;
    const PlanOptions& options_;
    Placement& placement_;
    std::vector<std::vector<std::pair<uint32_t, double>>> by_file_;  // file -> (member, score)
    std::vector<double> locality_;                                   // scratch, per member
    std::vector<uint32_t> touched_;
    std::priority_queue<Entry> heap_;
    std::vector<Entry> stash_;
    std::optional<uint32_t> last_;
};

}  // namespace

std::unique_ptr<ReplicaChooser> make_locality_chooser(const ChooserContext& context) {
    return std::make_unique<LocalityChooser>(context);
}

}  // namespace cohort::detail
