// TransferScheduler: reads of real temporary files into buffers and a
// staging directory, errors that name the file and offset, ordering with
// aging, each rule action changing what the scheduler does (through plain
// policies and through a GpuMonitor over a simulated GPU), explanations,
// deadlines, the workload registry, and the metrics.
#include "support.hpp"

#include <cohort/gpu_monitor.hpp>
#include <cohort/transfers.hpp>
#include <cohort/workloads.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace cohort::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A temporary directory with a data file whose byte i is i % 251.
class TempFiles {
public:
    TempFiles() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = std::filesystem::temp_directory_path() /
               ("cohort-transfers-" + std::to_string(::getpid()) + "-" + info->name());
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_ / "staging");
        std::ofstream out(data(), std::ios::binary);
        for (int i = 0; i < kSize; ++i) out.put(static_cast<char>(i % 251));
    }
    ~TempFiles() { std::filesystem::remove_all(dir_); }
    std::filesystem::path data() const { return dir_ / "data.bin"; }
    std::filesystem::path staging() const { return dir_ / "staging"; }
    std::filesystem::path dir() const { return dir_; }
    static constexpr int kSize = 64 * 1024;

private:
    std::filesystem::path dir_;
};

bool holds_range(std::span<const std::byte> bytes, uint64_t offset) {
    for (std::size_t i = 0; i < bytes.size(); ++i)
        if (bytes[i] != static_cast<std::byte>((offset + i) % 251)) return false;
    return true;
}

std::vector<std::byte> file_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> out(chars.size());
    std::memcpy(out.data(), chars.data(), chars.size());
    return out;
}

// A gate the tests close to keep I/O threads busy in on_done callbacks.
struct Gate {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
    int inside = 0;

    void pass() {
        std::unique_lock lock(mutex);
        ++inside;
        cv.notify_all();
        cv.wait(lock, [&] { return open; });
        --inside;
    }
    void release() {
        std::lock_guard lock(mutex);
        open = true;
        cv.notify_all();
    }
    // Waits (at most 2 s) until `n` callbacks are inside; returns how many are.
    int wait_inside(int n) {
        std::unique_lock lock(mutex);
        cv.wait_for(lock, 2s, [&] { return inside >= n; });
        return inside;
    }
    int count() {
        std::lock_guard lock(mutex);
        return inside;
    }
};

// The order in which transfers finished.
struct Order {
    std::mutex mutex;
    std::vector<std::string> ids;
    std::function<void(const TransferResult&)> note() {
        return [this](const TransferResult& r) {
            std::lock_guard lock(mutex);
            ids.push_back(r.id);
        };
    }
    std::vector<std::string> get() {
        std::lock_guard lock(mutex);
        return ids;
    }
};

struct Fixture {
    TempFiles files;
    std::vector<std::vector<std::byte>> buffers;

    TransferRequest read(std::string id, uint64_t offset, uint64_t length, int priority = 0) {
        buffers.emplace_back(length);
        TransferRequest r;
        r.id = std::move(id);
        r.workload = "train";
        r.path = files.data();
        r.offset = offset;
        r.length = length;
        r.priority = priority;
        r.buffer = buffers.back();
        return r;
    }
    Fixture() { buffers.reserve(64); }
};

const TransferDecision* find_decision(const std::vector<TransferDecision>& decisions, std::string_view action) {
    for (const auto& d : decisions)
        if (d.action == action) return &d;
    return nullptr;
}

// Holds the single I/O thread in a callback until the gate opens, so that
// what is submitted meanwhile queues up.
std::future<TransferResult> occupy(TransferScheduler& scheduler, Fixture& f, Gate& gate) {
    TransferRequest blocker = f.read("blocker", 0, 16);
    blocker.on_done = [&gate](const TransferResult&) { gate.pass(); };
    auto future = scheduler.submit(std::move(blocker));
    EXPECT_EQ(gate.wait_inside(1), 1);
    return future;
}

// ---------------------------------------------------------------- reading

TEST(TransferScheduler, ReadsByteRangesOfARealFileIntoBuffers) {
    Fixture f;
    TransferScheduler scheduler(TransferOptions{.workers = 3});
    std::vector<std::future<TransferResult>> futures;
    for (int i = 0; i < 12; ++i)
        futures.push_back(scheduler.submit(f.read("t" + std::to_string(i), 1000 * i + 7, 4096)));
    for (int i = 0; i < 12; ++i) {
        const TransferResult r = futures[i].get();
        EXPECT_EQ(r.code, Errc::ok) << r.error;
        EXPECT_EQ(r.id, "t" + std::to_string(i));
        EXPECT_EQ(r.bytes, 4096u);
        EXPECT_TRUE(holds_range(f.buffers[i], 1000 * i + 7)) << r.id;
        EXPECT_TRUE(r.staged.empty());
    }
    const TransferStats stats = scheduler.stats();
    EXPECT_EQ(stats.submitted, 12u);
    EXPECT_EQ(stats.completed, 12u);
    EXPECT_EQ(stats.bytes, 12u * 4096);
    EXPECT_GT(stats.bytes_per_second, 0);
    EXPECT_EQ(stats.queued, 0u);
    EXPECT_EQ(stats.running, 0u);
}

TEST(TransferScheduler, CopiesIntoTheStagingDirectoryWhenAsked) {
    Fixture f;
    TransferScheduler scheduler(TransferOptions{.staging_dir = f.files.staging()});
    TransferRequest r = f.read("ckpt/part 1", 100, 3000);
    r.buffer = {};
    r.stage = true;
    const TransferResult result = scheduler.submit(std::move(r)).get();
    ASSERT_EQ(result.code, Errc::ok) << result.error;
    EXPECT_EQ(result.staged.parent_path(), f.files.staging());
    EXPECT_THAT(result.staged.filename().string(), HasSubstr("ckpt_part_1"));
    const auto bytes = file_bytes(result.staged);
    EXPECT_EQ(bytes.size(), 3000u);
    EXPECT_TRUE(holds_range(bytes, 100));
    EXPECT_EQ(scheduler.stats().staged, 1u);
}

TEST(TransferScheduler, ACallbackSeesTheResultBeforeTheFuture) {
    Fixture f;
    TransferScheduler scheduler;
    std::promise<uint64_t> seen;
    TransferRequest r = f.read("a", 0, 10);
    r.on_done = [&seen](const TransferResult& result) { seen.set_value(result.bytes); };
    auto future = scheduler.submit(std::move(r));
    EXPECT_EQ(future.get().bytes, 10u);
    EXPECT_EQ(seen.get_future().get(), 10u);
}

// ---------------------------------------------------------------- errors

TEST(TransferScheduler, AFailedReadNamesTheFileAndTheOffset) {
    Fixture f;
    TransferScheduler scheduler;
    TransferRequest missing = f.read("missing", 512, 10);
    missing.path = f.files.dir() / "nope.bin";
    const TransferResult r = scheduler.submit(std::move(missing)).get();
    EXPECT_EQ(r.code, Errc::io);
    EXPECT_THAT(r.error, HasSubstr("transfer 'missing': " + (f.files.dir() / "nope.bin").string() +
                                   " at offset 512: cannot open: No such file or directory"));

    const TransferResult past = scheduler.submit(f.read("past", TempFiles::kSize - 100, 300)).get();
    EXPECT_EQ(past.code, Errc::io);
    EXPECT_THAT(past.error, HasSubstr(f.files.data().string() + " at offset " + std::to_string(TempFiles::kSize - 100) +
                                      ": the file ends after 100 of the 300 bytes asked for"));
    EXPECT_EQ(scheduler.stats().failed, 2u);
}

TEST(TransferScheduler, BadRequestsNameTheField) {
    Fixture f;
    TransferScheduler scheduler;
    const auto refused = [&](TransferRequest r) {
        return error_message(Errc::invalid_argument, [&] { scheduler.submit(std::move(r)); });
    };
    EXPECT_THAT(refused(f.read("", 0, 10)), HasSubstr("id is empty"));
    TransferRequest r = f.read("x", 0, 10);
    r.path.clear();
    EXPECT_THAT(refused(r), HasSubstr("transfer 'x': path is empty"));
    EXPECT_THAT(refused(f.read("x", 0, 0)), HasSubstr("transfer 'x': length is 0"));
    r = f.read("x", 0, 10);
    r.buffer = r.buffer.first(5);
    EXPECT_THAT(refused(r), HasSubstr("buffer holds 5 bytes, fewer than length 10"));
    r = f.read("x", 0, 10);
    r.buffer = {};
    EXPECT_THAT(refused(r), HasSubstr("no destination"));
    r.stage = true;
    EXPECT_THAT(refused(r), HasSubstr("stage is set, but the scheduler has no staging_dir"));
    EXPECT_THAT(refused(f.read("x", UINT64_MAX - 5, 10)), HasSubstr("past the largest file offset"));

    Gate gate;
    auto blocker = occupy(scheduler, f, gate);
    EXPECT_THAT(refused(f.read("blocker", 0, 10)), HasSubstr("already queued or running"));
    gate.release();
    blocker.get();
    EXPECT_EQ(scheduler.submit(f.read("blocker", 0, 10)).get().code, Errc::ok);  // free again once done
}

TEST(TransferScheduler, BadOptionsNameTheOption) {
    const auto refused = [](TransferOptions o) {
        return error_message(Errc::invalid_argument, [&] { TransferScheduler s(std::move(o)); });
    };
    EXPECT_THAT(refused(TransferOptions{.workers = 0}), HasSubstr("workers must be 1 to 256 I/O threads, got 0"));
    EXPECT_THAT(refused(TransferOptions{.aging_per_second = 0}), HasSubstr("aging_per_second must be more than 0"));
    EXPECT_THAT(refused(TransferOptions{.prefetch_depth = 0}), HasSubstr("prefetch_depth must be at least 1"));
    EXPECT_THAT(refused(TransferOptions{.staging_dir = "/nonexistent/cohort/staging"}),
                HasSubstr("staging_dir /nonexistent/cohort/staging is not a directory"));
}

TEST(TransferScheduler, ExplainingAnUnknownTransferSaysWhatIsKept) {
    TransferScheduler scheduler;
    EXPECT_THAT(error_message(Errc::not_found, [&] { scheduler.explain("ghost"); }),
                HasSubstr("no transfer 'ghost' is queued or running, nor among the last 1024 finished"));
}

TEST(TransferScheduler, ShuttingDownCompletesWhatWaitsWithAnError) {
    Fixture f;
    Gate gate;
    std::future<TransferResult> waiting;
    std::future<TransferResult> blocker;
    std::thread opener;
    {
        TransferScheduler scheduler(TransferOptions{.workers = 1});
        blocker = occupy(scheduler, f, gate);
        waiting = scheduler.submit(f.read("waiting", 0, 10));
        opener = std::thread([&gate] {
            std::this_thread::sleep_for(50ms);
            gate.release();
        });
    }
    opener.join();
    EXPECT_EQ(blocker.get().code, Errc::ok);  // started: it ran to the end
    const TransferResult r = waiting.get();
    EXPECT_EQ(r.code, Errc::closed);
    EXPECT_THAT(r.error, HasSubstr("transfer 'waiting': the scheduler shut down before it started"));
}

// ---------------------------------------------------------------- ordering

TEST(TransferScheduler, RunsTheHighestPriorityFirst) {
    Fixture f;
    TransferScheduler scheduler(TransferOptions{.workers = 1});
    Gate gate;
    Order order;
    auto blocker = occupy(scheduler, f, gate);
    std::vector<std::future<TransferResult>> futures;
    for (auto [id, priority] :
         std::vector<std::pair<std::string, int>>{{"low", 1}, {"high", 9}, {"mid", 5}, {"mid2", 5}}) {
        TransferRequest r = f.read(id, 0, 10, priority);
        r.on_done = order.note();
        futures.push_back(scheduler.submit(std::move(r)));
    }
    gate.release();
    for (auto& future : futures) future.get();
    EXPECT_THAT(order.get(), ElementsAre("high", "mid", "mid2", "low"));
    const auto decisions = scheduler.explain("high");
    const TransferDecision* dispatch = find_decision(decisions, "dispatch");
    ASSERT_NE(dispatch, nullptr);
    EXPECT_EQ(dispatch->effect, "started ahead of 1 transfer(s) queued before it");
}

TEST(TransferScheduler, AgingLetsALongWaitingTransferOvertakeAHigherPriority) {
    for (const double aging : {2000.0, 0.001}) {
        Fixture f;
        TransferScheduler scheduler(TransferOptions{.workers = 1, .aging_per_second = aging});
        Gate gate;
        Order order;
        auto blocker = occupy(scheduler, f, gate);
        TransferRequest old_one = f.read("old", 0, 10, 0);
        old_one.on_done = order.note();
        auto a = scheduler.submit(std::move(old_one));
        std::this_thread::sleep_for(60ms);  // gains >= 120 at 2000/s, nothing at 0.001/s
        TransferRequest new_one = f.read("new", 0, 10, 100);
        new_one.on_done = order.note();
        auto b = scheduler.submit(std::move(new_one));
        gate.release();
        a.get();
        b.get();
        if (aging > 1) {
            EXPECT_THAT(order.get(), ElementsAre("old", "new")) << "aging " << aging;
        } else {
            EXPECT_THAT(order.get(), ElementsAre("new", "old")) << "aging " << aging;
        }
    }
}

// ---------------------------------------------------------- rule actions

// A policy that returns `actions` for the transfers `applies` selects.
TransferPolicy policy_for(std::function<bool(const TransferFacts&)> applies, std::vector<PolicyAction> actions) {
    return [applies = std::move(applies), actions = std::move(actions)](const TransferFacts& facts) {
        return applies(facts) ? actions : std::vector<PolicyAction>{};
    };
}

TEST(TransferScheduler, DelayTransferHoldsATransfer) {
    Fixture f;
    const auto hot_until = Clock::now() + 100ms;
    PolicyAction delay{.rule = "delay_transfer_on_temperature",
                       .type = "delay_transfer",
                       .category = "thermal",
                       .delay_seconds = 0.15,
                       .values = {{"gpu_temperature", 92}}};
    TransferScheduler scheduler(TransferOptions{
        .workers = 2,
        .policy = policy_for([&](const TransferFacts& t) { return t.kind == "dataset" && Clock::now() < hot_until; },
                             {delay})});
    Order order;
    const auto start = Clock::now();
    TransferRequest held = f.read("held", 0, 100);
    held.on_done = order.note();
    auto a = scheduler.submit(std::move(held));
    TransferRequest model = f.read("model", 0, 100);
    model.kind = "model";
    model.on_done = order.note();
    auto b = scheduler.submit(std::move(model));
    const TransferResult rb = b.get();
    const TransferResult ra = a.get();
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_GE(ra.waited_seconds, 0.14);
    EXPECT_GE(took, 0.14);
    EXPECT_LT(rb.waited_seconds, 0.14);
    EXPECT_THAT(order.get(), ElementsAre("model", "held"));
    const TransferDecision* d = find_decision(ra.decisions, "delay_transfer");
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->rule, "delay_transfer_on_temperature");
    EXPECT_EQ(d->delay_seconds, 0.15);
    EXPECT_EQ(d->effect, "held for 0.15 s");
    EXPECT_THAT(d->values, ElementsAre(std::pair<std::string, double>("gpu_temperature", 92)));
    const TransferStats stats = scheduler.stats();
    EXPECT_EQ(stats.delayed, 1u);
    EXPECT_GE(stats.total_delay_seconds, 0.15);
    EXPECT_GE(stats.temperature_events, 1u);
    EXPECT_EQ(stats.memory_pressure_events, 0u);
}

TEST(TransferScheduler, PrioritizeMovesATransferToTheFront) {
    Fixture f;
    PolicyAction prioritize{
        .rule = "prioritize_model_files", .type = "prioritize", .category = "io", .values = {{"gpu_memory", 82}}};
    TransferScheduler scheduler(TransferOptions{
        .workers = 1, .policy = policy_for([](const TransferFacts& t) { return t.kind == "model"; }, {prioritize})});
    Gate gate;
    Order order;
    auto blocker = occupy(scheduler, f, gate);
    std::vector<std::future<TransferResult>> futures;
    for (const char* id : {"data1", "data2", "weights"}) {
        TransferRequest r = f.read(id, 0, 10, 10);
        if (std::string(id) == "weights") r.kind = "model";
        r.on_done = order.note();
        futures.push_back(scheduler.submit(std::move(r)));
    }
    // Its boost is decided when it is queued: explain says so before it runs.
    for (int i = 0; i < 100 && find_decision(scheduler.explain("weights"), "prioritize") == nullptr; ++i)
        std::this_thread::sleep_for(2ms);
    gate.release();
    for (auto& future : futures) future.get();
    EXPECT_THAT(order.get(), ElementsAre("weights", "data1", "data2"));
    const auto decisions = scheduler.explain("weights");
    const TransferDecision* boost = find_decision(decisions, "prioritize");
    ASSERT_NE(boost, nullptr);
    EXPECT_EQ(boost->rule, "prioritize_model_files");
    EXPECT_EQ(boost->effect, "priority 10 -> 110 (boost 100)");
    EXPECT_EQ(find_decision(decisions, "dispatch")->effect, "started ahead of 2 transfer(s) queued before it");
    EXPECT_EQ(scheduler.stats().prioritized, 1u);
}

TEST(TransferScheduler, ReducePrefetchShrinksHowManyPrefetchTransfersRun) {
    for (const double factor : {1.0, 0.5}) {
        Fixture f;
        PolicyAction reduce{.rule = "reduce_prefetch_on_memory_pressure",
                            .type = "reduce_prefetch",
                            .category = "memory",
                            .factor = factor,
                            .values = {{"gpu_memory", 90}}};
        TransferScheduler scheduler(
            TransferOptions{.workers = 5,
                            .prefetch_depth = 4,
                            .policy = policy_for([factor](const TransferFacts&) { return factor < 1; }, {reduce})});
        Gate gate;
        std::vector<std::future<TransferResult>> futures;
        for (int i = 0; i < 4; ++i) {
            TransferRequest r = f.read("ahead" + std::to_string(i), 0, 10);
            r.prefetch = true;
            r.on_done = [&gate](const TransferResult&) { gate.pass(); };
            futures.push_back(scheduler.submit(std::move(r)));
        }
        const int expected = factor < 1 ? 2 : 4;
        EXPECT_EQ(gate.wait_inside(expected), expected);
        std::this_thread::sleep_for(100ms);
        EXPECT_EQ(gate.count(), expected) << "factor " << factor;
        TransferStats stats = scheduler.stats();
        EXPECT_EQ(stats.prefetch_depth, static_cast<std::size_t>(expected));
        EXPECT_EQ(stats.queued, static_cast<std::size_t>(4 - expected));
        // A transfer the loop needs now is not held back by the prefetch depth.
        EXPECT_EQ(scheduler.submit(f.read("needed", 0, 10)).get().code, Errc::ok);
        if (factor < 1) {
            const auto decisions = scheduler.explain("ahead3");
            const TransferDecision* wait = find_decision(decisions, "reduce_prefetch");
            ASSERT_NE(wait, nullptr);
            EXPECT_EQ(wait->rule, "reduce_prefetch_on_memory_pressure");
            EXPECT_EQ(wait->effect, "prefetch depth 4 x 0.5 = 2, 2 running: waits");
            EXPECT_GE(scheduler.stats().memory_pressure_events, 1u);
        }
        gate.release();
        for (auto& future : futures) EXPECT_EQ(future.get().code, Errc::ok);
    }
}

TEST(TransferScheduler, StageTransferSendsALargeTransferToTheStagingDirectory) {
    Fixture f;
    PolicyAction stage{.rule = "stage_large_transfers",
                       .type = "stage_transfer",
                       .category = "io",
                       .values = {{"active_training", 1}, {"transfer_size", 20000}}};
    const auto large = [](const TransferFacts& t) { return t.bytes > 10000; };
    TransferScheduler scheduler(
        TransferOptions{.staging_dir = f.files.staging(), .policy = policy_for(large, {stage})});
    const TransferResult big = scheduler.submit(f.read("big", 5, 20000)).get();
    const TransferResult small = scheduler.submit(f.read("small", 5, 100)).get();
    ASSERT_EQ(big.code, Errc::ok) << big.error;
    ASSERT_FALSE(big.staged.empty());
    EXPECT_TRUE(holds_range(file_bytes(big.staged), 5));
    EXPECT_EQ(f.buffers[0], std::vector<std::byte>(20000));  // the caller's buffer is left alone
    EXPECT_TRUE(small.staged.empty());
    EXPECT_TRUE(holds_range(f.buffers[1], 5));
    const TransferDecision* d = find_decision(big.decisions, "stage_transfer");
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->rule, "stage_large_transfers");
    EXPECT_THAT(d->effect, HasSubstr("staged to " + f.files.staging().string()));

    // Without a staging directory the action is recorded and not taken.
    TransferScheduler unstaged(TransferOptions{.policy = policy_for(large, {stage})});
    const TransferResult kept = unstaged.submit(f.read("big2", 5, 20000)).get();
    EXPECT_TRUE(kept.staged.empty());
    EXPECT_TRUE(holds_range(f.buffers[2], 5));
    EXPECT_THAT(find_decision(kept.decisions, "stage_transfer")->effect, HasSubstr("not staged: no staging_dir"));
}

// ------------------------------------------- the GPU rule pack, end to end

constexpr double kStart = 1'700'000'000;

// One simulated GPU running a training process; memory passes 85 % and the
// temperature 87 °C from t=10s to t=20s.
constexpr const char* kGpus = R"(version: 1
gpus:
  - index: 0
    name: Simulated H100
    memory_total: 80GiB
    memory_used: 40GiB
    temperature: 70
    processes: [{pid: 4242, name: train, memory: 38GiB}]
timeline:
  - {at: 10s, gpu: 0, set: {memory_used: 72GiB, temperature: 92}}
  - {at: 20s, gpu: 0, set: {memory_used: 40GiB, temperature: 70}}
)";

// The shipped pack with a 150 ms delay and a 10 KB staging threshold, so a
// test can watch them act.
std::filesystem::path quick_pack(const TempFiles& files) {
    std::ifstream in(std::filesystem::path(COHORT_TEST_DATA_DEFAULT).parent_path().parent_path() / "rules" /
                     "gpu_io.yaml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto replace = [&](std::string_view from, std::string_view to) {
        const auto at = text.find(from);
        ASSERT_NE(at, std::string::npos) << from;
        text.replace(at, from.size(), to);
    };
    replace("parameters: {delay: 30s}", "parameters: {delay: 150ms}");
    replace("transfer_size > 100MB", "transfer_size > 10KB");
    const auto path = files.dir() / "gpu_io.yaml";
    std::ofstream(path) << text;
    return path;
}

TEST(TransferScheduler, TheGpuRulePackActsThroughTheMonitor) {
    Fixture f;
    std::ofstream(f.files.dir() / "gpus.yaml") << kGpus;
    auto now = std::make_shared<std::atomic<double>>(kStart);
    ProbeOptions probe_options;
    probe_options.clock = [now] { return now->load(); };
    GpuMonitor monitor(GpuProbe::open("file:" + (f.files.dir() / "gpus.yaml").string(), probe_options),
                       MonitorOptions{.rules = quick_pack(f.files)});
    monitor.sample_now();

    TransferScheduler scheduler(TransferOptions{
        .workers = 1, .prefetch_depth = 4, .staging_dir = f.files.staging(), .policy = monitor_policy(monitor)});
    // Cool and roomy: a large read is staged (training runs), nothing else.
    TransferResult r = scheduler.submit(f.read("cool", 0, 20000)).get();
    EXPECT_FALSE(r.staged.empty());
    EXPECT_EQ(find_decision(r.decisions, "delay_transfer"), nullptr);
    EXPECT_EQ(scheduler.stats().prefetch_depth, 4u);

    now->store(kStart + 10);  // 90 % memory, 92 °C
    monitor.sample_now();
    auto hot = scheduler.submit(f.read("hot", 0, 100));
    for (int i = 0; i < 100 && scheduler.stats().held == 0; ++i) std::this_thread::sleep_for(2ms);
    const TransferStats stats = scheduler.stats();
    EXPECT_EQ(stats.held, 1u);
    EXPECT_EQ(stats.prefetch_factor, 0.5);  // reduce_prefetch_on_memory_pressure
    EXPECT_EQ(stats.prefetch_depth, 2u);
    EXPECT_GE(stats.temperature_events, 1u);
    now->store(kStart + 20);  // cool again: the next look lets it go
    monitor.sample_now();
    r = hot.get();
    EXPECT_EQ(r.code, Errc::ok);
    EXPECT_GE(r.waited_seconds, 0.14);
    const TransferDecision* d = find_decision(r.decisions, "delay_transfer");
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->rule, "delay_transfer_on_temperature");
    EXPECT_EQ(d->delay_seconds, 0.15);
    EXPECT_THAT(d->values, ::testing::Contains(std::pair<std::string, double>("gpu_temperature", 92)));
    EXPECT_THAT(d->values, ::testing::Contains(std::pair<std::string, double>("gpu_memory", 90)));
    EXPECT_EQ(scheduler.stats().prefetch_factor, 1.0);
}

// The shipped thermal hold is scoped to what can wait: while the GPU is hot a
// transfer of priority 10 or more runs at once, one below it is held.
TEST(TransferScheduler, TheShippedPackHoldsOnlyLowPriorityTransfersWhileHot) {
    Fixture f;
    std::ofstream(f.files.dir() / "gpus.yaml") << kGpus;
    auto now = std::make_shared<std::atomic<double>>(kStart);
    ProbeOptions probe_options;
    probe_options.clock = [now] { return now->load(); };
    GpuMonitor monitor(GpuProbe::open("file:" + (f.files.dir() / "gpus.yaml").string(), probe_options),
                       MonitorOptions{.rules = quick_pack(f.files)});
    monitor.sample_now();  // the timeline's start
    now->store(kStart + 10);  // 90 % memory, 92 °C
    monitor.sample_now();
    TransferScheduler scheduler(TransferOptions{.workers = 2, .policy = monitor_policy(monitor)});

    TransferRequest low = f.read("low", 0, 100);
    low.priority = 9;
    auto held = scheduler.submit(std::move(low));
    TransferRequest high = f.read("high", 0, 100);
    high.priority = 10;
    high.prefetch = true;  // a prefetch of a high-priority job is not held either
    auto high_done = scheduler.submit(std::move(high));
    ASSERT_EQ(high_done.wait_for(5s), std::future_status::ready) << "the high-priority transfer was held";
    const TransferResult rh = high_done.get();
    EXPECT_EQ(rh.code, Errc::ok);
    EXPECT_EQ(find_decision(rh.decisions, "delay_transfer"), nullptr);
    EXPECT_LT(rh.waited_seconds, 0.14);

    // The low one is held while the GPU stays hot (re-held at each look),
    // and goes once it has cooled.
    for (int i = 0; i < 100 && scheduler.stats().held == 0; ++i) std::this_thread::sleep_for(2ms);
    EXPECT_EQ(scheduler.stats().held, 1u);
    EXPECT_NE(held.wait_for(200ms), std::future_status::ready);
    now->store(kStart + 20);
    monitor.sample_now();
    ASSERT_EQ(held.wait_for(10s), std::future_status::ready);
    const TransferResult rl = held.get();
    EXPECT_EQ(rl.code, Errc::ok);
    EXPECT_GE(rl.waited_seconds, 0.14);
    const TransferDecision* d = find_decision(rl.decisions, "delay_transfer");
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->rule, "delay_transfer_on_temperature");
    EXPECT_THAT(d->values, ::testing::Contains(std::pair<std::string, double>("transfer_priority", 9)));
    EXPECT_THAT(d->values, ::testing::Contains(std::pair<std::string, double>("prefetch", 0)));
    EXPECT_GE(scheduler.stats().delayed, 1u);
}

// ------------------------------------------------- deadlines and workloads

TEST(TransferScheduler, AMissedDeadlineIsCountedAndTheTransferStillRuns) {
    Fixture f;
    TransferScheduler scheduler;
    TransferRequest late = f.read("late", 0, 100);
    late.deadline = Clock::now() - 1ms;
    TransferRequest timely = f.read("timely", 0, 100);
    timely.deadline = Clock::now() + 60s;
    const TransferResult a = scheduler.submit(std::move(late)).get();
    const TransferResult b = scheduler.submit(std::move(timely)).get();
    EXPECT_EQ(a.code, Errc::ok);
    EXPECT_EQ(a.bytes, 100u);
    EXPECT_TRUE(a.missed_deadline);
    EXPECT_NE(find_decision(a.decisions, "deadline"), nullptr);
    EXPECT_FALSE(b.missed_deadline);
    EXPECT_EQ(scheduler.stats().misses, 1u);
}

TEST(TransferScheduler, TransfersServeRegisteredWorkloads) {
    Fixture f;
    std::atomic<bool> eval_alive{true};
    WorkloadRegistry registry(
        WorkloadRegistryOptions{.alive = [&](int64_t pid) { return pid != 2 || eval_alive.load(); }});
    registry.add(Workload{.id = "train", .pid = 1, .memory_bytes = 1, .priority = 50});
    registry.add(Workload{.id = "eval", .pid = 2, .memory_bytes = 1, .priority = 0});
    TransferScheduler scheduler(TransferOptions{.workers = 1, .registry = &registry});

    TransferRequest stranger = f.read("x", 0, 10);
    stranger.workload = "nobody";
    EXPECT_THAT(error_message(Errc::not_found, [&] { scheduler.submit(stranger); }),
                HasSubstr("transfer 'x': workload 'nobody' is not registered"));

    Gate gate;
    Order order;
    auto blocker = occupy(scheduler, f, gate);
    TransferRequest e = f.read("eval-read", 0, 10, 10);
    e.workload = "eval";
    e.on_done = order.note();
    auto fe = scheduler.submit(std::move(e));
    TransferRequest t = f.read("train-read", 0, 10, 0);  // 0 + the workload's 50
    t.on_done = order.note();
    auto ft = scheduler.submit(std::move(t));
    eval_alive = false;  // eval's process ends while its read waits
    gate.release();
    EXPECT_EQ(ft.get().code, Errc::ok);
    const TransferResult dropped = fe.get();
    EXPECT_EQ(dropped.code, Errc::not_found);
    EXPECT_THAT(dropped.error,
                HasSubstr("transfer 'eval-read': workload 'eval' ended (its process exited) or was removed; dropped"));
    EXPECT_THAT(order.get(), ElementsAre("train-read"));
    EXPECT_EQ(scheduler.stats().dropped, 1u);
}

}  // namespace
}  // namespace cohort::test
