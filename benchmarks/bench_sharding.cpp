// Question: how fast does cohort plan and replan 1,000,000 shards over 10,000
// nodes, how even are the loads, and how much moves when one node leaves?
// Anchors, in the same run: textbook rendezvous hashing (score every node for
// every shard) and a consistent-hash ring with 100 virtual nodes per node.
//
//   build/benchmarks/bench_sharding --benchmark_counters_tabular=true
//
// Counters: max_load / min_load (placements per node), moved (placements
// that changed owner in a replan), moved_x_n = moved / shards * nodes (1.0 is
// the ideal: only the departed node's share moves).
#include <cohort/cohort.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr uint64_t kShards = 1'000'000;
constexpr uint32_t kNodes = 10'000;
constexpr uint32_t kNodesPerHost = 8;
constexpr uint32_t kHostsPerRack = 25;
constexpr uint32_t kFiles = 1'000;

uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

cohort::Topology make_cluster(uint32_t nodes, uint32_t skip = UINT32_MAX) {
    cohort::Topology topology;
    for (uint32_t i = 0; i < nodes; ++i) {
        if (i == skip) continue;
        cohort::Node node;
        node.id = "node-" + std::to_string(i);
        node.host = "host-" + std::to_string(i / kNodesPerHost);
        node.set_label(cohort::Level::rack, "rack-" + std::to_string(i / kNodesPerHost / kHostsPerRack));
        node.set_label(cohort::Level::zone, "zone-" + std::to_string(i % 3));
        node.gpu_count = 8;
        node.gpu_memory_bytes = (i % 4 == 0 ? 80ULL : 40ULL) << 30;
        topology.add(std::move(node));
    }
    return topology;
}

struct Fixture {
    cohort::Dataset dataset;
    cohort::ShardSet shards;
    cohort::Topology cluster = make_cluster(kNodes);
    cohort::Topology without_one = make_cluster(kNodes, kNodes / 2);
    std::vector<cohort::LocalityEntry> locality;

    static cohort::Dataset make_dataset() {
        cohort::Dataset d;
        for (uint32_t f = 0; f < kFiles; ++f) d.add({"data/part-" + std::to_string(f), 1ULL << 30, 1ULL << 20});
        return d;
    }
    Fixture() : dataset(make_dataset()), shards(cohort::ShardSet::split(dataset, {0, kShards})) {
        // Each file is on the local disk of three nodes.
        for (uint32_t f = 0; f < kFiles; ++f) {
            for (uint32_t k = 0; k < 3; ++k)
                locality.push_back({"node-" + std::to_string(mix(f * 3 + k) % kNodes), "data/part-" + std::to_string(f), 1.0});
        }
    }
};

Fixture& fixture() {
    static Fixture f;
    return f;
}

cohort::PlanOptions options_for(cohort::Strategy strategy) {
    cohort::PlanOptions o;
    o.strategy = strategy;
    o.seed = 7;
    if (strategy == cohort::Strategy::locality) o.locality = fixture().locality;
    if (strategy == cohort::Strategy::custom) {
        o.custom = [](uint64_t shard, uint32_t, std::span<const uint32_t>, uint32_t n) {
            return static_cast<uint32_t>(mix(shard) % n);
        };
    }
    return o;
}

void report_loads(benchmark::State& state, std::span<const uint64_t> loads) {
    const auto [lo, hi] = std::minmax_element(loads.begin(), loads.end());
    state.counters["max_load"] = static_cast<double>(*hi);
    state.counters["min_load"] = static_cast<double>(*lo);
    state.counters["avg_load"] = static_cast<double>(kShards) / static_cast<double>(loads.size());
}

// Times ShardPlan::create and reports the loads of the last plan.
cohort::ShardPlan time_plan(benchmark::State& state, const cohort::PlanOptions& options) {
    Fixture& f = fixture();
    std::optional<cohort::ShardPlan> plan;
    for (auto _ : state) {
        plan.reset();
        plan.emplace(cohort::ShardPlan::create(f.shards, f.cluster, options));
        benchmark::DoNotOptimize(plan->owner(0));
    }
    report_loads(state, plan->loads());
    return std::move(*plan);
}

void BM_Plan(benchmark::State& state) {
    const auto strategy = static_cast<cohort::Strategy>(state.range(0));
    state.SetLabel(std::string(cohort::to_string(strategy)));
    time_plan(state, options_for(strategy));
}

void BM_Replan(benchmark::State& state) {
    const auto strategy = static_cast<cohort::Strategy>(state.range(0));
    state.SetLabel(std::string(cohort::to_string(strategy)) + ", one node leaves");
    Fixture& f = fixture();
    const auto plan = cohort::ShardPlan::create(f.shards, f.cluster, options_for(strategy));
    std::optional<cohort::ShardPlan> next;
    for (auto _ : state) {
        next.reset();
        next.emplace(plan.replan(f.without_one));
        benchmark::DoNotOptimize(next->owner(0));
    }
    state.counters["moved"] = static_cast<double>(next->moved());
    state.counters["moved_x_n"] = static_cast<double>(next->moved()) / kShards * kNodes;
    report_loads(state, next->loads());
}

// The hash strategy with 3% slack: more shards sit at their first choice,
// loads spread wider (the default, slack 0, makes them exactly even).
void BM_PlanHashSlack(benchmark::State& state) {
    state.SetLabel("hash, load_slack 0.03");
    cohort::PlanOptions options = options_for(cohort::Strategy::hash);
    options.load_slack = 0.03;
    const cohort::ShardPlan plan = time_plan(state, options);
    const auto next = plan.replan(fixture().without_one);
    state.counters["moved_x_n"] = static_cast<double>(next.moved()) / kShards * kNodes;
}

// Anchor: rendezvous hashing as usually written, one hash per (shard, node).
void BM_Anchor_TextbookRendezvous(benchmark::State& state) {
    state.SetLabel("anchor: score every node per shard");
    std::vector<uint64_t> node_hash(kNodes);
    for (uint32_t i = 0; i < kNodes; ++i) node_hash[i] = mix(0x1234 + i);
    std::vector<uint64_t> loads(kNodes);
    for (auto _ : state) {
        std::fill(loads.begin(), loads.end(), 0);
        for (uint64_t s = 0; s < kShards; ++s) {
            const uint64_t key = mix(s + 1);
            uint32_t best = 0;
            uint64_t best_score = 0;
            for (uint32_t n = 0; n < kNodes; ++n) {
                const uint64_t score = mix(key ^ node_hash[n]);
                if (score > best_score) {
                    best_score = score;
                    best = n;
                }
            }
            ++loads[best];
        }
    }
    // One departure moves exactly the departed node's shards.
    state.counters["moved_x_n"] = static_cast<double>(loads[kNodes / 2]) / kShards * kNodes;
    report_loads(state, loads);
}

// Anchor: a consistent-hash ring with 100 virtual nodes per node.
void BM_Anchor_ConsistentRing(benchmark::State& state) {
    state.SetLabel("anchor: ring, 100 virtual nodes per node");
    constexpr uint32_t kVirtual = 100;
    auto build = [](uint32_t skip) {
        std::vector<std::pair<uint64_t, uint32_t>> ring;
        for (uint32_t n = 0; n < kNodes; ++n)
            if (n != skip)
                for (uint32_t v = 0; v < kVirtual; ++v) ring.emplace_back(mix((uint64_t{n} << 20) + v), n);
        std::sort(ring.begin(), ring.end());
        return ring;
    };
    auto lookup = [](const std::vector<std::pair<uint64_t, uint32_t>>& ring, uint64_t s) {
        auto it = std::lower_bound(ring.begin(), ring.end(), std::make_pair(mix(s + 1), uint32_t{0}));
        return it == ring.end() ? ring.front().second : it->second;
    };
    std::vector<uint64_t> loads(kNodes);
    std::vector<uint32_t> owner(kShards);
    for (auto _ : state) {
        const auto ring = build(UINT32_MAX);
        std::fill(loads.begin(), loads.end(), 0);
        for (uint64_t s = 0; s < kShards; ++s) ++loads[owner[s] = lookup(ring, s)];
    }
    const auto smaller = build(kNodes / 2);
    uint64_t moved = 0;
    for (uint64_t s = 0; s < kShards; ++s) moved += lookup(smaller, s) != owner[s] ? 1 : 0;
    state.counters["moved"] = static_cast<double>(moved);
    state.counters["moved_x_n"] = static_cast<double>(moved) / kShards * kNodes;
    report_loads(state, loads);
}

void strategies(benchmark::internal::Benchmark* b) {
    for (auto s : {cohort::Strategy::hash, cohort::Strategy::round_robin, cohort::Strategy::random,
                   cohort::Strategy::locality, cohort::Strategy::custom})
        b->Arg(static_cast<int64_t>(s));
}

BENCHMARK(BM_Plan)->Apply(strategies)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_PlanHashSlack)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_Replan)->Apply(strategies)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_Anchor_ConsistentRing)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_Anchor_TextbookRendezvous)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
