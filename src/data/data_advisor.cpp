// DataAdvisor: the baseline (the design's fixed heuristics), then per node
// the measured prefetch depth (prefetch_depth.cpp), the replica each shard
// is read from, its priority, and what of it to cache within the budgets.
#include "data/prefetch_depth.hpp"

#include "data/file_glob.hpp"

#include <cohort/data_advisor.hpp>
#include <cohort/error.hpp>
#include <cohort/units.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include <fmt/format.h>

namespace cohort {

std::string_view to_string(CollectiveStyle style) noexcept {
    return style == CollectiveStyle::parameter_server ? "parameter_server" : "allreduce";
}

std::string_view to_string(CacheStrategy strategy) noexcept {
    switch (strategy) {
        case CacheStrategy::memory:
            return "memory";
        case CacheStrategy::local_disk:
            return "local_disk";
        case CacheStrategy::none:
            break;
    }
    return "none";
}

std::optional<CollectiveStyle> parse_collective_style(std::string_view text) noexcept {
    if (text == "allreduce" || text == "all_reduce" || text == "all-reduce") return CollectiveStyle::allreduce;
    if (text == "parameter_server" || text == "parameter-server" || text == "ps")
        return CollectiveStyle::parameter_server;
    return std::nullopt;
}

DataBaseline data_advice_baseline(const DataAdvisorOptions& options) {
    DataBaseline b;
    b.locality_threshold = options.locality_threshold;
    if (options.style == CollectiveStyle::parameter_server) {
        b.prefetch_batches = 4;
        b.prefetch_reason =
            "baseline for parameter_server: 4 batches (workers run at their own pace, so reads "
            "see more jitter)";
    } else {
        b.prefetch_batches = 2;
        b.prefetch_reason =
            "baseline for allreduce: 2 batches (synchronous steps: the next batch is read while "
            "this one trains)";
    }
    if (options.epochs > 1) {
        b.cache = true;
        b.cache_reason = fmt::format("epochs {} > 1: every epoch after the first reads the cache", options.epochs);
    } else if (options.access == AccessPattern::random) {
        b.cache = true;
        b.cache_reason = "random access: records are read again out of order";
    } else {
        b.cache_reason = "1 epoch of sequential access: each byte is read once, so a cache would not be read again";
    }
    return b;
}

namespace {

[[noreturn]] void bad(std::string_view field, std::string_view what) {
    throw Error(Errc::invalid_argument, fmt::format("data advisor: {}: {}", field, what));
}

void check_fraction(const std::optional<double>& v, const std::string& where, const char* name) {
    if (v && !(*v >= 0.0 && *v <= 1.0)) bad(where + name, fmt::format("must be in [0, 1], got {}", *v));
}

void check_measurement(const DataMeasurement& m, const std::string& where) {
    check_fraction(m.data_wait_fraction, where, "data_wait_fraction");
    check_fraction(m.prefetch_hit_rate, where, "prefetch_hit_rate");
    if (m.read_bytes_per_second && !(*m.read_bytes_per_second >= 0 && std::isfinite(*m.read_bytes_per_second)))
        bad(where + "read_bytes_per_second",
            fmt::format("must be a finite number >= 0, got {}", *m.read_bytes_per_second));
    if (m.step_time && !(*m.step_time > 0 && std::isfinite(*m.step_time)))
        bad(where + "step_time", fmt::format("must be a finite number of seconds > 0, got {}", *m.step_time));
    if (m.samples_per_second && !(*m.samples_per_second >= 0 && std::isfinite(*m.samples_per_second)))
        bad(where + "samples_per_second", fmt::format("must be a finite number >= 0, got {}", *m.samples_per_second));
    if (m.prefetch_depth && !(*m.prefetch_depth >= 1 && *m.prefetch_depth <= detail::kMaxPrefetchBatches))
        bad(where + "prefetch_depth", fmt::format("must be in 1..{} batches (the read-ahead in use), got {}",
                                                  detail::kMaxPrefetchBatches, *m.prefetch_depth));
}

// A member's locality for each shard's bytes: the plan's locality map,
// best score per (member, file), as the locality strategy reads it.
class ShardLocality {
public:
    explicit ShardLocality(const ShardPlan& plan) : plan_(plan), by_file_(plan.shards().dataset().size()) {
        const Dataset& dataset = plan.shards().dataset();
        for (const LocalityEntry& e : plan.options().locality) {
            auto file = dataset.find(e.file_path);
            auto member = plan.members().find(e.node_id);
            if (!file || !member) continue;  // another dataset's file, or not a member
            auto& entries = by_file_[*file];
            auto same = std::find_if(entries.begin(), entries.end(), [&](const auto& x) { return x.first == *member; });
            if (same != entries.end())
                same->second = std::max(same->second, e.score);
            else
                entries.push_back({static_cast<uint32_t>(*member), e.score});
        }
    }

    double score(uint64_t shard, uint32_t member) const {
        const double bytes = static_cast<double>(plan_.shards().bytes(shard));
        double sum = 0;
        for (const Segment& seg : plan_.shards().segments(shard)) {
            for (const auto& [m, s] : by_file_[seg.file])
                if (m == member) sum += s * static_cast<double>(seg.bytes()) / bytes;
        }
        return std::min(sum, 1.0);
    }

private:
    const ShardPlan& plan_;
    std::vector<std::vector<std::pair<uint32_t, double>>> by_file_;
};

std::vector<bool> select_files(const Dataset& dataset, const std::vector<std::string>& patterns,
                               std::vector<std::string>& names) {
    std::vector<bool> selected(dataset.size(), patterns.empty());
    for (const std::string& pattern : patterns) {
        bool any = false;
        for (std::size_t f = 0; f < dataset.size(); ++f) {
            if (detail::glob_match(pattern, dataset.files()[f].path)) {
                selected[f] = true;
                any = true;
            }
        }
        if (!any) {
            const std::string example = dataset.size() == 0 ? "" : fmt::format(", e.g. '{}'", dataset.files()[0].path);
            throw Error(Errc::not_found, fmt::format("data advisor: file pattern '{}' matches none of the dataset's "
                                                     "{} files{}; patterns match the dataset's paths as listed",
                                                     pattern, dataset.size(), example));
        }
    }
    for (std::size_t f = 0; f < dataset.size(); ++f)
        if (selected[f]) names.push_back(dataset.files()[f].path);
    return selected;
}

std::string score_text(double score) {
    return fmt::format("{:.2f}", score);
}

}  // namespace

DataAdvisor::DataAdvisor(DataAdvisorOptions options) : options_(std::move(options)) {
    if (options_.batch_size == 0) bad("batch_size", "must be at least 1 (samples per batch on one node)");
    if (options_.memory_budget_bytes == 0)
        bad("memory_budget_bytes", "must be at least 1: give the memory per node for prefetch and cache, e.g. 8GiB");
    if (options_.disk_budget_bytes && *options_.disk_budget_bytes == 0)
        bad("disk_budget_bytes", "must be at least 1, or absent for no limit");
    if (options_.epochs == 0) bad("epochs", "must be at least 1");
    if (!(options_.locality_threshold > 0.0 && options_.locality_threshold <= 1.0))
        bad("locality_threshold", fmt::format("must be in (0, 1], got {}", options_.locality_threshold));
    if (!(options_.prefetch_factor_floor > 0.0 && options_.prefetch_factor_floor <= 1.0))
        bad("prefetch_factor_floor",
            fmt::format("must be in (0, 1] (the smallest reduce_prefetch factor that will apply; 1 for none), got {}",
                        options_.prefetch_factor_floor));
    if (options_.sample_bytes != 0 && options_.batch_size > (uint64_t{1} << 62) / options_.sample_bytes)
        bad("batch_size", fmt::format("{} samples of {} bytes is past 2^62 bytes per batch", options_.batch_size,
                                      options_.sample_bytes));
    for (const std::string& pattern : options_.patterns) detail::check_glob(pattern);
    check_measurement(options_.measurements.job, "measurements.job.");
    for (const auto& [node, m] : options_.measurements.nodes) {
        if (node.empty()) bad("measurements.nodes", "a node id must not be empty");
        check_measurement(m, fmt::format("measurements.nodes.{}.", node));
    }
}

DataAdvice DataAdvisor::advise(const ShardPlan& plan) const {
    const Dataset& dataset = plan.shards().dataset();
    const ShardSet& shard_set = plan.shards();
    for (const auto& [node, m] : options_.measurements.nodes) {
        if (!plan.members().find(node)) {
            throw Error(Errc::not_found, fmt::format("data advisor: measurements for node '{}': it is not a member "
                                                     "of the plan ({} members)",
                                                     node, plan.member_count()));
        }
    }
    DataAdvice advice;
    advice.style = options_.style;
    advice.batch_size = options_.batch_size;
    advice.baseline = data_advice_baseline(options_);
    const std::vector<bool> selected = select_files(dataset, options_.patterns, advice.files);

    // Bytes per sample: given, or the selected files' bytes over their records.
    if (options_.sample_bytes != 0) {
        advice.sample_bytes = options_.sample_bytes;
        advice.sample_bytes_reason = "given";
    } else {
        uint64_t bytes = 0, records = 0;
        for (std::size_t f = 0; f < dataset.size(); ++f) {
            if (!selected[f] || dataset.files()[f].bytes == 0) continue;
            const DataFile& file = dataset.files()[f];
            if (!file.records) {
                bad("sample_bytes", fmt::format("not given, and '{}' has no record count to estimate it from; give "
                                                "sample_bytes (bytes per sample)",
                                                file.path));
            }
            bytes += file.bytes;
            records += *file.records;
        }
        if (records == 0) bad("sample_bytes", "not given, and the selected files hold no records; give sample_bytes");
        advice.sample_bytes = (bytes + records - 1) / records;
        advice.sample_bytes_reason =
            fmt::format("estimated: {} over {} records of the selected files", format_size(bytes), records);
        if (options_.batch_size > (uint64_t{1} << 62) / advice.sample_bytes)
            bad("batch_size", fmt::format("{} samples of {} bytes is past 2^62 bytes per batch", options_.batch_size,
                                          advice.sample_bytes));
    }
    advice.batch_bytes = options_.batch_size * advice.sample_bytes;

    // The selected shards, each with its preferred replica.
    const ShardLocality locality(plan);
    const uint32_t members = plan.member_count();
    struct Pick {
        uint64_t shard;
        uint32_t member;
        double score;
    };
    std::vector<Pick> picks;
    for (uint64_t s = 0; s < shard_set.size(); ++s) {
        bool in = false;
        for (const Segment& seg : shard_set.segments(s)) in = in || selected[seg.file];
        if (!in) continue;
        const auto owners = plan.owners(s);
        uint32_t best = owners[0];
        double best_score = locality.score(s, best);
        for (uint32_t r = 1; r < owners.size(); ++r) {
            const double score = locality.score(s, owners[r]);
            if (score > best_score || (score == best_score && plan.load(owners[r]) < plan.load(best))) {
                best = owners[r];
                best_score = score;
            }
        }
        picks.push_back({s, best, best_score});
        advice.bytes += shard_set.bytes(s);
    }

    // Per node: what it reads, its locality, its depth.
    std::vector<uint64_t> node_bytes(members, 0), node_shards(members, 0);
    std::vector<double> local_bytes(members, 0.0);
    for (const Pick& p : picks) {
        node_bytes[p.member] += shard_set.bytes(p.shard);
        ++node_shards[p.member];
        local_bytes[p.member] += p.score * static_cast<double>(shard_set.bytes(p.shard));
    }
    const bool cache = advice.baseline.cache;
    advice.cache = cache;
    advice.cache_reason = advice.baseline.cache_reason;

    const uint64_t budget = options_.memory_budget_bytes;
    const auto& job_m = options_.measurements.job;
    {
        const uint64_t mean_bytes = members == 0 ? 0 : advice.bytes / members;
        const detail::PrefetchChoice job = detail::choose_prefetch_depth(
            {advice.baseline.prefetch_batches, advice.batch_bytes, advice.sample_bytes, budget, cache ? mean_bytes : 0,
             job_m.empty() ? nullptr : &job_m, "the job", options_.prefetch_factor_floor});
        advice.prefetch_batches = job.batches;
        advice.prefetch_bytes = uint64_t{job.batches} * advice.batch_bytes;
        advice.measured = job.measured;
        advice.prefetch_reason = job.reason;
    }
    advice.nodes.resize(members);
    for (uint32_t m = 0; m < members; ++m) {
        NodeDataAdvice& n = advice.nodes[m];
        n.node = plan.members()[m].id;
        auto own = options_.measurements.nodes.find(n.node);
        const DataMeasurement* measured = own != options_.measurements.nodes.end() ? &own->second
                                          : job_m.empty()                          ? nullptr
                                                                                   : &job_m;
        const std::string whose =
            own != options_.measurements.nodes.end() ? n.node : fmt::format("{} (the job's)", n.node);
        const detail::PrefetchChoice c =
            detail::choose_prefetch_depth({advice.baseline.prefetch_batches, advice.batch_bytes, advice.sample_bytes,
                                           budget, cache ? node_bytes[m] : 0, measured, measured ? whose : n.node,
                                           options_.prefetch_factor_floor});
        n.prefetch_batches = c.batches;
        n.prefetch_bytes = uint64_t{c.batches} * advice.batch_bytes;
        n.measured = c.measured;
        n.prefetch_reason = c.reason;
        n.shards = node_shards[m];
        n.bytes = node_bytes[m];
        n.locality = node_bytes[m] == 0 ? 0.0 : std::min(1.0, local_bytes[m] / static_cast<double>(node_bytes[m]));
        n.high_locality = node_shards[m] > 0 && n.locality >= options_.locality_threshold;
        if (n.high_locality) advice.high_locality_nodes.push_back(n.node);
    }
    advice.locality_reason =
        fmt::format("{} of {} nodes read at least {} of their selected bytes locally (the plan's locality map{})",
                    advice.high_locality_nodes.size(), members, score_text(options_.locality_threshold),
                    plan.options().locality.empty() ? ", which is empty" : "");

    // Priority: reads from remote storage first, since they need the most lead time.
    advice.shards.reserve(picks.size());
    for (const Pick& p : picks) {
        ShardDataAdvice a;
        a.shard = p.shard;
        a.bytes = shard_set.bytes(p.shard);
        a.preferred_node = plan.members()[p.member].id;
        a.locality = p.score;
        const auto owners = plan.owners(p.shard);
        if (owners.size() == 1) {
            a.node_reason = fmt::format("the only replica; locality {}", score_text(p.score));
        } else {
            std::string others;
            for (uint32_t o : owners) {
                if (o == p.member) continue;
                others += fmt::format("{}{} {} (load {})", others.empty() ? "" : ", ", plan.members()[o].id,
                                      score_text(locality.score(p.shard, o)), plan.load(o));
            }
            a.node_reason = fmt::format("best locality of {} replicas: {} (load {}) over {}; ties go to the lower load",
                                        owners.size(), score_text(p.score), plan.load(p.member), others);
        }
        const NodeDataAdvice& n = advice.nodes[p.member];
        const uint64_t shard_batches = (a.bytes + advice.batch_bytes - 1) / advice.batch_bytes;
        a.prefetch_batches = static_cast<uint32_t>(std::min<uint64_t>(n.prefetch_batches, shard_batches));
        a.prefetch_bytes = std::min<uint64_t>(a.bytes, n.prefetch_bytes);
        a.prefetch_reason = a.prefetch_batches < n.prefetch_batches
                                ? fmt::format("{}'s depth {} capped by the shard's {} batches ({})", n.node,
                                              n.prefetch_batches, shard_batches, format_size(a.bytes))
                                : fmt::format("{}'s depth: {} batches of {}", n.node, n.prefetch_batches,
                                              format_size(advice.batch_bytes));
        a.priority = std::llround(100.0 * (1.0 - p.score));
        a.priority_reason = p.score >= 1.0 ? fmt::format("locality {} on {}: a local read needs no lead time",
                                                         score_text(p.score), n.node)
                                           : fmt::format(
                                                 "locality {} on {}: {:.0f}% of it comes from remote storage, "
                                                 "so it is read ahead of local shards",
                                                 score_text(p.score), n.node, 100.0 * (1.0 - p.score));
        advice.shards.push_back(std::move(a));
    }

    // Cache, per node, in priority order (the remote bytes are the dearest to
    // read again): memory while it fits beside the prefetch, then local disk.
    std::vector<std::size_t> order(advice.shards.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
        return advice.shards[x].priority > advice.shards[y].priority;
    });
    for (std::size_t i : order) {
        ShardDataAdvice& a = advice.shards[i];
        NodeDataAdvice& n = advice.nodes[*plan.members().find(a.preferred_node)];
        if (!cache) {
            a.cache = CacheStrategy::none;
            a.cache_reason = advice.cache_reason;
            continue;
        }
        const uint64_t room = budget > n.prefetch_bytes ? budget - n.prefetch_bytes : 0;
        if (n.cache_memory_bytes + a.bytes <= room) {
            a.cache = CacheStrategy::memory;
            n.cache_memory_bytes += a.bytes;
            a.cache_reason = fmt::format(
                "fits {}'s memory: {} of its {} budget still free after {} of prefetch "
                "and the cache so far",
                n.node, format_size(room - n.cache_memory_bytes + a.bytes), format_size(budget),
                format_size(n.prefetch_bytes));
        } else if (a.locality >= 1.0) {
            a.cache = CacheStrategy::none;
            a.cache_reason =
                fmt::format("does not fit {}'s memory, and is already on its local disk (locality 1.00)", n.node);
        } else if (!options_.disk_budget_bytes || n.cache_disk_bytes + a.bytes <= *options_.disk_budget_bytes) {
            a.cache = CacheStrategy::local_disk;
            n.cache_disk_bytes += a.bytes;
            a.cache_reason = fmt::format(
                "does not fit {}'s memory ({} left), and {:.0f}% of it is not on its disk: "
                "cached on local disk",
                n.node, format_size(room - n.cache_memory_bytes), 100.0 * (1.0 - a.locality));
        } else {
            a.cache = CacheStrategy::none;
            a.cache_reason = fmt::format("fits neither {}'s memory nor its disk budget of {}", n.node,
                                         format_size(*options_.disk_budget_bytes));
        }
    }
    for (NodeDataAdvice& n : advice.nodes) {
        if (!cache)
            n.cache_reason = advice.cache_reason;
        else if (n.shards == 0)
            n.cache_reason = "reads none of the selected shards";
        else
            n.cache_reason = fmt::format(
                "{} in memory and {} on local disk of the {} it reads (memory budget {}, "
                "prefetch {})",
                format_size(n.cache_memory_bytes), format_size(n.cache_disk_bytes), format_size(n.bytes),
                format_size(budget), format_size(n.prefetch_bytes));
    }
    return advice;
}

}  // namespace cohort
