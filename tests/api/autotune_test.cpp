// The tunables of a communicator (CommTuning, set_tuning) and the
// Autotuner: ranks (threads) apply the same values at the same step, a
// synthetic objective's optimum is found within the stated bound, fixed
// values never move, the time bound holds, the state file round-trips and a
// bad one is named.
#include "comm_support.hpp"
#include "support.hpp"

#include <cohort/autotune.hpp>
#include <cohort/transfers.hpp>

#include <gmock/gmock.h>

#include <cmath>
#include <fstream>
#include <map>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

// ------------------------------------------------------------ CommTuning

CommOptions alone() {
    CommOptions o;
    o.rank = 0;
    o.size = 1;
    return o;
}

TEST(CommTuning, DefaultsAreTodaysBehaviour) {
    Communicator comm(alone());
    const CommTuning t = comm.tuning();
    EXPECT_EQ(t, CommTuning{});
    EXPECT_EQ(t.fusion_threshold, std::size_t(64) << 20);
    EXPECT_EQ(t.doubling_max, std::size_t(64) << 10);
    EXPECT_EQ(t.pipeline_chunk, std::size_t(128) << 10);
    EXPECT_EQ(t.shm_single_round_max, std::size_t(32) << 10);
    EXPECT_EQ(comm.choose(64 << 10), Algorithm::doubling);
    EXPECT_EQ(comm.choose((64 << 10) + 1), Algorithm::ring);
}

TEST(CommTuning, ChooseFollowsTheThresholds) {
    Communicator comm(alone());
    CommTuning t = comm.tuning();
    t.doubling_max = 1 << 20;
    comm.set_tuning(t);
    EXPECT_EQ(comm.choose(512 << 10), Algorithm::doubling);
    EXPECT_EQ(comm.choose((1 << 20) + 1), Algorithm::ring);
    t.doubling_max = 0;
    comm.set_tuning(t);
    EXPECT_EQ(comm.choose(1), Algorithm::ring);
    EXPECT_EQ(comm.tuning().doubling_max, 0u);
}

TEST(CommTuning, BadValuesAreRefusedAndNothingChanges) {
    Communicator comm(alone());
    CommTuning t;
    t.pipeline_chunk = 100;
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { comm.set_tuning(t); }),
                HasSubstr("tuning.pipeline_chunk 100 must be a multiple of 8 from 4096"));
    t = {};
    t.fusion_threshold = 0;
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { comm.set_tuning(t); }),
                HasSubstr("fusion_threshold must be at least 1 byte"));
    t = {};
    t.shm_single_round_max = std::size_t(65) << 20;
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { comm.set_tuning(t); }),
                HasSubstr("tuning.shm_single_round_max"));
    EXPECT_EQ(comm.tuning(), CommTuning{});
    CommOptions o = alone();
    o.tuning.pipeline_chunk = 4097;
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { Communicator c(o); }),
                HasSubstr("communicator: tuning.pipeline_chunk 4097"));
}

// Named all-reduce packs per the fusion threshold in force: two ranks that
// set different thresholds pack differently and fail with a mismatch; after
// the same set_tuning they agree again.
TEST(CommTuning, FusionThresholdChangesThePacking) {
    World world;
    world.shm_size = 0;
    const auto outcomes = spawn_comms(2, world, [](Communicator& comm) {
        std::vector<float> a(1000, 1.0f), b(1000, 2.0f);
        std::map<std::string, Tensor> tensors{
            {"a", {std::as_writable_bytes(std::span(a)), DataType::float32}},
            {"b", {std::as_writable_bytes(std::span(b)), DataType::float32}}};
        CommTuning t = comm.tuning();
        t.fusion_threshold = 16384;  // both tensors in one buffer
        comm.set_tuning(t);
        comm.allreduce_named(tensors, ReduceOp::sum);
        EXPECT_EQ(a[999], 2.0f);
        EXPECT_EQ(b[0], 4.0f);
        t.fusion_threshold = comm.rank() == 0 ? 16384 : 4096;  // rank 1: one buffer each
        comm.set_tuning(t);
        comm.allreduce_named(tensors, ReduceOp::sum);
    });
    ASSERT_EQ(outcomes.size(), 2u);
    for (const auto& o : outcomes) {
        EXPECT_FALSE(o.ok);
        EXPECT_EQ(o.code, Errc::mismatch) << describe(o);
    }
}

// Shared memory cuts a message per pipeline_chunk and
// shm_single_round_max: with small values every rank still gets the exact
// sum; ranks that differ fail with a mismatch saying the cuts differ.
TEST(CommTuning, SharedMemoryChunksFollowTheTuning) {
    World world;
    world.shm_size = std::size_t(4) << 20;
    const std::size_t count = 100000;
    auto agree = spawn_comms(3, world, [&](Communicator& comm) {
        ASSERT_EQ(comm.transports()[(comm.rank() + 1) % 3], Transport::shared_memory);
        CommTuning t = comm.tuning();
        t.pipeline_chunk = 4096;
        t.shm_single_round_max = 0;
        comm.set_tuning(t);
        std::vector<int32_t> v(count);
        for (std::size_t i = 0; i < count; ++i) v[i] = int32_t(i) * (comm.rank() + 1);
        comm.allreduce(std::span(v));
        for (std::size_t i = 0; i < count; i += 997) ASSERT_EQ(v[i], int32_t(i) * 6) << i;
    });
    expect_ok(agree);
    auto differ = spawn_comms(2, world, [&](Communicator& comm) {
        CommTuning t = comm.tuning();
        t.pipeline_chunk = comm.rank() == 0 ? 65536 : 8192;
        comm.set_tuning(t);
        std::vector<float> v(count, 1.0f);
        comm.allreduce(std::span(v));
    });
    bool named_cuts = false;
    for (const auto& o : differ) {
        EXPECT_EQ(o.code, Errc::mismatch) << describe(o);
        named_cuts = named_cuts || o.message.find("tuning.pipeline_chunk") != std::string::npos;
    }
    EXPECT_TRUE(named_cuts) << describe(differ[0]) << " / " << describe(differ[1]);
}

// ------------------------------------------------------------- Autotuner

// A synthetic throughput with its optimum at a = 5, b = 2 (separable, so
// coordinate descent finds it in one pass and confirms it in a second).
double objective(double a, double b) { return 1000.0 - 10 * (a - 5) * (a - 5) - 20 * (b - 2) * (b - 2); }

struct Trace {
    std::vector<std::pair<int64_t, std::string>> applied;  // (step, "name=value")
    std::vector<std::map<std::string, double>> by_step;     // values() after each step
    int64_t frozen_at = 0;
    std::map<std::string, double> best;
    int64_t bound = 0;
};

std::string kv(const std::string& name, double v) { return name + "=" + std::to_string(v); }

std::vector<TunableParameter> synthetic(Trace& trace, const int64_t& step) {
    auto make = [&](std::string name, std::vector<double> grid, double initial) {
        TunableParameter p;
        p.name = name;
        p.candidates = std::move(grid);
        p.initial = initial;
        p.apply = [&trace, &step, name](double v) { trace.applied.emplace_back(step, kv(name, v)); };
        return p;
    };
    return {make("a", {1, 2, 3, 4, 5, 6, 7, 8}, 1), make("b", {0, 1, 2, 3, 4, 5}, 5)};
}

// Runs `size` ranks as threads, each its own Autotuner over one store,
// feeding the objective of the values in force until frozen or `steps`.
std::vector<Trace> run_synthetic(int size, AutotuneOptions options, int steps) {
    StoreServer server("127.0.0.1", 0);
    std::vector<Trace> traces(static_cast<std::size_t>(size));
    const auto outcomes = spawn(size, [&](int rank, int n) {
        Trace& trace = traces[static_cast<std::size_t>(rank)];
        int64_t step = 0;
        auto store = open_store(server.url());
        Autotuner tuner(rank, n, store, synthetic(trace, step), options);
        trace.bound = tuner.step_bound();
        for (int i = 0; i < steps && !tuner.frozen(); ++i) {
            const auto v = tuner.values();
            step = i + 1;
            const auto r = tuner.step(objective(v.at("a"), v.at("b")) + (rank == 0 ? 0 : 500));
            EXPECT_EQ(r.step, step);
            trace.by_step.push_back(tuner.values());
            if (r.frozen) trace.frozen_at = r.step;
        }
        trace.best = tuner.best();
    });
    expect_ok(outcomes);
    return traces;
}

TEST(Autotuner, CoordinateDescentFindsTheOptimumWithinItsBoundOnEveryRank) {
    AutotuneOptions o;
    o.job_id = "synthetic";
    o.warmup_steps = 2;
    o.settle_steps = 1;
    o.samples = 3;
    const auto traces = run_synthetic(3, o, 1000);
    const Trace& zero = traces[0];
    // 1 + 2 passes x (7 + 5) points, each a window of 4 steps after the first 5.
    EXPECT_EQ(zero.bound, 2 + 3 + 24 * 4);
    ASSERT_GT(zero.frozen_at, 0) << "never froze";
    EXPECT_LE(zero.frozen_at, zero.bound);
    EXPECT_EQ(zero.best.at("a"), 5);
    EXPECT_EQ(zero.best.at("b"), 2);
    EXPECT_EQ(zero.by_step.back().at("a"), 5);
    for (std::size_t r = 1; r < traces.size(); ++r) {
        // The same values applied at the same steps, and in force after each.
        EXPECT_EQ(traces[r].applied, zero.applied) << "rank " << r;
        EXPECT_EQ(traces[r].by_step, zero.by_step) << "rank " << r;
        EXPECT_EQ(traces[r].frozen_at, zero.frozen_at);
    }
    // Changes happen only at decision steps: 5, then every 4 steps.
    for (const auto& [step, what] : zero.applied)
        EXPECT_TRUE(step == 0 || (step >= 5 && (step - 5) % 4 == 0)) << step << " " << what;
}

TEST(Autotuner, BayesianAnchorGetsNearTheOptimumWithinItsBound) {
    AutotuneOptions o;
    o.job_id = "synthetic-bayes";
    o.search = AutotuneSearch::bayesian;
    o.warmup_steps = 1;
    o.settle_steps = 0;
    o.samples = 1;
    const auto traces = run_synthetic(2, o, 1000);
    const Trace& zero = traces[0];
    EXPECT_EQ(zero.bound, 1 + 1 + 19);  // 20 points, one step each after the warm-up
    ASSERT_GT(zero.frozen_at, 0);
    EXPECT_LE(zero.frozen_at, zero.bound);
    EXPECT_GE(objective(zero.best.at("a"), zero.best.at("b")), 0.95 * objective(5, 2))
        << "a=" << zero.best.at("a") << " b=" << zero.best.at("b");
    EXPECT_EQ(traces[1].by_step, zero.by_step);
}

TEST(Autotuner, FixedValuesNeverMove) {
    setenv("COHORT_AUTOTUNE_B", "3", 1);
    AutotuneOptions o;
    o.job_id = "fixed";
    o.warmup_steps = 0;
    o.settle_steps = 0;
    o.samples = 1;
    o.fixed["a"] = 2.5;  // need not be a candidate
    const auto traces = run_synthetic(2, o, 1000);
    unsetenv("COHORT_AUTOTUNE_B");
    for (const auto& t : traces) {
        EXPECT_EQ(t.applied, (std::vector<std::pair<int64_t, std::string>>{{0, kv("a", 2.5)}, {0, kv("b", 3)}}));
        for (const auto& v : t.by_step) {
            EXPECT_EQ(v.at("a"), 2.5);
            EXPECT_EQ(v.at("b"), 3);
        }
        EXPECT_EQ(t.frozen_at, 0) << "nothing to tune: frozen from the start";
    }
    setenv("COHORT_AUTOTUNE_A", "lots", 1);
    Trace trace;
    int64_t step = 0;
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { Autotuner(0, 1, nullptr, synthetic(trace, step)); }),
                HasSubstr("COHORT_AUTOTUNE_A='lots': expected a number"));
    unsetenv("COHORT_AUTOTUNE_A");
}

TEST(Autotuner, TheTimeBoundHolds) {
    Trace trace;
    int64_t step = 0;
    AutotuneOptions o;
    o.job_id = "timed";
    o.warmup_steps = 0;
    o.settle_steps = 0;
    o.samples = 1;
    o.max_time = std::chrono::milliseconds(100);
    Autotuner tuner(0, 1, nullptr, synthetic(trace, step), o);
    const auto start = Clock::now();
    while (!tuner.frozen() && since(start) < 20s) {
        std::this_thread::sleep_for(20ms);
        tuner.step(1.0);
    }
    EXPECT_TRUE(tuner.frozen());
    // Frozen at the first decision after 100 ms: one step later at most.
    EXPECT_LT(tuner.steps(), tuner.step_bound());
    EXPECT_LE(since(start), 5s);
    EXPECT_THAT(tuner.report(), HasSubstr("\"frozen\":true"));
    EXPECT_THAT(tuner.notes().back(), HasSubstr("max_time"));
}

TEST(Autotuner, MaxStepsBoundsTheSearch) {
    Trace trace;
    int64_t step = 0;
    AutotuneOptions o;
    o.job_id = "short";
    o.warmup_steps = 1;
    o.settle_steps = 1;
    o.samples = 2;
    o.max_steps = 12;
    Autotuner tuner(0, 1, nullptr, synthetic(trace, step), o);
    EXPECT_EQ(tuner.step_bound(), 12);
    while (!tuner.frozen() && tuner.steps() < 100) tuner.step(1.0);
    EXPECT_LE(tuner.steps(), 12);
}

// The state file: a frozen run's values start the next run frozen; a
// damaged file or another job's is named and the tuner starts from the
// defaults.
TEST(Autotuner, StateFileRoundTripsAndABadOneIsNamed) {
    CommTempDir dir;
    const auto file = dir.path() / "job-x.json";
    setenv("COHORT_AUTOTUNE_DIR", dir.path().c_str(), 1);
    AutotuneOptions o;
    o.job_id = "job-x";
    o.warmup_steps = 0;
    o.settle_steps = 0;
    o.samples = 1;
    std::vector<std::string> logged;
    o.log = [&](const std::string& line) { logged.push_back(line); };
    Trace trace;
    int64_t step = 0;
    {
        Autotuner tuner(0, 1, nullptr, synthetic(trace, step), o);
        EXPECT_EQ(tuner.values().at("a"), 1);
        while (!tuner.frozen()) {
            const auto v = tuner.values();
            tuner.step(objective(v.at("a"), v.at("b")));
        }
    }
    unsetenv("COHORT_AUTOTUNE_DIR");
    ASSERT_TRUE(std::filesystem::exists(file)) << "no state file " << file;
    o.state_file = file;
    {
        Autotuner again(0, 1, nullptr, synthetic(trace, step), o);
        EXPECT_TRUE(again.frozen());
        EXPECT_EQ(again.values().at("a"), 5);
        EXPECT_EQ(again.values().at("b"), 2);
        EXPECT_EQ(again.best_throughput(), objective(5, 2));
        EXPECT_THAT(logged.back(), HasSubstr(file.string()));
    }
    {
        AutotuneOptions other = o;
        other.job_id = "job-y";
        Autotuner tuner(0, 1, nullptr, synthetic(trace, step), other);
        EXPECT_FALSE(tuner.frozen());
        EXPECT_EQ(tuner.values().at("a"), 1);
        ASSERT_FALSE(tuner.notes().empty());
        EXPECT_THAT(tuner.notes()[0], HasSubstr(file.string() + " belongs to job 'job-x', not 'job-y'"));
        EXPECT_THAT(tuner.notes()[0], HasSubstr("starts from the defaults"));
    }
    std::ofstream(file) << "{\"format\": \"cohort-autotune 1\", \"job\": ";
    {
        Autotuner tuner(0, 1, nullptr, synthetic(trace, step), o);
        EXPECT_FALSE(tuner.frozen());
        EXPECT_EQ(tuner.values().at("b"), 5);
        ASSERT_FALSE(tuner.notes().empty());
        EXPECT_THAT(tuner.notes()[0], HasSubstr(file.string() + " is damaged"));
    }
    std::ofstream(file, std::ios::trunc)
        << R"({"format": "cohort-autotune 1", "job": "job-x", "ranks": 1, "frozen": true, "values": {"a": 4.5, "b": 1}})";
    {
        Autotuner tuner(0, 1, nullptr, synthetic(trace, step), o);
        EXPECT_FALSE(tuner.frozen());
        EXPECT_THAT(tuner.notes()[0], HasSubstr("a = 4.5, not one of its candidates"));
    }
}

TEST(Autotuner, BadOptionsAndParametersAreNamed) {
    Trace trace;
    int64_t step = 0;
    auto params = [&] { return synthetic(trace, step); };
    AutotuneOptions o;
    o.samples = 0;
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { Autotuner(0, 1, nullptr, params(), o); }),
                HasSubstr("autotune: samples 0 must be at least 1"));
    o = {};
    o.fixed["c"] = 1;
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { Autotuner(0, 1, nullptr, params(), o); }),
                HasSubstr("a value is fixed for 'c', which is not a parameter (parameters: a, b)"));
    auto p = params();
    p[0].initial = 9;
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { Autotuner(0, 1, nullptr, p, {}); }),
                HasSubstr("parameter 'a': initial value 9 is not one of its candidates"));
    p = params();
    p[1].candidates = {1, 3, 2};
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { Autotuner(0, 1, nullptr, p, {}); }),
                HasSubstr("candidates must ascend"));
    p = params();
    p[1].name = "a";
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { Autotuner(0, 1, nullptr, p, {}); }),
                HasSubstr("parameter 'a' is given twice"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { Autotuner(0, 2, nullptr, params(), {}); }),
                HasSubstr("needs a store"));
    Autotuner ok(0, 1, nullptr, params(), {});
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { ok.step(-1.0); }),
                HasSubstr("throughput -1 must be finite and not negative"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { ok.step(10.0, std::chrono::seconds(0)); }),
                HasSubstr("is no throughput"));
}

// A rank whose rank 0 never decides fails, naming the key it waited for.
TEST(Autotuner, AMissingDecisionIsATimeoutNamingTheKey) {
    StoreServer server("127.0.0.1", 0);
    Trace trace;
    int64_t step = 0;
    AutotuneOptions o;
    o.job_id = "lonely";
    o.timeout = std::chrono::milliseconds(200);
    EXPECT_THAT(error_message(Errc::timeout,
                              [&] { Autotuner(1, 2, open_store(server.url()), synthetic(trace, step), o); }),
                HasSubstr("rank 1 waited for rank 0's decision of step 0 (autotune/lonely/0"));
}

// A rank whose decision fails at a step stays failed: it would no longer
// switch with the others.
TEST(Autotuner, AFailedDecisionStepBreaksTheTuner) {
    StoreServer server("127.0.0.1", 0);
    auto store = open_store(server.url());
    Trace trace;
    int64_t step = 0;
    AutotuneOptions o;
    o.job_id = "broken";
    o.warmup_steps = 0;
    o.settle_steps = 0;
    o.samples = 1;
    o.timeout = std::chrono::milliseconds(200);
    store->set("autotune/broken/0", R"({"step": 0, "values": {"a": 1, "b": 5}, "next": 1, "frozen": false})");
    Autotuner follower(1, 2, store, synthetic(trace, step), o);
    EXPECT_THAT(error_message(Errc::timeout, [&] { follower.step(1.0); }),
                HasSubstr("decision of step 1 (autotune/broken/1"));
    EXPECT_THAT(error_message(Errc::closed, [&] { follower.step(1.0); }),
                HasSubstr("autotune: step 2: this tuner failed earlier"));
    store->set("autotune/broken/0", R"({"step": 0, "values": {"a": 1}, "next": 1, "frozen": false})");
    EXPECT_THAT(error_message(Errc::mismatch, [&] { Autotuner(1, 2, store, synthetic(trace, step), o); }),
                HasSubstr("has no value for parameter 'b': do all ranks tune the same parameters?"));
}

// The communicator's own parameters, tuned on a real workload: every rank's
// CommTuning is the same after every step, and the tuner freezes.
TEST(Autotuner, TunesACommunicatorAlikeOnEveryRank) {
    World world;
    world.shm_size = 0;  // TCP: doubling_max and pipeline_chunk matter
    std::mutex mutex;
    std::map<int, std::vector<CommTuning>> seen;
    const auto outcomes = spawn_comms(2, world, [&](Communicator& comm) {
        AutotuneOptions o;
        o.job_id = "comm";
        o.warmup_steps = 1;
        o.settle_steps = 0;
        o.samples = 1;
        o.passes = 1;
        o.max_steps = 40;
        Autotuner tuner(comm, o);
        std::vector<std::string> names;
        for (const auto& [name, v] : tuner.values()) names.push_back(name);
        EXPECT_EQ(names, (std::vector<std::string>{"doubling_max", "fusion_threshold", "pipeline_chunk"}));
        std::vector<float> a(30000, 1.0f), b(2000, 1.0f);
        std::vector<CommTuning> mine;
        while (!tuner.frozen()) {
            std::map<std::string, Tensor> tensors{
                {"a", {std::as_writable_bytes(std::span(a)), DataType::float32}},
                {"b", {std::as_writable_bytes(std::span(b)), DataType::float32}}};
            const auto start = Clock::now();
            comm.allreduce_named(tensors, ReduceOp::avg);
            tuner.step(double((a.size() + b.size()) * 4), Clock::now() - start);
            mine.push_back(comm.tuning());
            const auto v = tuner.values();
            EXPECT_EQ(double(comm.tuning().fusion_threshold), v.at("fusion_threshold"));
        }
        EXPECT_LE(tuner.steps(), 40);
        std::lock_guard lock(mutex);
        seen[comm.rank()] = std::move(mine);
    });
    expect_ok(outcomes);
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0], seen[1]);
    EXPECT_FALSE(seen[0].empty());
}

// Prefetch depth through the generic hook: the scheduler's depth follows
// the tuner's value.
TEST(Autotuner, TunesTheTransferSchedulersPrefetchDepth) {
    TransferScheduler scheduler;
    EXPECT_EQ(scheduler.prefetch_depth(), 8u);
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { scheduler.set_prefetch_depth(0); }),
                HasSubstr("set_prefetch_depth: the depth must be at least 1"));
    TunableParameter depth;
    depth.name = "prefetch_depth";
    depth.candidates = {1, 2, 4, 8, 16, 32};
    depth.initial = double(scheduler.prefetch_depth());
    depth.apply = [&](double v) { scheduler.set_prefetch_depth(static_cast<std::size_t>(v)); };
    AutotuneOptions o;
    o.warmup_steps = 0;
    o.settle_steps = 0;
    o.samples = 1;
    Autotuner tuner(0, 1, nullptr, {depth}, o);
    // Throughput that peaks at a depth of 4.
    while (!tuner.frozen()) {
        const double d = double(scheduler.prefetch_depth());
        tuner.step(100.0 - 10 * std::fabs(std::log2(d) - 2.0));
        EXPECT_EQ(double(scheduler.prefetch_depth()), tuner.values().at("prefetch_depth"));
        EXPECT_EQ(scheduler.stats().prefetch_depth, scheduler.prefetch_depth());
    }
    EXPECT_EQ(scheduler.prefetch_depth(), 4u);
}

}  // namespace
}  // namespace cohort::test
