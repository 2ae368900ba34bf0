#include "report.hpp"

#include <algorithm>

#include <boost/json.hpp>
#include <fmt/format.h>

namespace cohort_plan {

namespace {

constexpr cohort::Level kLevels[] = {cohort::Level::host, cohort::Level::network_switch, cohort::Level::rack,
                                     cohort::Level::zone, cohort::Level::region};

const char* or_dash(const std::string& text) { return text.empty() ? "-" : text.c_str(); }

void print_rank_order(const cohort::RankOrder& order) {
    const cohort::Topology& topology = order.topology();
    fmt::print("rank order ({} ranks on {} hosts)\n", order.world_size(), order.host_count());
    fmt::print("{:>5}  {:<14} {:<12} {:<9} {:>10} {:>5} {:>9}  {:<8} {:<8} {:<10} {:<8}\n", "rank", "node", "host",
               "role", "local_rank", "local", "node_rank", "switch", "rack", "zone", "region");
    for (uint32_t r = 0; r < order.world_size(); ++r) {
        const cohort::RankInfo& info = order[r];
        const cohort::Node& node = topology[info.node_index];
        fmt::print("{:>5}  {:<14} {:<12} {:<9} {:>10} {:>5} {:>9}  {:<8} {:<8} {:<10} {:<8}\n", r, node.id,
                   node.host_name(), cohort::to_string(node.role), info.local_rank, info.local_world_size,
                   info.node_rank, or_dash(node.label(cohort::Level::network_switch)),
                   or_dash(node.label(cohort::Level::rack)), or_dash(node.label(cohort::Level::zone)),
                   or_dash(node.label(cohort::Level::region)));
    }
    fmt::print("\nring crossings (edges of the ring that leave a group; the minimum is the group count):\n");
    for (cohort::Level level : kLevels)
        fmt::print("  {:<7} {}\n", cohort::to_string(level), cohort::ring_crossings(order, level));
}

void print_loads(const cohort::ShardPlan& plan) {
    fmt::print("{:<14} {:>7} {:>12}\n", "node", "shards", "bytes");
    for (uint32_t m = 0; m < plan.member_count(); ++m) {
        uint64_t bytes = 0;
        for (uint64_t s : plan.member_shards(m)) bytes += plan.shards().bytes(s);
        fmt::print("{:<14} {:>7} {:>12}\n", plan.members()[m].id, plan.load(m), cohort::format_size(bytes));
    }
    const auto loads = plan.loads();
    const auto [lo, hi] = std::minmax_element(loads.begin(), loads.end());
    fmt::print("load: min {} max {} (average {:.2f})\n", *lo, *hi,
               static_cast<double>(plan.shard_count() * plan.replication()) / plan.member_count());
}

void print_shards(const cohort::ShardPlan& plan, uint64_t limit) {
    const cohort::ShardSet& shards = plan.shards();
    const auto files = shards.dataset().files();
    const uint64_t rows = limit == 0 ? plan.shard_count() : std::min(limit, plan.shard_count());
    fmt::print("{:>6} {:>10} {:>8}  {:<40} {}\n", "shard", "bytes", "records", "ranges", "owners");
    for (uint64_t s = 0; s < rows; ++s) {
        std::string ranges;
        for (const cohort::Segment& seg : shards.segments(s)) {
            if (!ranges.empty()) ranges += ' ';
            ranges += fmt::format("{}[{},{})", files[seg.file].path, seg.begin, seg.end);
        }
        std::string owners;
        for (uint32_t m : plan.owners(s)) owners += (owners.empty() ? "" : ",") + plan.members()[m].id;
        const auto records = shards.records(s);
        fmt::print("{:>6} {:>10} {:>8}  {:<40} {}\n", s, cohort::format_size(shards.bytes(s)),
                   records ? fmt::format("{}", *records) : std::string("-"), ranges, owners);
    }
    if (rows < plan.shard_count()) fmt::print("... {} more (--limit 0 prints all)\n", plan.shard_count() - rows);
}

}  // namespace

void print_tables(const Report& report) {
    print_rank_order(report.order);
    const cohort::ShardPlan& plan = report.plan;
    fmt::print("\nshard plan: {} shards of {} over {} nodes, strategy {}, replication {}\n", plan.shard_count(),
               cohort::format_size(plan.shards().dataset().total_bytes()), plan.member_count(),
               cohort::to_string(plan.options().strategy), plan.replication());
    print_shards(plan, report.limit);
    fmt::print("\n");
    print_loads(plan);
    if (report.replanned != nullptr) {
        std::string removed;
        for (const std::string& id : report.removed) removed += (removed.empty() ? "" : ", ") + id;
        const uint64_t placements = plan.shard_count() * plan.replication();
        fmt::print("\nreplan without {}: {} of {} placements moved ({:.2f}%)\n", removed, report.replanned->moved(),
                   placements, 100.0 * static_cast<double>(report.replanned->moved()) / static_cast<double>(placements));
        print_loads(*report.replanned);
    }
    if (report.advice != nullptr) {
        fmt::print("\n");
        print_advice(*report.advice, report.limit);
    }
}

void print_json(const Report& report) {
    namespace json = boost::json;
    json::object root;
    json::array ranks;
    const cohort::Topology& topology = report.order.topology();
    for (uint32_t r = 0; r < report.order.world_size(); ++r) {
        const cohort::RankInfo& info = report.order[r];
        const cohort::Node& node = topology[info.node_index];
        ranks.push_back(json::object{{"rank", r},
                                     {"node", node.id},
                                     {"host", node.host_name()},
                                     {"role", std::string(cohort::to_string(node.role))},
                                     {"local_rank", info.local_rank},
                                     {"local_world_size", info.local_world_size},
                                     {"node_rank", info.node_rank}});
    }
    root["world_size"] = report.order.world_size();
    root["rank_order"] = std::move(ranks);
    json::object crossings;
    for (cohort::Level level : kLevels)
        crossings[std::string(cohort::to_string(level))] = cohort::ring_crossings(report.order, level);
    root["ring_crossings"] = std::move(crossings);
    root["plan"] = json::parse(report.plan.to_json());
    if (report.replanned != nullptr) {
        json::array removed;
        for (const std::string& id : report.removed) removed.push_back(json::string(id));
        json::object replan{{"removed", std::move(removed)}, {"moved", report.replanned->moved()}};
        replan["plan"] = json::parse(report.replanned->to_json());
        root["replan"] = std::move(replan);
    }
    if (report.advice != nullptr) root["advice"] = json::parse(report.advice->to_json());
    fmt::print("{}\n", json::serialize(root));
}

}  // namespace cohort_plan
