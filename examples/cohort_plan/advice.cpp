// cohort-plan --advise: the DataAdvisor's advice as tables, with reasons.
#include "report.hpp"

#include <fmt/format.h>

namespace cohort_plan {

void print_advice(const cohort::DataAdvice& advice, uint64_t limit) {
    fmt::print("data advice: {} files, {} selected, style {}, batch {} x {} = {}\n", advice.files.size(),
               cohort::format_size(advice.bytes), cohort::to_string(advice.style), advice.batch_size,
               cohort::format_size(advice.sample_bytes), cohort::format_size(advice.batch_bytes));
    fmt::print("  sample size: {}\n", advice.sample_bytes_reason);
    fmt::print("  baseline:    {} batches; cache {}\n", advice.baseline.prefetch_batches,
               advice.baseline.cache ? "yes" : "no");
    fmt::print("  prefetch:    {} batches ({}): {}\n", advice.prefetch_batches,
               cohort::format_size(advice.prefetch_bytes), advice.prefetch_reason);
    fmt::print("  cache:       {}: {}\n", advice.cache ? "yes" : "no", advice.cache_reason);
    std::string high;
    for (const std::string& n : advice.high_locality_nodes) high += (high.empty() ? "" : ", ") + n;
    fmt::print("  locality:    {}: {}\n", high.empty() ? "no node" : high, advice.locality_reason);

    fmt::print("\n{:<14} {:>8} {:>10} {:>8} {:>6} {:>10} {:>10} {:>10}  {}\n", "node", "prefetch", "bytes", "locality",
               "shards", "reads", "cache mem", "cache disk", "why this prefetch");
    for (const cohort::NodeDataAdvice& n : advice.nodes) {
        fmt::print("{:<14} {:>8} {:>10} {:>7.2f}{} {:>6} {:>10} {:>10} {:>10}  {}\n", n.node, n.prefetch_batches,
                   cohort::format_size(n.prefetch_bytes), n.locality, n.high_locality ? "*" : " ", n.shards,
                   cohort::format_size(n.bytes), cohort::format_size(n.cache_memory_bytes),
                   cohort::format_size(n.cache_disk_bytes), n.prefetch_reason);
    }
    fmt::print("(* high locality)\n");

    // Without a cache every shard's cache reason is the job's, printed above.
    const uint64_t rows = limit == 0 ? advice.shards.size() : std::min<uint64_t>(limit, advice.shards.size());
    fmt::print("\n{:>6} {:>10} {:<14} {:>8} {:>8} {:<10} {:>8}  {}\n", "shard", "bytes", "read from", "locality",
               "prefetch", "cache", "priority", "why");
    for (uint64_t i = 0; i < rows; ++i) {
        const cohort::ShardDataAdvice& s = advice.shards[i];
        fmt::print("{:>6} {:>10} {:<14} {:>8.2f} {:>8} {:<10} {:>8}  {}; {}\n", s.shard, cohort::format_size(s.bytes),
                   s.preferred_node, s.locality, s.prefetch_batches, cohort::to_string(s.cache), s.priority,
                   s.node_reason, advice.cache ? s.cache_reason : s.priority_reason);
    }
    if (rows < advice.shards.size()) fmt::print("... {} more (--limit 0 prints all)\n", advice.shards.size() - rows);
}

}  // namespace cohort_plan
