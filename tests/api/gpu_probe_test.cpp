// GpuProbe: choosing a backend, and never hanging the caller whatever the
// backend does; plus the sample types (states, JSON, memory percentage).
#include "support.hpp"

#include <cohort/error.hpp>
#include <cohort/gpu_probe.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace cohort::test {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using SteadyClock = std::chrono::steady_clock;

constexpr uint64_t GiB = uint64_t{1} << 30;
// Scheduling slack on a loaded machine; the probe itself promises 50 ms.
constexpr auto kSlack = milliseconds(900);

// A gate a fake backend waits at until the test opens it. Shared, because a
// worker thread may still wait at it after the probe and the test are gone.
struct Gate {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
    void release() {
        std::lock_guard lock(mutex);
        open = true;
        cv.notify_all();
    }
    void wait() {
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return open; });
    }
};

GpuReading gpu_with_memory(uint32_t index, uint64_t used) {
    GpuReading g;
    g.index = index;
    g.memory_total_bytes = Reading<uint64_t>::of(80 * GiB);
    g.memory_used_bytes = Reading<uint64_t>::of(used);
    return g;
}

// Each read() runs the next step of a script (the last step repeats).
class ScriptedBackend final : public GpuBackend {
public:
    using Step = std::function<std::vector<GpuReading>()>;
    explicit ScriptedBackend(std::vector<Step> steps, std::shared_ptr<std::atomic<int>> reads = {})
        : steps_(std::move(steps)), reads_(std::move(reads)) {}
    std::string name() const override { return "scripted"; }
    std::vector<GpuReading> read(double) override {
        const std::size_t i = std::min(next_++, steps_.size() - 1);
        if (reads_) ++*reads_;
        return steps_[i]();
    }

private:
    std::vector<Step> steps_;
    std::size_t next_ = 0;
    std::shared_ptr<std::atomic<int>> reads_;
};

ProbeOptions with_deadline(double seconds) {
    ProbeOptions o;
    o.deadline_seconds = seconds;
    return o;
}

// Samples until `done` holds or 10 s pass (a stuck worker finishing).
GpuSample sample_until(GpuProbe& probe, const std::function<bool(const GpuSample&)>& done) {
    const auto give_up = SteadyClock::now() + std::chrono::seconds(10);
    GpuSample s = probe.sample();
    while (!done(s) && SteadyClock::now() < give_up) {
        std::this_thread::sleep_for(milliseconds(10));
        s = probe.sample();
    }
    return s;
}

TEST(GpuProbe, FileBackendSamples) {
    const auto path = data_path("gpu/file/hang.yaml");
    ProbeOptions options;
    auto now = std::make_shared<std::atomic<double>>(500.0);
    options.clock = [now] { return now->load(); };
    GpuProbe probe = GpuProbe::open("file:" + path.string(), options);
    EXPECT_EQ(probe.backend(), "file:" + path.string());
    ASSERT_EQ(probe.selection().size(), 1u);
    EXPECT_EQ(probe.selection()[0].backend, "file:" + path.string());
    EXPECT_TRUE(probe.selection()[0].chosen);
    now->store(501);
    const GpuSample s = probe.sample();
    EXPECT_EQ(s.backend, "file:" + path.string());
    EXPECT_EQ(s.health, ProbeHealth::ok);
    EXPECT_FALSE(s.stale);
    EXPECT_EQ(s.error, "");
    EXPECT_EQ(s.time, 501.0);
    EXPECT_GE(s.latency_seconds, 0.0);
    ASSERT_EQ(s.gpus.size(), 1u);
    EXPECT_EQ(s.gpus[0].memory_used_bytes.get(), 10 * GiB);
}

TEST(GpuProbe, HangIsUnresponsiveWithinTheDeadlineThenRecovers) {
    const auto path = data_path("gpu/file/hang.yaml");
    // Deadlines well above scheduling noise, so that only the hang misses one.
    ProbeOptions options = with_deadline(0.4);
    auto now = std::make_shared<std::atomic<double>>(0.0);
    options.clock = [now] { return now->load(); };
    GpuProbe probe = GpuProbe::open("file:" + path.string(), options);
    now->store(5);
    ASSERT_EQ(probe.sample().gpus.at(0).memory_used_bytes.get(), 20 * GiB);

    // At 10s the backend stops answering for 1.5 s.
    now->store(10);
    auto begin = SteadyClock::now();
    GpuSample s = probe.sample();
    EXPECT_LT(SteadyClock::now() - begin, milliseconds(400) + kSlack);
    EXPECT_EQ(s.health, ProbeHealth::unresponsive);
    EXPECT_TRUE(s.stale);
    EXPECT_EQ(s.error, "file:" + path.string() + " did not answer within 0.4s");
    EXPECT_EQ(s.time, 10.0);
    ASSERT_EQ(s.gpus.size(), 1u);
    EXPECT_EQ(s.gpus[0].memory_used_bytes.get(), 20 * GiB);  // the last good readings

    // While it is stuck, samples answer at once without queueing more work.
    begin = SteadyClock::now();
    s = probe.sample();
    EXPECT_LT(SteadyClock::now() - begin, kSlack);
    EXPECT_EQ(s.health, ProbeHealth::unresponsive);
    EXPECT_THAT(s.error, HasSubstr("is still running"));
    EXPECT_EQ(s.gpus.at(0).memory_used_bytes.get(), 20 * GiB);

    now->store(12);
    s = sample_until(probe, [](const GpuSample& x) { return x.health == ProbeHealth::ok; });
    EXPECT_EQ(s.health, ProbeHealth::ok);
    EXPECT_FALSE(s.stale);
    EXPECT_EQ(s.gpus.at(0).memory_used_bytes.get(), 30 * GiB);

    // A backend that answers with an error: failed, with the last good readings.
    now->store(20);
    s = probe.sample();
    EXPECT_EQ(s.health, ProbeHealth::failed);
    EXPECT_TRUE(s.stale);
    EXPECT_EQ(s.error, "simulated driver error");
    EXPECT_EQ(s.gpus.at(0).memory_used_bytes.get(), 30 * GiB);
}

TEST(GpuProbe, ALateResultBecomesTheLastGoodSample) {
    auto gate = std::make_shared<Gate>();
    auto reads = std::make_shared<std::atomic<int>>(0);
    std::vector<ScriptedBackend::Step> script = {
        [] { return std::vector<GpuReading>{gpu_with_memory(0, 1 * GiB)}; },
        [gate] {
            gate->wait();
            GpuReading g = gpu_with_memory(0, 2 * GiB);
            g.xid_events.push_back({79, 1.5, "fell off the bus"});
            return std::vector<GpuReading>{g};
        },
        []() -> std::vector<GpuReading> { throw Error(Errc::unavailable, "broken"); },
    };
    GpuProbe probe(std::make_unique<ScriptedBackend>(script, reads), with_deadline(0.3));
    EXPECT_EQ(probe.sample().gpus.at(0).memory_used_bytes.get(), 1 * GiB);
    GpuSample s = probe.sample();
    EXPECT_EQ(s.health, ProbeHealth::unresponsive);
    EXPECT_EQ(s.error, "scripted did not answer within 0.3s");
    EXPECT_EQ(s.gpus.at(0).memory_used_bytes.get(), 1 * GiB);
    s = probe.sample();  // still stuck: no new read queued
    EXPECT_EQ(s.health, ProbeHealth::unresponsive);
    EXPECT_EQ(reads->load(), 2);

    gate->release();
    s = sample_until(probe, [](const GpuSample& x) { return x.health != ProbeHealth::unresponsive; });
    EXPECT_EQ(s.health, ProbeHealth::failed);
    EXPECT_EQ(s.error, "broken");
    ASSERT_EQ(s.gpus.size(), 1u);
    EXPECT_EQ(s.gpus[0].memory_used_bytes.get(), 2 * GiB);
    // Nobody saw the late result's Xid: the next sample carries it, once.
    ASSERT_EQ(s.gpus[0].xid_events.size(), 1u);
    EXPECT_EQ(s.gpus[0].xid_events[0].xid, 79u);
    s = probe.sample();
    EXPECT_EQ(s.health, ProbeHealth::failed);
    EXPECT_TRUE(s.gpus.at(0).xid_events.empty());
}

TEST(GpuProbe, XidEventsAreNotRepeatedInStaleSamples) {
    std::vector<ScriptedBackend::Step> script = {
        [] {
            GpuReading g = gpu_with_memory(0, 1 * GiB);
            g.xid_events.push_back({48, 1.0, ""});
            return std::vector<GpuReading>{g};
        },
        []() -> std::vector<GpuReading> { throw Error(Errc::unavailable, "broken"); },
    };
    GpuProbe probe(std::make_unique<ScriptedBackend>(script), with_deadline(1));
    EXPECT_EQ(probe.sample().gpus.at(0).xid_events.size(), 1u);
    const GpuSample s = probe.sample();
    EXPECT_EQ(s.health, ProbeHealth::failed);
    EXPECT_TRUE(s.gpus.at(0).xid_events.empty());
}

TEST(GpuProbe, ExceptionsOfAnyKindAreFailures) {
    std::vector<ScriptedBackend::Step> script = {
        []() -> std::vector<GpuReading> { throw std::runtime_error("odd"); },
        []() -> std::vector<GpuReading> { throw 42; },
    };
    GpuProbe probe(std::make_unique<ScriptedBackend>(script), with_deadline(1));
    GpuSample s = probe.sample();
    EXPECT_EQ(s.health, ProbeHealth::failed);
    EXPECT_EQ(s.error, "odd");
    EXPECT_TRUE(s.gpus.empty());  // no good sample yet
    s = probe.sample();
    EXPECT_EQ(s.health, ProbeHealth::failed);
    EXPECT_THAT(s.error, HasSubstr("not an exception"));
}

TEST(GpuProbe, DestructorDoesNotWaitForABackendStuckForever) {
    auto gate = std::make_shared<Gate>();
    std::vector<ScriptedBackend::Step> script = {[gate] {
        gate->wait();
        return std::vector<GpuReading>{};
    }};
    auto probe = std::make_unique<GpuProbe>(std::make_unique<ScriptedBackend>(script), with_deadline(0.05));
    EXPECT_EQ(probe->sample().health, ProbeHealth::unresponsive);
    const auto begin = SteadyClock::now();
    probe.reset();
    EXPECT_LT(SteadyClock::now() - begin, kSlack);
    // Let the stranded worker finish into the state it owns (under ASan this
    // proves it touches nothing the probe freed).
    gate->release();
    std::this_thread::sleep_for(milliseconds(50));
}

TEST(GpuProbe, ConcurrentCallersShareAQuery) {
    auto reads = std::make_shared<std::atomic<int>>(0);
    std::vector<ScriptedBackend::Step> script = {[] {
        std::this_thread::sleep_for(milliseconds(100));
        return std::vector<GpuReading>{gpu_with_memory(0, GiB)};
    }};
    GpuProbe probe(std::make_unique<ScriptedBackend>(script, reads), with_deadline(5));
    GpuSample a, b;
    std::thread other([&] { a = probe.sample(); });
    b = probe.sample();
    other.join();
    EXPECT_EQ(a.health, ProbeHealth::ok);
    EXPECT_EQ(b.health, ProbeHealth::ok);
    EXPECT_LE(reads->load(), 2);
}

TEST(GpuProbe, MovedProbeKeepsWorking) {
    GpuProbe a = GpuProbe::open("none");
    GpuProbe b = std::move(a);
    EXPECT_EQ(b.sample().backend, "none");
    a = std::move(b);
    EXPECT_EQ(a.sample().health, ProbeHealth::ok);
}

TEST(GpuProbe, BadDeadlineOrNoBackend) {
    EXPECT_EQ(error_message(Errc::invalid_argument, [] { GpuProbe::open("none", with_deadline(0)); }),
              "deadline_seconds must be more than 0 and at most 86400, got 0");
    EXPECT_EQ(error_message(Errc::invalid_argument, [] { GpuProbe(nullptr, {}); }),
              "GpuProbe needs a backend, got none");
}

TEST(GpuProbeSelection, AutoFallsBackToNoneWithAReasonForEachRejection) {
    ProbeOptions options = with_deadline(1);
    options.nvml_library = "libcohort-test-no-such-nvml.so.1";
    options.smi_command = "/nonexistent/cohort-test/nvidia-smi";
    GpuProbe probe = GpuProbe::open("auto", options);
    EXPECT_EQ(probe.backend(), "none");
    const auto& choices = probe.selection();
    ASSERT_EQ(choices.size(), 3u);
    EXPECT_EQ(choices[0].backend, "nvml");
    EXPECT_FALSE(choices[0].chosen);
    EXPECT_THAT(choices[0].reason, StartsWith("libcohort-test-no-such-nvml.so.1 not found"));
    EXPECT_EQ(choices[1].backend, "nvidia-smi");
    EXPECT_FALSE(choices[1].chosen);
    EXPECT_THAT(choices[1].reason, HasSubstr("nvidia-smi"));
    EXPECT_EQ(choices[2].backend, "none");
    EXPECT_TRUE(choices[2].chosen);
    EXPECT_EQ(choices[2].reason, "");
    const GpuSample s = probe.sample();
    EXPECT_EQ(s.backend, "none");
    EXPECT_EQ(s.health, ProbeHealth::ok);
    EXPECT_TRUE(s.gpus.empty());
}

TEST(GpuProbeSelection, AutoOnThisMachine) {
    GpuProbe probe = GpuProbe::open("auto");
    const auto& choices = probe.selection();
    ASSERT_FALSE(choices.empty());
    EXPECT_TRUE(choices.back().chosen);
    EXPECT_EQ(choices.back().backend, probe.backend());
    for (std::size_t i = 0; i + 1 < choices.size(); ++i) {
        EXPECT_FALSE(choices[i].chosen);
        EXPECT_FALSE(choices[i].reason.empty()) << choices[i].backend;
    }
    if (probe.backend() == "none") {
        ASSERT_EQ(choices.size(), 3u);
        EXPECT_THAT(choices[0].reason, StartsWith("libnvidia-ml.so.1 "));
    }
    EXPECT_NE(probe.sample().health, ProbeHealth::unresponsive);
}

TEST(GpuProbeSelection, NamedBackendsThrowTheReason) {
    ProbeOptions options = with_deadline(1);
    options.nvml_library = "libcohort-test-no-such-nvml.so.1";
    options.smi_command = "/nonexistent/cohort-test/nvidia-smi";
    EXPECT_THAT(error_message(Errc::unavailable, [&] { GpuProbe::open("nvml", options); }),
                StartsWith("libcohort-test-no-such-nvml.so.1 not found"));
    EXPECT_THAT(error_message(Errc::unavailable, [&] { GpuProbe::open("smi", options); }), HasSubstr("nvidia-smi"));
    const std::string bad_file = "file:" + data_path("gpu/file/bad/version.yaml").string();
    EXPECT_THAT(error_message(Errc::parse, [&] { GpuProbe::open(bad_file); }), HasSubstr("unsupported version 2"));
    EXPECT_EQ(GpuProbe::open("none").selection().at(0).backend, "none");
}

TEST(GpuProbeSelection, UnknownSpecListsTheValidOnes) {
    EXPECT_EQ(error_message(Errc::invalid_argument, [] { GpuProbe::open("cuda"); }),
              "unknown GPU backend 'cuda' (expected auto, nvml, smi, file:PATH or none)");
    EXPECT_EQ(error_message(Errc::invalid_argument, [] { GpuProbe::open("file:"); }),
              "GPU backend 'file:' needs a path: file:PATH");
}

TEST(GpuSample, MemoryUsedPercent) {
    GpuReading g = gpu_with_memory(0, 20 * GiB);
    EXPECT_EQ(g.memory_used_percent().get(), 25.0);
    g.memory_used_bytes = {};
    EXPECT_EQ(g.memory_used_percent().state, FieldState::not_available);
    g.memory_used_bytes = Reading<uint64_t>::unsupported();
    EXPECT_EQ(g.memory_used_percent().state, FieldState::not_supported);
    g = gpu_with_memory(0, 0);
    g.memory_total_bytes = Reading<uint64_t>::of(0);
    EXPECT_EQ(g.memory_used_percent().state, FieldState::not_available);
}

TEST(GpuSample, StateNames) {
    EXPECT_EQ(to_string(ProbeHealth::ok), "ok");
    EXPECT_EQ(to_string(ProbeHealth::unresponsive), "unresponsive");
    EXPECT_EQ(to_string(ProbeHealth::failed), "failed");
    EXPECT_EQ(to_string(FieldState::ok), "ok");
    EXPECT_EQ(to_string(FieldState::not_supported), "not_supported");
    EXPECT_EQ(to_string(FieldState::not_available), "not_available");
}

TEST(GpuSample, ToJsonShape) {
    GpuSample s;
    s.time = 1700000000.5;
    s.backend = "file:x.yaml";
    s.health = ProbeHealth::unresponsive;
    s.stale = true;
    s.error = "x did not answer within 2s";
    s.latency_seconds = 2.05;
    GpuReading g = gpu_with_memory(1, 20 * GiB);
    g.uuid = "GPU-1";
    g.name = "H100";
    g.power_draw_watts = Reading<double>::of(120.5);
    g.fan_percent = Reading<double>::unsupported();
    g.sm_clock_mhz = Reading<uint32_t>::of(1980);
    g.mig_enabled = Reading<bool>::of(true);
    g.processes_state = FieldState::ok;
    g.processes.push_back({42, "python", Reading<uint64_t>::of(GiB)});
    g.mig_instances.push_back({1, 0, "MIG-1", Reading<uint64_t>::of(40 * GiB), {}});
    g.xid_events.push_back({79, 12.5, "fell off the bus"});
    s.gpus.push_back(g);
    GpuReading h;
    h.processes_state = FieldState::not_supported;
    s.gpus.push_back(h);

    // Keys come out in a fixed order; numbers are checked where their text
    // does not depend on how the JSON library spells a double.
    const std::string json = s.to_json();
    EXPECT_THAT(json, StartsWith(R"({"time":)"));
    EXPECT_THAT(json, HasSubstr(R"("backend":"file:x.yaml","health":"unresponsive","stale":true,)"
                                R"("error":"x did not answer within 2s","latency_seconds":)"));
    EXPECT_THAT(json, HasSubstr(R"("gpus":[{"index":1,"uuid":"GPU-1","name":"H100","pci_bus_id":"",)"
                                R"("memory_total_bytes":85899345920,"memory_used_bytes":21474836480,)"
                                R"("memory_free_bytes":{"state":"not_available"},"memory_used_percent":)"));
    EXPECT_THAT(json, HasSubstr(R"("temperature_celsius":{"state":"not_available"},"power_draw_watts":)"));
    EXPECT_THAT(json, HasSubstr(R"("sm_clock_mhz":1980,"memory_clock_mhz":{"state":"not_available"},)"
                                R"("fan_percent":{"state":"not_supported"},)"));
    EXPECT_THAT(json, HasSubstr(R"("mig_enabled":true,"processes":[{"pid":42,"name":"python",)"
                                R"("memory_bytes":1073741824}],"mig_instances":[{"gpu_instance":1,)"
                                R"("compute_instance":0,"uuid":"MIG-1","memory_total_bytes":42949672960,)"
                                R"("memory_used_bytes":{"state":"not_available"}}],"xid_events":[{"xid":79,"time":)"));
    EXPECT_THAT(json, HasSubstr(R"("detail":"fell off the bus"}]})"));
    // The second GPU: nothing known, every field a state.
    EXPECT_THAT(json, HasSubstr(R"("memory_used_percent":{"state":"not_available"},)"
                                R"("gpu_utilization_percent":{"state":"not_available"},)"));
    EXPECT_THAT(json, HasSubstr(R"("processes":{"state":"not_supported"},"mig_instances":[],"xid_events":[]}]})"));
}

}  // namespace
}  // namespace cohort::test
