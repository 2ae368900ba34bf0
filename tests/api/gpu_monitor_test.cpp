// GpuMonitor: the simulated backend on a fake clock drives the monitor and
// the shipped GPU rule pack end to end; history, window statistics,
// published variables, the sampler thread, and a backend that hangs.
#include "support.hpp"

#include <cohort/gpu_monitor.hpp>
#include <cohort/rules.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <unistd.h>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr double kStart = 1'700'000'000;  // the fake clock's t = 0 (the backend opens then)

std::filesystem::path monitor_data(const std::string& name) {
    return data_path("gpu/monitor/" + name);
}

// Options with one field changed.
MonitorOptions interval(double seconds) {
    MonitorOptions options;
    options.interval_seconds = seconds;
    return options;
}
MonitorOptions history(std::size_t samples) {
    MonitorOptions options;
    options.history = samples;
    return options;
}
MonitorOptions rules(const std::filesystem::path& pack) {
    MonitorOptions options;
    options.rules = pack;
    return options;
}

// ramp.yaml (see its comments) on a clock the test moves.
struct Simulated {
    std::shared_ptr<std::atomic<double>> now = std::make_shared<std::atomic<double>>(kStart);

    GpuProbe probe(const std::string& file = "ramp.yaml") const {
        ProbeOptions options;
        options.clock = [now = now] { return now->load(); };
        return GpuProbe::open("file:" + monitor_data(file).string(), options);
    }
    void at(double t) const { now->store(kStart + t); }
};

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// ------------------------------------------------------------- end to end

TEST(GpuMonitor, PrefetchFactorFollowsTheMemoryRampWithTheShippedPack) {
    Simulated sim;
    GpuMonitor monitor(sim.probe());
    for (int t = 0; t <= 70; ++t) {
        sim.at(t);
        const GpuSample sample = monitor.sample_now();
        ASSERT_EQ(sample.health, ProbeHealth::ok) << sample.error;
        const double used = *sample.gpus.at(0).memory_used_percent().get();
        const double factor = monitor.prefetch_factor();
        // The rule fires once on entry (and once per 15 s cooldown), but the
        // factor holds for as long as memory stays above 85 %.
        EXPECT_EQ(factor, used > 85 ? 0.5 : 1.0) << "t=" << t << "s, memory " << used << "%";
        if (t <= 44 || t >= 65) {
            EXPECT_EQ(factor, 1.0) << "t=" << t;
        }
        if (t >= 46 && t < 65) {
            EXPECT_EQ(factor, 0.5) << "t=" << t;
        }
    }
}

TEST(GpuMonitor, TransferDelayFollowsTheTemperatureSpikeWithTheShippedPack) {
    Simulated sim;
    GpuMonitor monitor(sim.probe());
    for (int t = 0; t <= 50; ++t) {
        sim.at(t);
        monitor.sample_now();
        const double expected = t >= 30 && t < 40 ? 30.0 : 0.0;  // the hottest GPU, 92 °C > 87
        EXPECT_EQ(monitor.transfer_delay(1'000'000'000, "dataset"), expected) << "t=" << t;
        EXPECT_EQ(monitor.transfer_delay(200'000'000, "model"), expected) << "t=" << t;
        EXPECT_EQ(monitor.transfer_delay(0, ""), expected) << "t=" << t;
        // The hold is for what can wait: priority below 10, prefetch or not.
        EXPECT_EQ(monitor.transfer_delay(IoTransfer{1'000'000, "dataset", 9, true}), expected) << "t=" << t;
        EXPECT_EQ(monitor.transfer_delay(IoTransfer{1'000'000, "dataset", 10}), 0.0) << "t=" << t;
        EXPECT_EQ(monitor.transfer_delay(IoTransfer{1'000'000, "dataset", 100, true}), 0.0) << "t=" << t;
    }
}

TEST(GpuMonitor, AnswersTakeASampleWhenThereIsNoneYet) {
    Simulated sim;
    GpuMonitor monitor(sim.probe());
    sim.at(50);  // memory at 90 %
    EXPECT_FALSE(monitor.latest());
    EXPECT_EQ(monitor.prefetch_factor(), 0.5);
    ASSERT_TRUE(monitor.latest());
    EXPECT_EQ(monitor.history(0).size(), 1u);
}

TEST(GpuMonitor, IoAdviceNamesEachFiringActionItsRuleAndTheValues) {
    Simulated sim;
    GpuMonitor monitor(sim.probe());
    sim.at(0);  // 40 % memory, 75 °C: nothing fires
    monitor.sample_now();
    EXPECT_TRUE(monitor.io_advice(200'000'000, "model").actions.empty());
    sim.at(35);  // 65 % memory, GPU 1 at 92 °C
    monitor.sample_now();
    IoAdvice advice = monitor.io_advice(200'000'000, "model");
    ASSERT_EQ(advice.actions.size(), 1u);
    EXPECT_EQ(advice.actions[0].rule, "delay_transfer_on_temperature");
    EXPECT_EQ(advice.actions[0].type, "delay_transfer");
    EXPECT_EQ(advice.actions[0].category, "thermal");
    EXPECT_EQ(advice.actions[0].delay_seconds, 30);
    EXPECT_THAT(advice.values, ::testing::Contains(std::pair<std::string, double>("gpu_temperature", 92)));
    EXPECT_THAT(advice.values, ::testing::Contains(std::pair<std::string, double>("transfer_size", 200'000'000)));
    // The two-argument form asks about priority 0, not a prefetch.
    EXPECT_THAT(advice.values, ::testing::Contains(std::pair<std::string, double>("transfer_priority", 0)));
    EXPECT_THAT(advice.values, ::testing::Contains(std::pair<std::string, double>("prefetch", 0)));
    advice = monitor.io_advice(IoTransfer{200'000'000, "model", 50, true});
    EXPECT_TRUE(advice.actions.empty());  // a high-priority transfer is not held
    EXPECT_THAT(advice.values, ::testing::Contains(std::pair<std::string, double>("transfer_priority", 50)));
    EXPECT_THAT(advice.values, ::testing::Contains(std::pair<std::string, double>("prefetch", 1)));
    sim.at(50);  // 90 % memory, cool
    monitor.sample_now();
    advice = monitor.io_advice(200'000'000, "model");
    ASSERT_EQ(advice.actions.size(), 2u);
    EXPECT_EQ(advice.actions[0].rule, "reduce_prefetch_on_memory_pressure");
    EXPECT_EQ(advice.actions[0].category, "memory");
    EXPECT_EQ(advice.actions[0].factor, 0.5);
    EXPECT_EQ(advice.actions[1].rule, "prioritize_model_files");
    EXPECT_EQ(advice.actions[1].type, "prioritize");
    EXPECT_EQ(monitor.io_advice(200'000'000, "dataset").actions.size(), 1u);  // not a model file
}

TEST(GpuMonitor, TheSmallestFactorAndTheLongestDelayWin) {
    Simulated sim;
    GpuMonitor monitor(sim.probe(), rules(monitor_data("two_levels.yaml")));
    sim.at(0);  // memory 50 %, 75 °C
    monitor.sample_now();
    EXPECT_EQ(monitor.prefetch_factor(), 1.0);
    EXPECT_EQ(monitor.transfer_delay(1, "dataset"), 30.0);
    sim.at(25);  // memory 65 %
    monitor.sample_now();
    EXPECT_EQ(monitor.prefetch_factor(), 0.5);
    sim.at(35);  // memory 75 %, 92 °C
    monitor.sample_now();
    EXPECT_EQ(monitor.prefetch_factor(), 0.25);
    EXPECT_EQ(monitor.transfer_delay(1, "dataset"), 90.0);
}

TEST(GpuMonitor, FindsThePackInCohortRulesDir) {
    const auto dir = std::filesystem::temp_directory_path() / ("cohort-monitor-rules-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "gpu_io.yaml") << "version: 1\nvariables: {gpu_memory: number}\nrules:\n"
                                          "  - id: any_memory\n    condition: gpu_memory > 10\n"
                                          "    actions: [{type: reduce_prefetch, parameters: {factor: 0.125}}]\n";
    const char* before = std::getenv("COHORT_RULES_DIR");
    const std::optional<std::string> saved = before ? std::optional<std::string>(before) : std::nullopt;
    ::setenv("COHORT_RULES_DIR", dir.c_str(), 1);
    Simulated sim;
    GpuMonitor monitor(sim.probe());
    const double factor = monitor.prefetch_factor();
    if (saved)
        ::setenv("COHORT_RULES_DIR", saved->c_str(), 1);
    else
        ::unsetenv("COHORT_RULES_DIR");
    std::filesystem::remove_all(dir);
    EXPECT_EQ(factor, 0.125);
}

// ----------------------------------------------------------- bad options

TEST(GpuMonitor, RejectsBadOptionsSayingWhy) {
    Simulated sim;
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { GpuMonitor(sim.probe(), interval(0)); }),
                HasSubstr("interval_seconds must be more than 0 and at most 86400 (a day), got 0"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { GpuMonitor(sim.probe(), interval(1e300)); }),
                HasSubstr("got 1e+300"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { GpuMonitor(sim.probe(), history(0)); }),
                HasSubstr("history must keep at least 1 sample per GPU"));
    GpuMonitor monitor(sim.probe());
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { monitor.stats(0, GpuMetric::temperature_celsius, -1); }),
                HasSubstr("window_seconds must be >= 0, got -1"));
}

TEST(GpuMonitor, RefusesAPackItCannotAnswerFrom) {
    Simulated sim;
    const std::string no_factor =
        error_message(Errc::parse, [&] { GpuMonitor(sim.probe(), rules(monitor_data("no_factor.yaml"))); });
    EXPECT_THAT(no_factor, HasSubstr("no_factor.yaml:"));
    EXPECT_THAT(no_factor, HasSubstr("rule 'memory_high': a reduce_prefetch action needs a parameter 'factor'"));
    const std::string bad_delay =
        error_message(Errc::parse, [&] { GpuMonitor(sim.probe(), rules(monitor_data("bad_delay.yaml"))); });
    EXPECT_THAT(bad_delay,
                HasSubstr("rule 'hot': a delay_transfer action needs a parameter 'delay' that is a duration"));
    try {
        GpuMonitor(sim.probe(), rules(monitor_data("missing.yaml")));
        ADD_FAILURE() << "a missing pack was accepted";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("missing.yaml"));
    }
}

// ------------------------------------------------------ history and stats

TEST(GpuMonitor, HistoryIsBoundedAndOldestFirst) {
    Simulated sim;
    GpuMonitor monitor(sim.probe(), history(5));
    for (int t = 0; t < 8; ++t) {
        sim.at(t);
        monitor.sample_now();
    }
    for (uint32_t gpu : {0u, 1u}) {
        const auto history = monitor.history(gpu);
        ASSERT_EQ(history.size(), 5u) << "GPU " << gpu;
        for (std::size_t i = 0; i < history.size(); ++i) {
            EXPECT_EQ(history[i].first, kStart + 3 + static_cast<double>(i)) << "GPU " << gpu << " entry " << i;
            EXPECT_EQ(history[i].second.index, gpu);
        }
    }
    EXPECT_TRUE(monitor.history(7).empty());
}

TEST(GpuMonitor, StatsSummariseTheWindowEndingAtTheLatestSample) {
    Simulated sim;
    GpuMonitor monitor(sim.probe());
    for (int t = 0; t <= 32; ++t) {
        sim.at(t);
        monitor.sample_now();
    }
    // GPU 0's memory is 40 + t % from t=10s: 62 .. 72 over [22s, 32s].
    WindowStats memory = monitor.stats(0, GpuMetric::memory_used_percent, 10);
    EXPECT_EQ(memory.count, 11u);
    EXPECT_NEAR(memory.min, 62, 1e-6);
    EXPECT_NEAR(memory.max, 72, 1e-6);
    EXPECT_NEAR(memory.mean, 67, 1e-6);
    // GPU 1 is at 75 °C until t=30s, then 92: [27s, 32s] holds 75, 75, 75, 92, 92, 92.
    WindowStats temperature = monitor.stats(1, GpuMetric::temperature_celsius, 5);
    EXPECT_EQ(temperature.count, 6u);
    EXPECT_EQ(temperature.min, 75);
    EXPECT_EQ(temperature.max, 92);
    EXPECT_DOUBLE_EQ(temperature.mean, 83.5);
    // A window of 0 holds the latest sample only.
    WindowStats power = monitor.stats(0, GpuMetric::power_watts, 0);
    EXPECT_EQ(power.count, 1u);
    EXPECT_EQ(power.mean, 400.5);
    EXPECT_EQ(monitor.stats(1, GpuMetric::memory_busy_percent, 1e9).count, 33u);
    // GPU 1 cannot report its utilisation: no samples, not zeros.
    const WindowStats util = monitor.stats(1, GpuMetric::utilization_percent, 60);
    EXPECT_EQ(util.count, 0u);
    EXPECT_EQ(monitor.stats(9, GpuMetric::temperature_celsius, 60).count, 0u);
}

// -------------------------------------------------------------- publish

TEST(GpuMonitor, PublishSetsTheMaximumAcrossGpusAndPerGpuNamesItKnows) {
    Simulated sim;
    GpuMonitor monitor(sim.probe());
    auto symbols = std::make_shared<Symbols>();
    for (const char* name : {"gpu_memory", "gpu_memory_busy", "gpu_util", "gpu_temperature", "gpu_power", "gpu0.memory",
                             "gpu1.memory_busy", "gpu1.temperature", "gpu1.util", "gpu7.memory", "gpu_fan", "other"})
        symbols->slot(name);
    symbols->declare("gpu0.power", Type::integer);
    Context context(symbols);
    context.set("gpu7.memory", Value(99.0));  // no GPU 7: publish must unset it
    context.set("other", Value(1.0));
    const uint32_t names = symbols->size();

    monitor.publish(context);  // no sample yet: nothing to publish
    EXPECT_TRUE(context.get("gpu_memory").missing());
    EXPECT_TRUE(context.get("gpu7.memory").missing());

    sim.at(32);
    monitor.sample_now();
    monitor.publish(context);
    EXPECT_NEAR(context.get("gpu_memory").as_number(), 72, 1e-6);  // GPU 0: 72 %, GPU 1: 25 %
    EXPECT_EQ(context.get("gpu_memory_busy").as_number(), 60);     // GPU 1's bandwidth, not memory used
    EXPECT_EQ(context.get("gpu_util").as_number(), 90);            // GPU 1 cannot report it
    EXPECT_EQ(context.get("gpu_temperature").as_number(), 92);
    EXPECT_EQ(context.get("gpu_power").as_number(), 400.5);
    EXPECT_NEAR(context.get("gpu0.memory").as_number(), 72, 1e-6);
    EXPECT_EQ(context.get("gpu1.memory_busy").as_number(), 60);
    EXPECT_EQ(context.get("gpu1.temperature").as_number(), 92);
    EXPECT_EQ(context.get("gpu0.power"), Value(int64_t{401}));  // declared integer: rounded
    EXPECT_TRUE(context.get("gpu1.util").missing());
    EXPECT_TRUE(context.get("gpu7.memory").missing());
    EXPECT_TRUE(context.get("gpu_fan").missing());
    EXPECT_EQ(context.get("other").as_number(), 1.0);
    EXPECT_EQ(symbols->size(), names) << "publish added names the context did not know";

    // A context with none of the names is left alone, without an error.
    auto unrelated = std::make_shared<Symbols>();
    unrelated->slot("file_type");
    Context plain(unrelated);
    EXPECT_NO_THROW(monitor.publish(plain));
    EXPECT_EQ(unrelated->size(), 1u);

    auto wrong = std::make_shared<Symbols>();
    wrong->declare("gpu_temperature", Type::string);
    Context wrong_context(wrong);
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { monitor.publish(wrong_context); }),
                HasSubstr("variable 'gpu_temperature' is declared string"));
}

// ---------------------------------------------- sampler thread and hangs

// A backend the test controls: one GPU at a fixed temperature, or a read
// that hangs until released, or one that fails.
struct Gate {
    std::mutex mutex;
    std::condition_variable released_cv;
    enum class Mode { answer, hang, fail } mode = Mode::answer;
    bool released = false;
    std::atomic<int> reads{0};

    void set(Mode m) {
        std::lock_guard lock(mutex);
        mode = m;
    }
    void release() {
        std::lock_guard lock(mutex);
        released = true;
        released_cv.notify_all();
    }
};

class GatedBackend final : public GpuBackend {
public:
    explicit GatedBackend(std::shared_ptr<Gate> gate) : gate_(std::move(gate)) {}
    std::string name() const override { return "gated"; }
    std::vector<GpuReading> read(double) override {
        ++gate_->reads;
        std::unique_lock lock(gate_->mutex);
        if (gate_->mode == Gate::Mode::hang) gate_->released_cv.wait(lock, [&] { return gate_->released; });
        if (gate_->mode == Gate::Mode::fail) throw Error(Errc::unavailable, "the driver said no");
        GpuReading gpu;
        gpu.temperature_celsius = Reading<double>::of(60);
        return {gpu};
    }

private:
    std::shared_ptr<Gate> gate_;
};

// Releases a hung backend when the test ends, pass or fail, so its thread
// can finish.
struct ReleaseAtExit {
    std::shared_ptr<Gate> gate;
    ~ReleaseAtExit() { gate->release(); }
};

GpuProbe gated_probe(const std::shared_ptr<Gate>& gate, double deadline) {
    ProbeOptions options;
    options.deadline_seconds = deadline;
    return GpuProbe(std::make_unique<GatedBackend>(gate), options);
}

TEST(GpuMonitor, StaleSamplesBecomeLatestButAreNotCountedAgain) {
    auto gate = std::make_shared<Gate>();
    ReleaseAtExit release{gate};
    GpuMonitor monitor(gated_probe(gate, 0.1));
    EXPECT_FALSE(monitor.sample_now().stale);
    gate->set(Gate::Mode::fail);
    const GpuSample failed = monitor.sample_now();
    EXPECT_TRUE(failed.stale);
    EXPECT_EQ(failed.health, ProbeHealth::failed);
    gate->set(Gate::Mode::hang);
    const GpuSample late = monitor.sample_now();
    EXPECT_TRUE(late.stale);
    EXPECT_EQ(late.health, ProbeHealth::unresponsive);
    ASSERT_TRUE(monitor.latest());
    EXPECT_TRUE(monitor.latest()->stale);
    EXPECT_EQ(monitor.history(0).size(), 1u);
    EXPECT_EQ(monitor.stats(0, GpuMetric::temperature_celsius, 1e9).count, 1u);
}

TEST(GpuMonitor, StartCollectsSamplesAndStopEndsThem) {
    GpuMonitor monitor(GpuProbe::open("file:" + monitor_data("ramp.yaml").string()), interval(0.01));
    EXPECT_FALSE(monitor.running());
    monitor.start();
    monitor.start();  // already running: nothing changes
    EXPECT_TRUE(monitor.running());
    const auto begin = Clock::now();
    while (monitor.history(0).size() < 3 && seconds_since(begin) < 30)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    monitor.stop();
    EXPECT_FALSE(monitor.running());
    const auto kept = monitor.history(0);
    ASSERT_GE(kept.size(), 3u);
    for (std::size_t i = 1; i < kept.size(); ++i) EXPECT_LE(kept[i - 1].first, kept[i].first);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(monitor.history(0).size(), kept.size()) << "samples were taken after stop()";
    monitor.stop();  // stopping twice is harmless
}

TEST(GpuMonitor, StopDoesNotWaitForTheNextInterval) {
    GpuMonitor monitor(GpuProbe::open("file:" + monitor_data("ramp.yaml").string()), interval(3600));
    monitor.start();
    const auto begin = Clock::now();
    while (!monitor.latest() && seconds_since(begin) < 30) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(monitor.latest());
    const auto stopping = Clock::now();
    monitor.stop();
    EXPECT_LT(seconds_since(stopping), 60) << "stop() waited for the hour-long interval";
}

TEST(GpuMonitor, ABackendThatHangsDoesNotBlockStopBeyondTheDeadline) {
    auto gate = std::make_shared<Gate>();
    gate->set(Gate::Mode::hang);
    ReleaseAtExit release{gate};
    constexpr double kDeadline = 0.3;
    auto monitor = std::make_unique<GpuMonitor>(gated_probe(gate, kDeadline), interval(0.01));
    monitor->start();
    const auto begin = Clock::now();
    while (gate->reads == 0 && seconds_since(begin) < 30) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(gate->reads, 1);
    const auto stopping = Clock::now();
    monitor->stop();
    const double waited = seconds_since(stopping);
    // The sampler was inside a query that never returns; stop() waits for
    // the probe to give up on it, no longer (the bound leaves room for a
    // loaded machine, far below "forever").
    EXPECT_LT(waited, kDeadline + 5) << "stop() blocked on the hung backend";
    ASSERT_TRUE(monitor->latest());
    EXPECT_EQ(monitor->latest()->health, ProbeHealth::unresponsive);
    EXPECT_THAT(monitor->latest()->error, HasSubstr("did not answer within 0.3s"));
    EXPECT_TRUE(monitor->latest()->stale);
    // Destroying the monitor (and its probe) does not wait for the query either.
    const auto destroying = Clock::now();
    monitor.reset();
    EXPECT_LT(seconds_since(destroying), 5);
}

}  // namespace
}  // namespace cohort::test
