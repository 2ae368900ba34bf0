// Question (issue 20): when the GPUs run out of memory and overheat, does
// cohort's transfer scheduler keep the high-priority job fed, against a
// fixed prefetch depth with FIFO transfers and against the seed design's
// fixed rules, without making the training loops wait longer for data?
//
// One process, four workloads reading real files of a temporary folder
// through one TransferScheduler: three training loops (priorities 100, 50
// and 10) that take a batch every step from a prefetch queue, and a
// background job that reads ahead in bursts and reloads a model file.
// Simulated GPUs (the file backend, a timeline written here) go above 90 %
// memory and past the thermal limit for a known window, then recover. The
// configurations run one after another on the same files, the same
// timeline and the same seed:
//   a   fixed prefetch depth, FIFO: no policy, every transfer priority 0;
//   b   the seed design's fixed rules, FIFO: reduce_prefetch 0.6 above 80 %
//       memory, 0.3 above 90 %, delay_transfer 30 s above 87 °C, for every
//       transfer alike; the loaders follow the prefetch factor;
//   cf  cohort's scheduler: the workloads' priorities with aging, the shipped
//       rules/gpu_io.yaml through monitor_policy(monitor) (its thermal hold
//       is for transfers of priority below 10: the background job's), the
//       loaders at the fixed --depth, following the prefetch factor;
//   c   cf with each loop's depth from the DataAdvisor: told the pack's
//       smallest reduce_prefetch factor (prefetch_factor_floor), advised
//       without a measurement at the start and once more after a warm-up
//       with what the loop measured in it (data wait, hit rate, step time,
//       the depth it kept);
//   c0  c with the advisor not told the factor (floor 1): what the floor
//       adds.
// The GPU timeline and the rules' durations run --scale times real time
// (a 30 s hold holds 30 x scale s); the I/O, the training steps and the
// scheduler's aging run in real time. Each transfer reads its bytes with
// pread and then holds its I/O thread until bytes / --link-mbps have passed
// since it started: a modelled storage link, since the page cache alone
// serves at memory speed. data_wait_scenario.hpp holds the scenario.
//
//   build/benchmarks/bench_data_wait [--seconds 240] [--scale 0.05]
//       [--seed 1] [--depth 4] [--link-mbps 100]
//       [--aging 1] [--style allreduce] [--configs a,b,c0,cf,c]
//       [--rules PATH] [--dir DIR] [--json]
#include "data_wait_scenario.hpp"

#include <cohort/data_advisor.hpp>
#include <cohort/error.hpp>
#include <cohort/gpu_monitor.hpp>
#include <cohort/gpu_probe.hpp>
#include <cohort/transfers.hpp>
#include <cohort/workloads.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace data_wait;  // the scenario's constants and files

// A bad flag: reported with exit status 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Options {
    double seconds = 240;  // scenario seconds
    double scale = 0.05;   // real seconds per scenario second
    uint64_t seed = 1;
    std::size_t depth = 4;   // the loaders' prefetch depth (batches)
    double link_mbps = 100;  // MB/s per I/O thread; 0: no modelled link
    // c0, c: the collective style the DataAdvisor is told (its baseline depth)
    cohort::CollectiveStyle style = cohort::CollectiveStyle::allreduce;
    double aging = 1.0;  // c0, cf, c: priority a queued transfer gains per second waited (the shipped default)
    std::vector<std::string> configs = {"a", "b", "c0", "cf", "c"};
    fs::path rules = fs::path(COHORT_RULES_DIR) / "gpu_io.yaml";
    std::string dir;
    bool json = false;
};

Clock::duration dur(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}
double secs(Clock::duration d) {
    return std::chrono::duration<double>(d).count();
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string one, five, fifteen;
    in >> one >> five >> fifteen;
    return one + " " + five + " " + fifteen;
}

// --- one configuration -------------------------------------------------

struct Config {
    std::string name, label;
    bool priorities = false;  // the registry's priorities and aging
    bool follow = false;      // loaders follow the scheduler's prefetch factor
    bool seed_rules = false;  // b's pack instead of the shipped one
    bool policy = false;
    bool advisor = false;       // the loaders' depth from the DataAdvisor, else --depth
    bool factor_floor = false;  // the advisor is told the pack's smallest reduce_prefetch factor
};

std::optional<Config> config_named(const std::string& name) {
    if (name == "a") return Config{"a", "a. fixed depth, FIFO", false, false, false, false, false, false};
    if (name == "b") return Config{"b", "b. seed's fixed rules, FIFO", false, true, true, true, false, false};
    if (name == "c0")
        return Config{"c0", "c0. cohort, advised depth without the factor", true, true, false, true, true, false};
    if (name == "cf") return Config{"cf", "cf. cohort, fixed depth", true, true, false, true, false, false};
    if (name == "c") return Config{"c", "c. cohort, advised depth", true, true, false, true, true, true};
    return std::nullopt;
}

// The rule pack's durations are in scenario seconds; the scheduler's holds
// are real ones. Which transfer a rule holds is the pack's to say.
cohort::TransferPolicy scaled_policy(cohort::GpuMonitor& monitor, double scale) {
    return [inner = cohort::monitor_policy(monitor), scale](const cohort::TransferFacts& facts) {
        std::vector<cohort::PolicyAction> actions = inner(facts);
        for (cohort::PolicyAction& a : actions) a.delay_seconds *= scale;
        return actions;
    };
}

constexpr std::size_t kBackgroundIndex = kJobs.size();  // its row in the tallies

struct Result {
    std::array<double, kJobs.size()> wait{};  // seconds blocked on a batch
    double pressure_wait = 0;                 // the part of them inside the pressure window
    std::array<uint64_t, kJobs.size()> steps{};
    std::array<uint64_t, kJobs.size()> misses{};                   // batches done after the step that needs them began
    std::array<std::vector<double>, kJobs.size() + 1> latency_ms;  // submit to done
    uint64_t bytes = 0, pressure_bytes = 0;
    // The loops' prefetch depth: the last and the largest, and why.
    std::array<std::size_t, kJobs.size()> depth_last{}, depth_max{};
    std::array<std::string, kJobs.size()> depth_reason;
    uint64_t failures = 0;
    std::string first_failure;
    cohort::TransferStats stats;
    double peak_memory = 0, peak_temperature = 0;  // GPU 0, as the monitor saw it
    double total_wait() const {
        double t = 0;
        for (double w : wait) t += w;
        return t;
    }
    uint64_t total_misses() const {
        uint64_t t = 0;
        for (uint64_t m : misses) t += m;
        return t;
    }
};

struct Run {
    Run(const Options& options, const Files& f, const Config& c) : o(options), files(f), config(c) {}
    const Options& o;
    const Files& files;
    const Config& config;
    Clock::time_point start, end, pressure_on, pressure_off;
    cohort::TransferScheduler* scheduler = nullptr;
    std::mutex mutex;
    Result result;
    std::atomic<uint64_t> next_id{0};
    // The transfers' buffers, one pool for each thread: they outlive the
    // scheduler, so a thread that gives up never frees one still read into.
    std::array<std::vector<std::unique_ptr<std::vector<std::byte>>>, kJobs.size() + 2> buffers;

    // Submits a read; the modelled link and the tallies run in on_done, so
    // the transfer holds its I/O thread (and prefetch slot) meanwhile.
    std::future<cohort::TransferResult> submit(std::size_t row, const char* workload, const fs::path& path,
                                               uint64_t offset, uint64_t length, std::span<std::byte> buffer,
                                               bool prefetch, const char* kind,
                                               std::optional<Clock::time_point> deadline) {
        cohort::TransferRequest r;
        r.id = std::string(workload) + "/" + std::to_string(next_id++);
        r.workload = workload;
        r.path = path;
        r.offset = offset;
        r.length = length;
        r.kind = kind;
        r.prefetch = prefetch;
        r.deadline = deadline;
        r.buffer = buffer;
        const auto submitted = Clock::now();
        r.on_done = [this, row, submitted, length, deadline](const cohort::TransferResult& res) {
            if (o.link_mbps > 0)
                std::this_thread::sleep_until(submitted + dur(res.waited_seconds) +
                                              dur(double(length) / (o.link_mbps * 1e6)));
            const auto done = Clock::now();
            std::lock_guard lock(mutex);
            if (res.code != cohort::Errc::ok) {
                if (result.failures++ == 0) result.first_failure = res.error;
                return;
            }
            result.latency_ms[row].push_back(secs(done - submitted) * 1e3);
            result.bytes += res.bytes;
            if (done >= pressure_on && done <= pressure_off) result.pressure_bytes += res.bytes;
            if (deadline && done > *deadline && row < kJobs.size()) ++result.misses[row];
        };
        return scheduler->submit(std::move(r));
    }

    void record_depth(std::size_t w, std::size_t depth, const std::string& reason) {
        std::lock_guard lock(mutex);
        result.depth_last[w] = depth;
        result.depth_max[w] = std::max(result.depth_max[w], depth);
        result.depth_reason[w] = reason;
    }

    static cohort::TransferResult await(std::future<cohort::TransferResult>& f) {
        if (f.wait_for(std::chrono::seconds(120)) != std::future_status::ready)
            throw std::runtime_error("a transfer was not done within 120 s: the scheduler is stuck");
        return f.get();
    }

    // A training loop: a prefetch queue of `depth` batches (fewer while the
    // scheduler's prefetch factor is below 1, when it follows it); each step
    // takes the next batch, waiting if it is not read yet, then computes.
    void loader(std::size_t w) {
        const Job& job = kJobs[w];
        std::optional<JobAdvisor> advisor;
        std::size_t depth = o.depth;
        std::string reason;
        if (config.advisor) {
            advisor.emplace(job, files.datasets[w], o.style,
                            config.factor_floor ? smallest_prefetch_factor(o.rules) : 1.0);
            depth = advisor->depth(std::nullopt, reason);
        }
        record_depth(w, depth, reason);
        auto& pool = buffers[w];
        std::vector<std::size_t> free_slots;
        uint64_t taken = 0, ready = 0;
        double waited_total = 0, kept_total = 0;
        const auto warmed_up = start + dur(kWarmupFraction * o.seconds * o.scale);
        bool advised = false;
        struct InFlight {
            std::future<cohort::TransferResult> done;
            std::size_t slot;
        };
        std::deque<InFlight> queue;
        std::mt19937_64 rng(o.seed * 1000 + w);
        const uint64_t batches = job.file_bytes / job.batch;
        uint64_t next = 0;
        const auto step = dur(job.step_seconds);
        while (Clock::now() < end) {
            std::size_t want = depth;
            if (config.follow) {
                const double d = std::floor(double(depth) * scheduler->stats().prefetch_factor);
                want = std::clamp<std::size_t>(d >= 1 ? static_cast<std::size_t>(d) : 1, 1, depth);
            }
            kept_total += double(want);
            while (queue.size() < want) {
                const uint64_t index = job.access == cohort::AccessPattern::random ? rng() % batches : next++ % batches;
                if (free_slots.empty()) {
                    free_slots.push_back(pool.size());
                    pool.push_back(std::make_unique<std::vector<std::byte>>(job.batch));
                }
                const std::size_t slot = free_slots.back();
                free_slots.pop_back();
                // Needed once the batches before it are used, one step each;
                // with none before it, the loop waits for it: not a prefetch.
                const auto needed = Clock::now() + step * static_cast<int64_t>(queue.size());
                queue.push_back({submit(w, job.id, files.datasets[w], index * job.batch, job.batch, *pool[slot],
                                        !queue.empty(), "dataset", needed),
                                 slot});
            }
            const auto t0 = Clock::now();
            const cohort::TransferResult r = await(queue.front().done);
            const double waited = secs(Clock::now() - t0);
            free_slots.push_back(queue.front().slot);
            queue.pop_front();
            {
                std::lock_guard lock(mutex);
                result.wait[w] += waited;
                if (t0 >= pressure_on && t0 <= pressure_off) result.pressure_wait += waited;
                ++result.steps[w];
            }
            if (r.code != cohort::Errc::ok) break;
            ++taken;
            if (waited < 1e-3) ++ready;
            waited_total += waited;
            if (advisor && !advised && Clock::now() >= warmed_up) {
                // Once, after the warm-up: what the loop saw at the depth it
                // kept (the mean of its queue's target, factor included).
                cohort::DataMeasurement m;
                m.data_wait_fraction = std::min(1.0, waited_total / secs(Clock::now() - start));
                m.prefetch_hit_rate = double(ready) / double(taken);
                m.step_time = job.step_seconds;
                m.prefetch_depth = static_cast<uint32_t>(
                    std::clamp(std::llround(kept_total / double(taken)), 1LL, 64LL));  // the advisor's range
                depth = advisor->depth(m, reason);
                record_depth(w, depth, reason);
                advised = true;
            }
            std::this_thread::sleep_for(step);  // the compute step
        }
        for (InFlight& f : queue) await(f.done);
    }

    // The background job: read-ahead bursts of its dataset file.
    void background() {
        auto& pool = buffers[kJobs.size()];
        for (std::size_t i = 0; i < kBurst; ++i) pool.push_back(std::make_unique<std::vector<std::byte>>(kChunk));
        uint64_t next = 0;
        for (auto burst_at = start; burst_at < end; burst_at += dur(kBurstEvery)) {
            std::this_thread::sleep_until(burst_at);
            std::vector<std::future<cohort::TransferResult>> burst;
            for (std::size_t i = 0; i < kBurst; ++i)
                burst.push_back(submit(kBackgroundIndex, kBackground, files.background,
                                       (next++ % (kBackgroundFile / kChunk)) * kChunk, kChunk, *pool[i], true,
                                       "dataset", std::nullopt));
            for (auto& f : burst) await(f);
        }
    }

    // ... and its model reloads, at known points of the timeline.
    void model_reads() {
        auto& pool = buffers[kJobs.size() + 1];
        for (std::size_t i = 0; i < kModelChunks; ++i)
            pool.push_back(std::make_unique<std::vector<std::byte>>(kModelChunk));
        for (const double fraction : kModelReads) {
            std::this_thread::sleep_until(start + dur(fraction * o.seconds * o.scale));
            std::vector<std::future<cohort::TransferResult>> reads;
            for (std::size_t i = 0; i < kModelChunks; ++i)
                reads.push_back(submit(kBackgroundIndex, kBackground, files.model, i * kModelChunk, kModelChunk,
                                       *pool[i], false, "model", std::nullopt));
            for (auto& f : reads) await(f);
        }
    }
};

Result run_config(const Options& o, const Files& files, const Config& config) {
    const auto t0 = Clock::now();
    cohort::ProbeOptions po;
    po.clock = [t0, scale = o.scale] { return secs(Clock::now() - t0) / scale; };
    cohort::MonitorOptions mo;
    mo.interval_seconds = o.scale;  // one sample a scenario second
    mo.rules = config.seed_rules ? files.seed_rules : o.rules;
    cohort::GpuMonitor monitor(cohort::GpuProbe::open("file:" + files.gpus.string(), po), mo);
    monitor.start();

    cohort::WorkloadRegistry registry;
    for (std::size_t w = 0; w < kJobs.size(); ++w)
        registry.add({.id = kJobs[w].id,
                      .pid = ::getpid(),
                      .gpus = {0},
                      .memory_bytes = 20ull << 30,
                      .priority = kJobs[w].priority,
                      .dataset_files = {files.datasets[w]},
                      .access = kJobs[w].access});
    registry.add({.id = kBackground,
                  .pid = ::getpid(),
                  .gpus = {1},
                  .memory_bytes = 30ull << 30,
                  .priority = 0,
                  .dataset_files = {files.background},
                  .model_files = {files.model}});

    cohort::TransferOptions to;
    to.workers = kWorkers;
    to.prefetch_depth = kSchedulerDepth;
    if (config.priorities) {
        to.registry = &registry;
        // The queue runs in real time, as the I/O and the steps do: not scaled.
        to.aging_per_second = o.aging;
    }
    if (config.policy) to.policy = scaled_policy(monitor, o.scale);

    Run run(o, files, config);
    {
        cohort::TransferScheduler scheduler(std::move(to));
        run.scheduler = &scheduler;
        run.start = t0;  // the timeline's zero
        run.end = run.start + dur(o.seconds * o.scale);
        run.pressure_on = t0 + dur(kMem90 * o.seconds * o.scale);
        run.pressure_off = t0 + dur(kMem90Off * o.seconds * o.scale);
        std::vector<std::thread> threads;
        std::vector<std::exception_ptr> errors(kJobs.size() + 2);
        const auto guarded = [&](std::size_t i, auto body) {
            threads.emplace_back([&errors, i, body] {
                try {
                    body();
                } catch (...) {
                    errors[i] = std::current_exception();
                }
            });
        };
        for (std::size_t w = 0; w < kJobs.size(); ++w) guarded(w, [&run, w] { run.loader(w); });
        guarded(kJobs.size(), [&run] { run.background(); });
        guarded(kJobs.size() + 1, [&run] { run.model_reads(); });
        for (std::thread& t : threads) t.join();
        for (const std::exception_ptr& e : errors)
            if (e) std::rethrow_exception(e);
        run.result.stats = scheduler.stats();
    }
    monitor.stop();
    const double inf = std::numeric_limits<double>::infinity();
    run.result.peak_memory = monitor.stats(0, cohort::GpuMetric::memory_used_percent, inf).max;
    run.result.peak_temperature = monitor.stats(0, cohort::GpuMetric::temperature_celsius, inf).max;
    if (run.result.failures > 0)
        throw std::runtime_error(config.label + ": " + std::to_string(run.result.failures) +
                                 " transfer(s) failed, the first: " + run.result.first_failure);
    return std::move(run.result);
}

// --- output ------------------------------------------------------------

void print_table(const std::vector<Config>& configs, const std::vector<Result>& results) {
    std::printf(
        "| configuration | data wait s: hi / mid / low | total data wait s | of which in pressure s | hi latency p50 "
        "ms | hi p99 ms | "
        "hi max ms | background p99 ms | misses | MB moved in pressure | MB moved | memory / thermal events | held | "
        "hi steps |\n");
    std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (std::size_t i = 0; i < configs.size(); ++i) {
        const Result& r = results[i];
        std::printf(
            "| %s | %.2f / %.2f / %.2f | %.2f | %.2f | %.1f | %.1f | %.0f | %.0f | %llu | %.0f | %.0f | %llu / %llu | "
            "%llu | %llu |\n",
            configs[i].label.c_str(), r.wait[0], r.wait[1], r.wait[2], r.total_wait(), r.pressure_wait,
            percentile(r.latency_ms[0], 0.5), percentile(r.latency_ms[0], 0.99), percentile(r.latency_ms[0], 1.0),
            percentile(r.latency_ms[kBackgroundIndex], 0.99), static_cast<unsigned long long>(r.total_misses()),
            double(r.pressure_bytes) / 1e6, double(r.bytes) / 1e6,
            static_cast<unsigned long long>(r.stats.memory_pressure_events),
            static_cast<unsigned long long>(r.stats.temperature_events),
            static_cast<unsigned long long>(r.stats.delayed), static_cast<unsigned long long>(r.steps[0]));
    }
}

void print_json(const Options& o, const std::vector<Config>& configs, const std::vector<Result>& results) {
    std::printf("{\"seconds\": %g, \"scale\": %g, \"seed\": %llu, \"depth\": %zu, \"link_mbps\": %g, \"configs\": [",
                o.seconds, o.scale, static_cast<unsigned long long>(o.seed), o.depth, o.link_mbps);
    for (std::size_t i = 0; i < configs.size(); ++i) {
        const Result& r = results[i];
        std::printf(
            "%s{\"name\": \"%s\", \"data_wait_s\": {\"train-hi\": %.4f, \"train-mid\": %.4f, \"train-low\": "
            "%.4f, \"total\": %.4f, \"in_pressure\": %.4f}, \"hi_latency_ms\": {\"p50\": %.3f, \"p99\": %.3f, \"max\": "
            "%.3f}, \"background_p99_ms\": %.3f, \"misses\": %llu, "
            "\"pressure_bytes\": %llu, \"bytes\": %llu, \"memory_pressure_events\": %llu, "
            "\"temperature_events\": %llu, \"delayed\": %llu, \"peak_memory_percent\": %.1f, "
            "\"peak_temperature\": %.1f, \"depth\": {\"train-hi\": %zu, \"train-mid\": %zu, \"train-low\": %zu}}",
            i ? ", " : "", configs[i].name.c_str(), r.wait[0], r.wait[1], r.wait[2], r.total_wait(), r.pressure_wait,
            percentile(r.latency_ms[0], 0.5), percentile(r.latency_ms[0], 0.99), percentile(r.latency_ms[0], 1.0),
            percentile(r.latency_ms[kBackgroundIndex], 0.99), static_cast<unsigned long long>(r.total_misses()),
            static_cast<unsigned long long>(r.pressure_bytes), static_cast<unsigned long long>(r.bytes),
            static_cast<unsigned long long>(r.stats.memory_pressure_events),
            static_cast<unsigned long long>(r.stats.temperature_events),
            static_cast<unsigned long long>(r.stats.delayed), r.peak_memory, r.peak_temperature, r.depth_last[0],
            r.depth_last[1], r.depth_last[2]);
    }
    std::printf("], \"load_average\": \"%s\"}\n", load_average().c_str());
}

// --- flags -------------------------------------------------------------

double number(const std::string& flag, const std::string& value) {
    std::size_t used = 0;
    double v = 0;
    try {
        v = std::stod(value, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != value.size() || !std::isfinite(v))
        throw UsageError(flag + " needs a number, not '" + value + "'");
    return v;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            std::printf(
                "usage: bench_data_wait [--seconds S] [--scale X] [--seed N] [--depth D] [--link-mbps M]\n"
                "       [--aging A] [--style S] [--configs a,b,c0,cf,c] [--rules PATH] [--dir DIR]\n"
                "       [--json]\n"
                "  --seconds   scenario length in scenario seconds (default 240)\n"
                "  --scale     real seconds per scenario second (default 0.05: 240 s run in 12 s)\n"
                "  --depth     the loaders' prefetch depth in batches (default 4)\n"
                "  --link-mbps modelled MB/s per I/O thread (default 100; 0: page cache speed)\n"
                "  --aging     c0, cf, c: priority a queued transfer gains per second waited (default 1)\n"
                "  --style     c0, c: allreduce (default) or parameter_server, as the DataAdvisor is told\n");
            std::exit(0);
        }
        if (flag == "--json") {
            o.json = true;
            continue;
        }
        static const std::array<std::string_view, 10> kValued = {"--seconds", "--scale", "--seed",  "--depth",
                                                                 "--link-mbps", "--configs", "--rules", "--dir",
                                                                 "--aging",   "--style"};
        if (std::find(kValued.begin(), kValued.end(), flag) == kValued.end())
            throw UsageError("unknown flag '" + flag + "'; see --help");
        if (i + 1 >= argc) throw UsageError(flag + " needs a value; see --help");
        const std::string value = argv[++i];
        if (flag == "--dir") {
            o.dir = value;
        } else if (flag == "--rules") {
            o.rules = value;
        } else if (flag == "--configs") {
            o.configs.clear();
            for (std::size_t p = 0; p <= value.size();) {
                const std::size_t comma = std::min(value.find(',', p), value.size());
                o.configs.push_back(value.substr(p, comma - p));
                p = comma + 1;
            }
        } else if (flag == "--seconds") {
            o.seconds = number(flag, value);
            if (!(o.seconds > 0) || o.seconds > 86400)
                throw UsageError("--seconds must be more than 0 and at most 86400");
        } else if (flag == "--scale") {
            o.scale = number(flag, value);
            if (!(o.scale > 0) || o.scale > 1) throw UsageError("--scale must be more than 0 and at most 1");
        } else if (flag == "--seed") {
            const double v = number(flag, value);
            if (v < 0 || v != std::floor(v) || v > 1e15) throw UsageError("--seed must be a whole number >= 0");
            o.seed = static_cast<uint64_t>(v);
        } else if (flag == "--depth") {
            const double v = number(flag, value);
            if (v < 1 || v > 64 || v != std::floor(v)) throw UsageError("--depth must be a whole number, 1 to 64");
            o.depth = static_cast<std::size_t>(v);
        } else if (flag == "--link-mbps") {
            o.link_mbps = number(flag, value);
            if (o.link_mbps < 0) throw UsageError("--link-mbps must be 0 (no modelled link) or more");
        } else if (flag == "--style") {
            const auto style = cohort::parse_collective_style(value);
            if (!style) throw UsageError("--style must be allreduce or parameter_server, not '" + value + "'");
            o.style = *style;
        } else if (flag == "--aging") {
            o.aging = number(flag, value);
            if (!(o.aging > 0)) throw UsageError("--aging must be more than 0 (or a transfer could starve)");
        }
    }
    for (const std::string& c : o.configs)
        if (!config_named(c)) throw UsageError("--configs: unknown configuration '" + c + "' (a, b, c0, cf or c)");
    if (o.seconds * o.scale > 600) throw UsageError("--seconds x --scale is over 600 s of real time a configuration");
    if (!fs::is_regular_file(o.rules))
        throw UsageError("the rule pack " + o.rules.string() + " does not exist; pass --rules PATH to gpu_io.yaml");
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    try {
        o = parse(argc, argv);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "bench_data_wait: %s\n", e.what());
        return 2;
    }
    std::optional<Files> files;
    try {
        files = make_files(o.dir, o.seed, o.seconds);
        if (!o.json)
            std::printf(
                "bench_data_wait: %.0f scenario s at scale %g (%.1f s a configuration), seed %llu, depth %zu, "
                "%zu I/O threads x %g MB/s, files in %s; load average %s\n",
                o.seconds, o.scale, o.seconds * o.scale, static_cast<unsigned long long>(o.seed), o.depth, kWorkers,
                o.link_mbps, files->dir.c_str(), load_average().c_str());
        std::vector<Config> configs;
        std::vector<Result> results;
        for (const std::string& name : o.configs) {
            configs.push_back(*config_named(name));
            results.push_back(run_config(o, *files, configs.back()));
            if (!o.json)
                std::printf("%s: done; GPU 0 peaked at %.1f %% memory and %.0f C\n", configs.back().label.c_str(),
                            results.back().peak_memory, results.back().peak_temperature);
        }
        fs::remove_all(files->dir);
        files.reset();
        if (o.json) {
            print_json(o, configs, results);
            return 0;
        }
        std::printf("\n");
        print_table(configs, results);
        const auto a = std::find_if(configs.begin(), configs.end(), [](const Config& c) { return c.name == "a"; });
        if (a != configs.end()) {
            const Result& ra = results[static_cast<std::size_t>(a - configs.begin())];
            std::printf("\n");
            for (std::size_t i = 0; i < configs.size(); ++i) {
                if (configs[i].name == "a") continue;
                const Result& r = results[i];
                const double p99 = percentile(r.latency_ms[0], 0.99), p99a = percentile(ra.latency_ms[0], 0.99);
                std::printf("%s against a: hi p99 %.2fx, total data wait %.2fx (%+.2f s)%s\n", configs[i].name.c_str(),
                            p99a > 0 ? p99 / p99a : 0.0, ra.total_wait() > 0 ? r.total_wait() / ra.total_wait() : 0.0,
                            r.total_wait() - ra.total_wait(),
                            configs[i].name.starts_with('c')
                                ? (p99 * 2 <= p99a && r.total_wait() <= 1.1 * ra.total_wait()
                                       ? "; target (p99 halved, data wait within +10 %) met"
                                       : "; target (p99 halved, data wait within +10 %) missed")
                                : "");
            }
        }
        std::printf("\nthe loops' prefetch depth, last (largest):\n");
        for (std::size_t i = 0; i < configs.size(); ++i)
            for (std::size_t w = 0; w < kJobs.size(); ++w)
                if (configs[i].advisor)
                    std::printf("  %s %s: %zu (%zu), %s\n", configs[i].name.c_str(), kJobs[w].id,
                                results[i].depth_last[w], results[i].depth_max[w], results[i].depth_reason[w].c_str());
                else if (w == 0)
                    std::printf("  %s: --depth %zu, fixed\n", configs[i].name.c_str(), o.depth);
        std::printf("\nload average after: %s\n", load_average().c_str());
        return 0;
    } catch (const std::exception& e) {
        if (files) {
            std::error_code ignored;
            fs::remove_all(files->dir, ignored);
        }
        std::fprintf(stderr, "bench_data_wait: %s\n", e.what());
        return 1;
    }
}
