// The scenario of bench_data_wait (issue 20): the four workloads, the
// files they read, the simulated GPUs' timeline, the seed design's rule
// pack, and the DataAdvisor's view of one job. bench_data_wait.cpp runs it.
#pragma once

#include <cohort/data_advisor.hpp>
#include <cohort/dataset.hpp>
#include <cohort/rules.hpp>
#include <cohort/sharding.hpp>
#include <cohort/shards.hpp>
#include <cohort/topology.hpp>
#include <cohort/workloads.hpp>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <stdlib.h>
#include <unistd.h>

namespace data_wait {

namespace fs = std::filesystem;
constexpr uint64_t kMiB = 1ull << 20;

// The scenario, in fractions of --seconds (at 240 s: memory above 85 % from
// 60 s, above 90 % from 80 to 160 s, 92 °C from 100 to 140 s).
constexpr double kMem85 = 0.25, kMem90 = 1.0 / 3, kHotOn = 100.0 / 240, kHotOff = 140.0 / 240, kMem90Off = 2.0 / 3,
                 kMemOff = 0.75;
// The background job reloads the model at these fractions (the second
// under memory pressure, where prioritize_model_files fires).
constexpr std::array<double, 2> kModelReads = {0.125, 0.375};

constexpr std::size_t kWorkers = 4;         // I/O threads
constexpr std::size_t kSchedulerDepth = 4;  // prefetch transfers running at once, before reduce_prefetch

struct Job {
    const char* id;
    int priority;
    uint64_t batch;
    double step_seconds;
    cohort::AccessPattern access;
    uint64_t file_bytes;
};
// The three training loops.
constexpr std::array<Job, 3> kJobs = {{
    {"train-hi", 100, 4 * kMiB, 0.050, cohort::AccessPattern::random, 64 * kMiB},
    {"train-mid", 50, 4 * kMiB, 0.100, cohort::AccessPattern::sequential, 64 * kMiB},
    {"train-low", 10, 4 * kMiB, 0.200, cohort::AccessPattern::sequential, 64 * kMiB},
}};
// The background job: a burst of kBurst chunks every kBurstEvery s, waited
// for before the next, and the model file in kModelChunks chunks.
constexpr const char* kBackground = "background";
constexpr uint64_t kChunk = 4 * kMiB, kBackgroundFile = 128 * kMiB;
constexpr std::size_t kBurst = 24;
constexpr double kBurstEvery = 1.0;
constexpr uint64_t kModelChunk = 8 * kMiB;
constexpr std::size_t kModelChunks = 4;

struct Files {
    fs::path dir;
    std::array<fs::path, kJobs.size()> datasets;
    fs::path background, model, gpus, seed_rules;
};

inline void write_file(const fs::path& path, uint64_t bytes, uint64_t seed) {
    std::ofstream out(path, std::ios::binary);
    std::mt19937_64 rng(seed);
    std::vector<uint64_t> block(kMiB / sizeof(uint64_t));
    for (uint64_t done = 0; done < bytes; done += kMiB) {
        for (uint64_t& x : block) x = rng();
        out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(kMiB));
    }
    if (!out) throw std::runtime_error("cannot write " + path.string() + " (is the disk full?)");
}

inline void write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

inline std::string at(double fraction, double seconds) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3fs", fraction * seconds);
    return buf;
}

// Two simulated 80 GiB GPUs; GPU 0 (the high-priority job's) fills up and
// overheats for a known window, then recovers.
inline std::string gpu_timeline(double seconds) {
    const std::string pid = std::to_string(::getpid());
    std::string t = "version: 1\ngpus:\n";
    t += "  - {index: 0, name: Simulated H100 80GB, memory_total: 80GiB, memory_used: 56GiB, utilization: 97,\n"
         "     temperature: 71, processes: [{pid: " +
         pid + ", name: bench_data_wait, memory: 40GiB}]}\n";
    t += "  - {index: 1, name: Simulated H100 80GB, memory_total: 80GiB, memory_used: 40GiB, utilization: 80,\n"
         "     temperature: 64, processes: [{pid: " +
         pid + ", name: bench_data_wait, memory: 30GiB}]}\n";
    t += "timeline:\n";
    t += "  - {at: " + at(kMem85, seconds) + ", gpu: 0, set: {memory_used: 70GiB}}\n";  // 87.5 %
    t += "  - {at: " + at(kMem90, seconds) + ", gpu: 0, set: {memory_used: 76GiB}}\n";  // 95 %
    t += "  - {at: " + at(kHotOn, seconds) + ", gpu: 0, set: {temperature: 92}}\n";
    t += "  - {at: " + at(kHotOff, seconds) + ", gpu: 0, set: {temperature: 74}}\n";
    t += "  - {at: " + at(kMem90Off, seconds) + ", gpu: 0, set: {memory_used: 70GiB}}\n";
    t += "  - {at: " + at(kMemOff, seconds) + ", gpu: 0, set: {memory_used: 56GiB}}\n";
    return t;
}

// The seed design's fixed rules, as a pack the monitor loads.
constexpr const char* kSeedRules = R"(version: 1
variables: {gpu_memory: number, gpu_temperature: number, file_type: string, transfer_size: size, active_training: bool}
rules:
  - id: seed_reduce_prefetch_above_90
    condition: gpu_memory > 90
    actions: [{type: reduce_prefetch, target: data_loader, parameters: {factor: 0.3}}]
    labels: {category: memory}
  - id: seed_reduce_prefetch_above_80
    condition: gpu_memory > 80
    actions: [{type: reduce_prefetch, target: data_loader, parameters: {factor: 0.6}}]
    labels: {category: memory}
  - id: seed_delay_transfer_on_temperature
    condition: gpu_temperature > 87
    actions: [{type: delay_transfer, target: host_to_device, parameters: {delay: 30s}}]
    labels: {category: thermal}
)";

// A fresh folder under `root` (the temporary directory when empty) with
// every file of the scenario.
inline Files make_files(const std::string& root_dir, uint64_t seed, double seconds) {
    const fs::path root = root_dir.empty() ? fs::temp_directory_path() : fs::path(root_dir);
    std::string pattern = (root / "bench-data-wait-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
        throw std::runtime_error("cannot make a folder under " + root.string() + ": " + std::strerror(errno) +
                                 "; give --dir a writable folder");
    Files f;
    f.dir = pattern;
    try {
        for (std::size_t w = 0; w < kJobs.size(); ++w) {
            f.datasets[w] = f.dir / (std::string(kJobs[w].id) + ".bin");
            write_file(f.datasets[w], kJobs[w].file_bytes, seed + w);
        }
        f.background = f.dir / "background.bin";
        write_file(f.background, kBackgroundFile, seed + 10);
        f.model = f.dir / "model.pt";
        write_file(f.model, kModelChunk * kModelChunks, seed + 11);
        f.gpus = f.dir / "gpus.yaml";
        write_text(f.gpus, gpu_timeline(seconds));
        f.seed_rules = f.dir / "seed_gpu_io.yaml";
        write_text(f.seed_rules, kSeedRules);
    } catch (...) {
        std::error_code ignored;
        fs::remove_all(f.dir, ignored);  // no half-made folder left behind
        throw;
    }
    return f;
}

// The DataAdvisor's prefetch depth for one training job: its dataset file as
// the one shard of a one-node plan, the --style given, a batch a sample, the
// rule pack's smallest reduce_prefetch factor as prefetch_factor_floor, and
// what the loop measured in its warm-up (its data wait over its time, the
// share of batches that were ready when asked for, its step time and the
// depth it kept).
class JobAdvisor {
public:
    JobAdvisor(const Job& job, const fs::path& file, cohort::CollectiveStyle style, double factor_floor)
        : plan_(make_plan(job, file)) {
        options_.style = style;
        options_.batch_size = 1;
        options_.sample_bytes = job.batch;
        options_.memory_budget_bytes = kAdvisorBudget;
        options_.access = job.access;
        options_.prefetch_factor_floor = factor_floor;
    }
    std::size_t depth(const std::optional<cohort::DataMeasurement>& measured, std::string& reason) {
        cohort::DataAdvisorOptions o = options_;
        if (measured) o.measurements.job = *measured;
        const cohort::DataAdvice advice = cohort::DataAdvisor(o).advise(plan_);
        reason = advice.prefetch_reason;
        return advice.prefetch_batches;
    }

    static constexpr uint64_t kAdvisorBudget = 256 * kMiB;  // per job: prefetch and cache

private:
    static cohort::ShardPlan make_plan(const Job& job, const fs::path& file) {
        cohort::Dataset dataset;
        dataset.add({file.string(), job.file_bytes, job.file_bytes / job.batch});
        cohort::Topology node;
        cohort::Node n;
        n.id = "node-0";
        node.add(n);
        return cohort::ShardPlan::create(cohort::ShardSet::split(dataset, {.shard_count = 1}), node);
    }
    cohort::ShardPlan plan_;
    cohort::DataAdvisorOptions options_;
};

// The smallest reduce_prefetch factor of a rule pack (1 without one): what
// the loaders' depth may be scaled by while its rules fire, for the
// advisor's prefetch_factor_floor. The monitor applies the smallest of the
// firing ones, so the smallest in the pack is the floor.
inline double smallest_prefetch_factor(const fs::path& pack) {
    double floor = 1.0;
    const cohort::RuleSet set = cohort::RuleSet::from_file(pack);
    for (const cohort::Rule& rule : set.rules())
        for (const cohort::Action& action : rule.actions)
            if (action.type == "reduce_prefetch")
                if (auto f = action.parameters.find("factor");
                    f != action.parameters.end() &&
                    (f->second.type() == cohort::Type::number || f->second.type() == cohort::Type::integer))
                    floor = std::min(floor, f->second.as_number());
    return floor;
}

// The loops' warm-up: the first twentieth-and-a-bit of the run (20 s of the
// 240), before GPU memory rises, measured once and handed to the advisor.
constexpr double kWarmupFraction = 20.0 / 240;

}  // namespace data_wait
