// DataAdvisor: how a job should read its data, for a shard plan and a set
// of file patterns: the prefetch depth, whether and where to cache, the
// nodes that hold their data locally and, per shard, the replica to read,
// how far ahead, where to cache it and in what order. The design's fixed
// heuristics (data_advice_baseline) are the starting point; measurements
// (data wait, prefetch hit rate, read throughput) move it. Every
// recommendation carries a reason naming the inputs it came from.
// docs/data.md ("DataAdvisor") is the guide.
#pragma once

#include <cohort/export.hpp>

#include <cohort/sharding.hpp>
#include <cohort/workloads.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

// How the job exchanges gradients: all-reduce steps are synchronous (every
// worker needs its batch at the same moment); parameter-server workers run
// at their own pace and see more jitter.
enum class CollectiveStyle : int32_t { allreduce = 0, parameter_server = 1 };
enum class CacheStrategy : int32_t { none = 0, memory = 1, local_disk = 2 };

COHORT_API std::string_view to_string(CollectiveStyle style) noexcept;
COHORT_API std::string_view to_string(CacheStrategy strategy) noexcept;
COHORT_API std::optional<CollectiveStyle> parse_collective_style(std::string_view text) noexcept;

// What was measured on a node, or on the whole job; each figure optional.
struct DataMeasurement {
    std::optional<double> data_wait_fraction{};     // data wait / step time, in [0, 1]
    std::optional<double> prefetch_hit_rate{};      // reads ready when needed, in [0, 1]
    std::optional<double> read_bytes_per_second{};  // storage read throughput, >= 0
    std::optional<double> step_time{};              // seconds, > 0
    std::optional<double> samples_per_second{};     // >= 0
    // The read-ahead in use while this was measured: the batches the loader
    // kept queued, after any reduce_prefetch factor (1 to 64). The measured
    // rules move the depth from it; absent, from the baseline.
    std::optional<uint32_t> prefetch_depth{};

    bool empty() const {
        return !data_wait_fraction && !prefetch_hit_rate && !read_bytes_per_second && !step_time &&
               !samples_per_second && !prefetch_depth;
    }
};

struct DataMeasurements {
    DataMeasurement job{};                           // for nodes not listed
    std::map<std::string, DataMeasurement> nodes{};  // by node id; must be plan members
};

struct DataAdvisorOptions {
    // Globs over the dataset's file paths: `*` and `?` stay within a path
    // component, `**` crosses `/`, `[a-z]` and `[!x]` are classes, `\`
    // escapes. Empty: every file. A pattern that matches no file is an error.
    std::vector<std::string> patterns{};
    CollectiveStyle style = CollectiveStyle::allreduce;
    uint64_t batch_size = 0;  // samples per batch on one node; >= 1
    // Bytes per sample; 0: estimated from the selected files' bytes and
    // record counts (an error when a count is unknown).
    uint64_t sample_bytes = 0;
    uint64_t memory_budget_bytes = 0;  // per node, for prefetch and cache; >= 1
    // Local disk per node for the cache; empty: not limited.
    std::optional<uint64_t> disk_budget_bytes{};
    uint32_t epochs = 1;  // how often the data is read; >= 1
    AccessPattern access = AccessPattern::sequential;
    double locality_threshold = 0.8;  // a node at or above it has high locality; (0, 1]
    // The smallest prefetch factor that will apply to the depth, in (0, 1]:
    // a GPU rule pack's reduce_prefetch (the shipped one's 0.5), when the
    // loader follows TransferScheduler's prefetch_factor. The advised depth
    // is the read-ahead the rules call for divided by it, so that depth x
    // factor still gives that read-ahead. 1: no factor applies.
    double prefetch_factor_floor = 1.0;
    DataMeasurements measurements{};
};

// The design's fixed heuristics, before any measurement.
struct DataBaseline {
    uint32_t prefetch_batches = 0;  // 2 for all-reduce, 4 for parameter server
    bool cache = false;             // epochs > 1 or random access
    double locality_threshold = 0;  // the options' (0.8 unless changed)
    std::string prefetch_reason;
    std::string cache_reason;
};
COHORT_API DataBaseline data_advice_baseline(const DataAdvisorOptions& options);

struct NodeDataAdvice {
    std::string node;               // member id
    uint32_t prefetch_batches = 0;  // depth for this node
    uint64_t prefetch_bytes = 0;    // prefetch_batches x batch bytes
    bool measured = false;          // the depth followed a measurement
    std::string prefetch_reason;
    double locality = 0;  // byte-weighted locality of the shards it reads
    bool high_locality = false;
    uint64_t shards = 0;              // selected shards it is the preferred node for
    uint64_t bytes = 0;               // their bytes
    uint64_t cache_memory_bytes = 0;  // of those, cached in memory
    uint64_t cache_disk_bytes = 0;    // and on local disk
    std::string cache_reason;
};

struct ShardDataAdvice {
    uint64_t shard = 0;
    uint64_t bytes = 0;
    std::string preferred_node;  // the replica to read
    double locality = 0;         // its locality score for this shard, in [0, 1]
    std::string node_reason;
    uint32_t prefetch_batches = 0;  // how far ahead to read within the shard
    uint64_t prefetch_bytes = 0;
    std::string prefetch_reason;
    CacheStrategy cache = CacheStrategy::none;
    std::string cache_reason;
    int64_t priority = 0;  // a TransferScheduler priority: higher first
    std::string priority_reason;
};

struct DataAdvice {
    CollectiveStyle style = CollectiveStyle::allreduce;
    uint64_t batch_size = 0;
    uint64_t sample_bytes = 0;
    std::string sample_bytes_reason;
    uint64_t batch_bytes = 0;
    std::vector<std::string> files;  // the dataset files the patterns selected
    uint64_t bytes = 0;              // the selected shards' bytes
    DataBaseline baseline;
    // The job's depth: from the job's measurement, else the baseline.
    uint32_t prefetch_batches = 0;
    uint64_t prefetch_bytes = 0;
    bool measured = false;
    std::string prefetch_reason;
    bool cache = false;
    std::string cache_reason;
    std::vector<std::string> high_locality_nodes;  // plan member order
    std::string locality_reason;
    std::vector<NodeDataAdvice> nodes;    // every plan member, in member order
    std::vector<ShardDataAdvice> shards;  // the selected shards, ascending

    COHORT_API std::string to_json() const;
};

class COHORT_API DataAdvisor {
public:
    // Throws Error(invalid_argument) naming the field for a bad option or
    // measurement (a batch size of 0, a rate below 0, a hit rate above 1, ...).
    explicit DataAdvisor(DataAdvisorOptions options);

    // Throws Error(not_found) for a pattern matching no file of the plan's
    // dataset, or measurements for a node that is not a member, and
    // Error(invalid_argument) for a malformed pattern or an unknown sample size.
    DataAdvice advise(const ShardPlan& plan) const;

    const DataAdvisorOptions& options() const { return options_; }

private:
    DataAdvisorOptions options_;
};

// The options as a JSON object (the C ABI's and cohort-plan's form, one
// reader for both): "patterns", "style", "batch_size", "sample_bytes",
// "memory_budget_bytes", "disk_budget_bytes", "epochs", "access",
// "locality_threshold", "prefetch_factor_floor", "measurements"
// {"job": M, "nodes": {ID: M}} with M
// as data_measurements_from_json. Error(invalid_argument) "<where>: <field>: ...".
COHORT_API DataAdvisorOptions data_advisor_options_from_json(std::string_view text, std::string_view where);
// {"job": M, "nodes": {ID: M}}, M an object of "data_wait_fraction" (or
// "data_wait" with "step_time", seconds), "prefetch_hit_rate",
// "read_bytes_per_second", "step_time", "samples_per_second", "prefetch_depth".
COHORT_API DataMeasurements data_measurements_from_json(std::string_view text, std::string_view where);

}  // namespace cohort
