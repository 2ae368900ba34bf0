// Question: what does one GPU sample cost with each backend available here,
// how much does GpuProbe (a worker thread and a deadline around every query)
// add over calling the backend directly, and what does the I/O path pay to
// ask the monitor for a prefetch factor or a transfer delay?
//
//   build/benchmarks/bench_gpu --benchmark_counters_tabular=true
//
// The simulated backend reads a generated file of 8 GPUs (an 8-GPU node)
// with a 16-step timeline. NVML and nvidia-smi are measured where they open;
// elsewhere their rows say why they were skipped. Figures published for real
// GPUs: an NVML sample about 0.1 ms, `nvidia-smi --query-gpu` 7 ms to 0.6 s.
// After the table the program prints, per backend, the probe's time over the
// direct call and the difference.
#include <cohort/cohort.hpp>
#include <cohort/gpu_monitor.hpp>

#include <benchmark/benchmark.h>

#include "console_options.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>


namespace {

constexpr double kDeadline = 2.0;

// An 8-GPU node: every field set, memory ramping on each GPU, a temperature
// step on two of them, an Xid late in the run.
const std::filesystem::path& simulated_file() {
    static const std::filesystem::path path = [] {
        auto p = std::filesystem::temp_directory_path() / ("cohort-bench-gpus-" + std::to_string(::getpid()) + ".yaml");
        std::ofstream out(p);
        out << "version: 1\ngpus:\n";
        for (int i = 0; i < 8; ++i) {
            out << "  - {index: " << i
                << ", name: Simulated H100 80GB HBM3, memory_total: 80GiB, memory_used: " << 10 + i
                << "GiB, utilization: 90, memory_busy: 40, temperature: " << 60 + i
                << ", power_draw: 410.5, power_limit: 700, sm_clock: 1980, memory_clock: 2619, fan: "
                   "not_supported, ecc_corrected: 0, ecc_uncorrected: 0,\n"
                   "     processes: [{pid: "
                << 4000 + i << ", name: python, memory: 8GiB}]}\n";
        }
        out << "timeline:\n";
        for (int i = 0; i < 8; ++i) out << "  - {at: 1s, gpu: " << i << ", ramp: {memory_used: 70GiB}, over: 10m}\n";
        for (int i = 0; i < 6; ++i)
            out << "  - {at: " << 60 + i << "s, gpu: " << i % 2 << ", set: {temperature: 88}}\n";
        out << "  - {at: 1h, gpu: 3, xid: 79, detail: GPU has fallen off the bus}\n";
        out << "  - {at: 2h, gpu: 3, set: {temperature: 40}}\n";
        return p;
    }();
    return path;
}

using Opener = std::unique_ptr<cohort::GpuBackend> (*)(const cohort::ProbeOptions&);

std::unique_ptr<cohort::GpuBackend> open_file(const cohort::ProbeOptions& options) {
    return cohort::open_simulated_backend(simulated_file(), options);
}

struct Contender {
    const char* name;
    Opener open;
};
const Contender kBackends[] = {
    {"file", open_file}, {"nvml", cohort::open_nvml_backend}, {"smi", cohort::open_smi_backend}};

cohort::ProbeOptions probe_options() {
    cohort::ProbeOptions options;
    options.deadline_seconds = kDeadline;
    return options;
}

// Opens one backend, or marks the benchmark skipped with the reason.
std::unique_ptr<cohort::GpuBackend> open_or_skip(benchmark::State& state, const Contender& backend) {
    try {
        return backend.open(probe_options());
    } catch (const std::exception& e) {
        state.SkipWithError((std::string(backend.name) + " unavailable: " + e.what()).c_str());
        return nullptr;
    }
}

// The backend's read(), on the calling thread, with nothing around it.
void BM_direct(benchmark::State& state, const Contender& contender) {
    auto backend = open_or_skip(state, contender);
    if (!backend) return;
    std::size_t gpus = 0;
    for (auto _ : state) {
        auto readings = backend->read(kDeadline);
        gpus = readings.size();
        benchmark::DoNotOptimize(readings);
    }
    state.counters["gpus"] = static_cast<double>(gpus);
}

// GpuProbe::sample(): the same read on the probe's worker thread, waited for
// under the deadline, stamped and copied into a GpuSample.
void BM_probe(benchmark::State& state, const Contender& contender) {
    auto backend = open_or_skip(state, contender);
    if (!backend) return;
    cohort::GpuProbe probe(std::move(backend), probe_options());
    std::size_t gpus = 0, stale = 0;
    for (auto _ : state) {
        cohort::GpuSample sample = probe.sample();
        gpus = sample.gpus.size();
        stale += sample.stale ? 1 : 0;
        benchmark::DoNotOptimize(sample);
    }
    state.counters["gpus"] = static_cast<double>(gpus);
    state.counters["stale"] = static_cast<double>(stale);  // must be 0, or the row measures timeouts
}

// What the I/O path pays per question once a sample is there: the rule pack
// evaluated on the latest sample.
void BM_monitor(benchmark::State& state, bool transfer) {
    cohort::GpuMonitor monitor(cohort::GpuProbe::open("file:" + simulated_file().string(), probe_options()));
    monitor.sample_now();
    double answer = 0;
    for (auto _ : state) {
        answer = transfer ? monitor.transfer_delay(200'000'000, "model") : monitor.prefetch_factor();
        benchmark::DoNotOptimize(answer);
    }
    state.counters["answer"] = answer;
}

void BM_prefetch_factor(benchmark::State& state) {
    BM_monitor(state, false);
}
void BM_transfer_delay(benchmark::State& state) {
    BM_monitor(state, true);
}

// The console table, then the ratios the question is about.
class OverheadReporter : public benchmark::ConsoleReporter {
public:
    explicit OverheadReporter(OutputOptions options) : ConsoleReporter(options) {}
    void ReportRuns(const std::vector<Run>& runs) override {
        ConsoleReporter::ReportRuns(runs);
        for (const auto& run : runs) {
            // With --benchmark_repetitions the median comes last and wins.
            const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
            if (run.error_occurred || (run.run_type == Run::RT_Aggregate && !median)) continue;
            seconds_[run.run_name.str()] = run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
        }
    }
    void Finalize() override {
        ConsoleReporter::Finalize();
        std::printf("\n");
        for (const Contender& c : kBackends) {
            const auto direct = seconds_.find(std::string("BM_direct/") + c.name);
            const auto probe = seconds_.find(std::string("BM_probe/") + c.name);
            if (direct == seconds_.end() || probe == seconds_.end()) {
                std::printf("%s: not measured here (see the skipped rows)\n", c.name);
                continue;
            }
            std::printf("%s: probe %.1f us, direct %.1f us: probe / direct %.2fx, overhead %.1f us per sample\n",
                        c.name, probe->second * 1e6, direct->second * 1e6, probe->second / direct->second,
                        (probe->second - direct->second) * 1e6);
        }
    }

private:
    std::map<std::string, double> seconds_;
};

}  // namespace

int main(int argc, char** argv) {
    const auto options = console_options(argc, argv);  // before Initialize consumes the flags
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    // What "auto" would choose here, and why it rejected the others.
    const cohort::GpuProbe chosen = cohort::GpuProbe::open("auto", probe_options());
    for (const cohort::BackendChoice& choice : chosen.selection())
        std::printf("backend %-10s %s\n", choice.backend.c_str(),
                    choice.chosen ? "chosen by auto" : ("skipped: " + choice.reason).c_str());
    // Registered here so that a backend this machine lacks runs once, not
    // once per --benchmark_repetitions, to print why it was skipped.
    for (const Contender& c : kBackends) {
        bool available = true;
        try {
            c.open(probe_options());
        } catch (const std::exception&) {
            available = false;
        }
        const auto unit = c.open == cohort::open_smi_backend ? benchmark::kMillisecond : benchmark::kMicrosecond;
        for (auto [kind, run] : {std::pair{"BM_direct/", &BM_direct}, std::pair{"BM_probe/", &BM_probe}}) {
            auto* b = benchmark::RegisterBenchmark((kind + std::string(c.name)).c_str(), run, c)->Unit(unit);
            if (!available) b->Repetitions(1);
        }
    }
    benchmark::RegisterBenchmark("BM_prefetch_factor", BM_prefetch_factor)->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("BM_transfer_delay", BM_transfer_delay)->Unit(benchmark::kMicrosecond);
    OverheadReporter reporter(options);
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    std::filesystem::remove(simulated_file());
    return 0;
}
