// DataAdvisor: the baseline per collective style, the replica each shard is
// read from, the measured prefetch rules and their bounds, caching within
// the budgets, file patterns, the JSON forms, and bad input.
#include "support.hpp"

#include <cohort/data_advisor.hpp>

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t MiB = uint64_t{1} << 20;

// Three files of 64 MiB and 65536 records each (1 KiB per sample), cut
// into 8 MiB shards: shards 0-7 are train/a.rec, 8-15 train/b.rec, 16-23
// eval/c.rec.
Dataset three_files(bool records = true) {
    Dataset d;
    for (const char* path : {"train/a.rec", "train/b.rec", "eval/c.rec"})
        d.add({path, 64 * MiB, records ? std::optional<uint64_t>(65536) : std::nullopt});
    return d;
}

// Every node holds every shard (replication = members), so the advisor's
// choice among replicas is free of the plan's; node-2 has train/a.rec on
// its disk, node-1 train/b.rec, and node-0 eval/c.rec nearby (0.5).
ShardPlan replicated_plan(uint32_t replication = 3) {
    PlanOptions o;
    o.replication = replication;
    o.locality = {{"node-2", "train/a.rec", 1.0}, {"node-1", "train/b.rec", 1.0}, {"node-0", "eval/c.rec", 0.5}};
    return ShardPlan::create(ShardSet::split(three_files(), {.shard_bytes = 8 * MiB}), flat_cluster(3), o);
}

DataAdvisorOptions base_options(CollectiveStyle style = CollectiveStyle::allreduce) {
    DataAdvisorOptions o;
    o.style = style;
    o.batch_size = 1024;  // 1 MiB batches
    o.memory_budget_bytes = 64 * MiB;
    return o;
}

DataAdvice advise(const DataAdvisorOptions& o, const ShardPlan& plan) {
    return DataAdvisor(o).advise(plan);
}

TEST(DataAdvisorBaseline, TwoBatchesForAllReduceFourForParameterServer) {
    const ShardPlan plan = replicated_plan();
    const DataAdvice ar = advise(base_options(CollectiveStyle::allreduce), plan);
    EXPECT_EQ(ar.baseline.prefetch_batches, 2u);
    EXPECT_EQ(ar.prefetch_batches, 2u);
    EXPECT_EQ(ar.prefetch_bytes, 2 * MiB);
    EXPECT_FALSE(ar.measured);
    EXPECT_THAT(ar.prefetch_reason, HasSubstr("no measurement"));
    EXPECT_THAT(ar.baseline.prefetch_reason, HasSubstr("baseline for allreduce: 2 batches"));
    for (const NodeDataAdvice& n : ar.nodes) EXPECT_EQ(n.prefetch_batches, 2u) << n.node;

    const DataAdvice ps = advise(base_options(CollectiveStyle::parameter_server), plan);
    EXPECT_EQ(ps.baseline.prefetch_batches, 4u);
    EXPECT_EQ(ps.prefetch_batches, 4u);
    EXPECT_THAT(ps.baseline.prefetch_reason, HasSubstr("parameter_server: 4 batches"));
    EXPECT_EQ(ps.style, CollectiveStyle::parameter_server);
}

TEST(DataAdvisorBaseline, CachesWhenReadMoreThanOnceOrAtRandom) {
    DataAdvisorOptions o = base_options();
    DataBaseline b = data_advice_baseline(o);
    EXPECT_FALSE(b.cache);
    EXPECT_THAT(b.cache_reason, HasSubstr("1 epoch of sequential access"));
    EXPECT_DOUBLE_EQ(b.locality_threshold, 0.8);
    o.epochs = 3;
    b = data_advice_baseline(o);
    EXPECT_TRUE(b.cache);
    EXPECT_THAT(b.cache_reason, HasSubstr("epochs 3 > 1"));
    o.epochs = 1;
    o.access = AccessPattern::random;
    b = data_advice_baseline(o);
    EXPECT_TRUE(b.cache);
    EXPECT_THAT(b.cache_reason, HasSubstr("random access"));

    // Without a cache every shard says none, with the job's reason.
    const DataAdvice none = advise(base_options(), replicated_plan());
    EXPECT_FALSE(none.cache);
    for (const ShardDataAdvice& s : none.shards) {
        EXPECT_EQ(s.cache, CacheStrategy::none);
        EXPECT_THAT(s.cache_reason, HasSubstr("read once"));
    }
}

TEST(DataAdvisorSampleSize, EstimatedFromRecordsOrGiven) {
    const ShardPlan plan = replicated_plan();
    const DataAdvice estimated = advise(base_options(), plan);
    EXPECT_EQ(estimated.sample_bytes, 1024u);
    EXPECT_THAT(estimated.sample_bytes_reason, HasSubstr("196608 records"));
    EXPECT_EQ(estimated.batch_bytes, 1024u * 1024u);
    DataAdvisorOptions o = base_options();
    o.sample_bytes = 4096;
    EXPECT_EQ(advise(o, plan).batch_bytes, 4 * MiB);

    const ShardPlan unknown =
        ShardPlan::create(ShardSet::split(three_files(false), {.shard_count = 6}), flat_cluster(2));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { advise(base_options(), unknown); }),
                HasSubstr("sample_bytes: not given, and 'train/a.rec' has no record count"));
}

TEST(DataAdvisorLocality, EachShardIsReadFromItsMostLocalReplica) {
    const ShardPlan plan = replicated_plan();
    const DataAdvice a = advise(base_options(), plan);
    ASSERT_EQ(a.shards.size(), 24u);
    for (const ShardDataAdvice& s : a.shards) {
        SCOPED_TRACE("shard " + std::to_string(s.shard));
        if (s.shard < 8) {
            EXPECT_EQ(s.preferred_node, "node-2");
            EXPECT_DOUBLE_EQ(s.locality, 1.0);
            EXPECT_EQ(s.priority, 0);
            EXPECT_THAT(s.priority_reason, HasSubstr("local read"));
        } else if (s.shard < 16) {
            EXPECT_EQ(s.preferred_node, "node-1");
            EXPECT_DOUBLE_EQ(s.locality, 1.0);
        } else {
            // Half of eval/c.rec is remote even for node-0: ahead of local shards.
            EXPECT_EQ(s.preferred_node, "node-0");
            EXPECT_DOUBLE_EQ(s.locality, 0.5);
            EXPECT_EQ(s.priority, 50);
            EXPECT_THAT(s.priority_reason, HasSubstr("50% of it comes from remote storage"));
        }
        EXPECT_THAT(s.node_reason, HasSubstr("best locality of 3 replicas"));
    }
    EXPECT_EQ(a.high_locality_nodes, (std::vector<std::string>{"node-1", "node-2"}));
    EXPECT_TRUE(a.nodes[2].high_locality);
    EXPECT_DOUBLE_EQ(a.nodes[2].locality, 1.0);
    EXPECT_EQ(a.nodes[2].shards, 8u);
    EXPECT_EQ(a.nodes[2].bytes, 64 * MiB);
    EXPECT_FALSE(a.nodes[0].high_locality);
    EXPECT_DOUBLE_EQ(a.nodes[0].locality, 0.5);
    EXPECT_THAT(a.locality_reason, HasSubstr("2 of 3 nodes"));
}

TEST(DataAdvisorLocality, TiesGoToTheLeastLoadedReplica) {
    // Replication 2 over 3 nodes: loads differ, and without a locality map
    // every replica scores 0, so the lower load decides.
    PlanOptions po;
    po.replication = 2;
    po.strategy = Strategy::round_robin;
    const ShardPlan plan = ShardPlan::create(ShardSet::split(three_files(), {.shard_count = 7}), flat_cluster(3), po);
    const DataAdvice a = advise(base_options(), plan);
    bool unequal = false;
    for (const ShardDataAdvice& s : a.shards) {
        const auto owners = plan.owners(s.shard);
        const uint32_t chosen = static_cast<uint32_t>(*plan.members().find(s.preferred_node));
        for (uint32_t o : owners) {
            EXPECT_LE(plan.load(chosen), plan.load(o)) << "shard " << s.shard;
            unequal = unequal || plan.load(o) != plan.load(chosen);
        }
        if (plan.load(owners[0]) == plan.load(owners[1])) {
            EXPECT_EQ(chosen, owners[0]) << "an equal load keeps the primary";
        }
    }
    EXPECT_TRUE(unequal) << "the test needs owners of unequal load";
    EXPECT_TRUE(a.high_locality_nodes.empty());
    EXPECT_THAT(a.locality_reason, HasSubstr("which is empty"));
}

TEST(DataAdvisorMeasured, DataWaitWithLowHitRateRaisesThePrefetch) {
    const ShardPlan plan = replicated_plan();
    DataAdvisorOptions o = base_options();
    o.measurements.job = {.data_wait_fraction = 0.5, .prefetch_hit_rate = 0.2};
    DataAdvice a = advise(o, plan);
    EXPECT_EQ(a.prefetch_batches, 4u);  // ceil(2 / (1 - 0.5))
    EXPECT_TRUE(a.measured);
    EXPECT_THAT(a.prefetch_reason, HasSubstr("data wait 0.50 of the step (> 0.05) and prefetch hit rate 0.20"));
    EXPECT_THAT(a.prefetch_reason, HasSubstr("raised to ceil(2 / (1 - 0.50)) = 4 batches"));
    for (const NodeDataAdvice& n : a.nodes) {
        EXPECT_EQ(n.prefetch_batches, 4u);  // no measurement of its own: the job's
        EXPECT_THAT(n.prefetch_reason, HasSubstr("(the job's)"));
    }
    o.measurements.job.data_wait_fraction = 0.75;
    EXPECT_EQ(advise(o, plan).prefetch_batches, 8u);
    // Not above the threshold: the baseline.
    o.measurements.job.data_wait_fraction = 0.05;
    EXPECT_EQ(advise(o, plan).prefetch_batches, 2u);
}

TEST(DataAdvisorMeasured, MonotoneAndWithinTheBudget) {
    const ShardPlan plan = replicated_plan();
    for (uint64_t budget_mib : {1, 3, 10, 64, 1024}) {
        uint32_t last = 0;
        for (int i = 0; i <= 100; ++i) {
            DataAdvisorOptions o = base_options(CollectiveStyle::parameter_server);
            o.epochs = 2;  // with a cache competing for the memory
            o.memory_budget_bytes = budget_mib * MiB;
            o.measurements.job = {.data_wait_fraction = i / 100.0, .prefetch_hit_rate = 0.5};
            const DataAdvice a = advise(o, plan);
            SCOPED_TRACE("budget " + std::to_string(budget_mib) + " MiB, wait " + std::to_string(i / 100.0));
            EXPECT_GE(a.prefetch_batches, last) << a.prefetch_reason;
            EXPECT_GE(a.prefetch_batches, 1u);
            EXPECT_LE(a.prefetch_batches, 64u);
            EXPECT_LE(a.prefetch_bytes, o.memory_budget_bytes) << a.prefetch_reason;
            for (const NodeDataAdvice& n : a.nodes) {
                EXPECT_LE(n.prefetch_bytes + n.cache_memory_bytes, o.memory_budget_bytes) << n.node;
            }
            last = a.prefetch_batches;
        }
    }
    // A lower hit rate never lowers the depth.
    uint32_t last = 64;
    for (int h = 0; h <= 10; ++h) {
        DataAdvisorOptions o = base_options();
        o.measurements.job = {.data_wait_fraction = 0.4, .prefetch_hit_rate = h / 10.0};
        const uint32_t depth = advise(o, plan).prefetch_batches;
        EXPECT_LE(depth, last);
        last = depth;
    }
}

TEST(DataAdvisorMeasured, CappedByTheMemoryBudget) {
    const ShardPlan plan = replicated_plan();
    DataAdvisorOptions o = base_options();
    o.memory_budget_bytes = 5 * MiB;
    o.measurements.job = {.data_wait_fraction = 0.9};
    const DataAdvice a = advise(o, plan);
    EXPECT_EQ(a.prefetch_batches, 5u);  // 20 wanted, 5 fit
    EXPECT_THAT(a.prefetch_reason, HasSubstr("(hit rate not measured): raised to ceil(2 / (1 - 0.90)) = 20"));
    EXPECT_THAT(a.prefetch_reason, HasSubstr("capped at 5 batches by the memory budget (5MiB / 1MiB per batch)"));
    // A batch larger than the budget: still one batch, and the reason says so.
    o.memory_budget_bytes = MiB / 2;
    o.measurements.job = {};
    const DataAdvice tiny = advise(o, plan);
    EXPECT_EQ(tiny.prefetch_batches, 1u);
    EXPECT_THAT(tiny.prefetch_reason, HasSubstr("one batch (1MiB) is larger than the memory budget"));
}

TEST(DataAdvisorMeasured, GoodHitRateOrSlowStorageKeepsTheBaseline) {
    const ShardPlan plan = replicated_plan();
    DataAdvisorOptions o = base_options();
    o.measurements.job = {.data_wait_fraction = 0.4, .prefetch_hit_rate = 0.95};
    DataAdvice a = advise(o, plan);
    EXPECT_EQ(a.prefetch_batches, 2u);
    EXPECT_TRUE(a.measured);
    EXPECT_THAT(a.prefetch_reason, HasSubstr("prefetch hit rate 0.95 >= 0.9: batches were ready"));

    // 1 MiB per 0.1 s step needs 10 MiB/s; storage gives 2 MiB/s.
    o.measurements.job = {
        .data_wait_fraction = 0.4, .prefetch_hit_rate = 0.1, .read_bytes_per_second = 2.0 * MiB, .step_time = 0.1};
    a = advise(o, plan);
    EXPECT_EQ(a.prefetch_batches, 2u);
    EXPECT_THAT(a.prefetch_reason, HasSubstr("storage reads 2MiB/s and the steps need 10MiB/s"));
    // Fast enough storage: the wait rule applies.
    o.measurements.job.read_bytes_per_second = 100.0 * MiB;
    EXPECT_EQ(advise(o, plan).prefetch_batches, 4u);
    // samples_per_second stands in for step_time: 1024 samples/s of 1 KiB = 1 MiB/s.
    o.measurements.job = {.data_wait_fraction = 0.4, .read_bytes_per_second = 100.0 * MiB, .samples_per_second = 1024};
    EXPECT_EQ(advise(o, plan).prefetch_batches, 4u);
    o.measurements.job.read_bytes_per_second = 0.5 * MiB;
    EXPECT_EQ(advise(o, plan).prefetch_batches, 2u);
}

TEST(DataAdvisorMeasured, NoWaitAndTightMemoryLowersThePrefetch) {
    const ShardPlan plan = replicated_plan();
    DataAdvisorOptions o = base_options(CollectiveStyle::parameter_server);
    o.epochs = 2;
    // node-2 would cache its 64 MiB; 66 MiB leaves room for 2 batches.
    o.memory_budget_bytes = 66 * MiB;
    o.measurements.nodes["node-2"] = {.data_wait_fraction = 0.0, .prefetch_hit_rate = 1.0};
    const DataAdvice a = advise(o, plan);
    const NodeDataAdvice& n = a.nodes[2];
    EXPECT_EQ(n.prefetch_batches, 2u);
    EXPECT_TRUE(n.measured);
    EXPECT_THAT(n.prefetch_reason, HasSubstr("node-2: data wait 0.00 (<= 0.01) and memory is tight"));
    EXPECT_THAT(n.prefetch_reason, HasSubstr("lowered from 4 to 2 batches"));
    EXPECT_EQ(n.cache_memory_bytes, 64 * MiB);
    // The other nodes have no measurement and no job figure: the baseline.
    EXPECT_EQ(a.nodes[0].prefetch_batches, 4u);
    EXPECT_FALSE(a.nodes[0].measured);
    // With room to spare nothing is lowered.
    o.memory_budget_bytes = 1024 * MiB;
    EXPECT_EQ(advise(o, plan).nodes[2].prefetch_batches, 4u);
}

// The measured raise starts from the read-ahead the measurement was taken
// with: a queue of 4 that still waited half the step needs 8, not 4.
TEST(DataAdvisorMeasured, RaisesFromTheDepthInUse) {
    const ShardPlan plan = replicated_plan();
    DataAdvisorOptions o = base_options();
    o.measurements.job = {.data_wait_fraction = 0.5, .prefetch_hit_rate = 0.2, .prefetch_depth = 4};
    DataAdvice a = advise(o, plan);
    EXPECT_EQ(a.prefetch_batches, 8u);  // ceil(4 / (1 - 0.5))
    EXPECT_THAT(a.prefetch_reason, HasSubstr("raised to ceil(4 / (1 - 0.50)) = 8 batches from the depth in use"));
    // Without it, from the baseline (2), as before.
    o.measurements.job.prefetch_depth.reset();
    a = advise(o, plan);
    EXPECT_EQ(a.prefetch_batches, 4u);
    EXPECT_THAT(a.prefetch_reason, HasSubstr("= 4 batches from the baseline"));
    // No wait to speak of: the depth in use stays.
    o.measurements.job = {.data_wait_fraction = 0.03, .prefetch_depth = 5};
    a = advise(o, plan);
    EXPECT_EQ(a.prefetch_batches, 5u);
    EXPECT_THAT(a.prefetch_reason, HasSubstr("the depth in use, 5 batches"));
    // A depth in use but no wait measured: nothing says it was wrong or right.
    o.measurements.job = {.prefetch_depth = 7};
    EXPECT_EQ(advise(o, plan).prefetch_batches, 2u);
    // A deeper read-ahead in use never lowers the advice.
    uint32_t last = 0;
    for (uint32_t d = 1; d <= 64; ++d) {
        o.measurements.job = {.data_wait_fraction = 0.3, .prefetch_hit_rate = 0.4, .prefetch_depth = d};
        const uint32_t depth = advise(o, plan).prefetch_batches;
        EXPECT_GE(depth, last) << "in use " << d;
        EXPECT_LE(depth, 64u);
        last = depth;
    }
}

// A rule pack that halves the depth under pressure (the shipped
// reduce_prefetch, 0.5): the advice doubles, so the halved queue still
// reads as far ahead as the wait calls for.
TEST(DataAdvisorMeasured, TheFactorFloorKeepsTheReadAheadUnderReducePrefetch) {
    const ShardPlan plan = replicated_plan();
    DataAdvisorOptions o = base_options();
    o.prefetch_factor_floor = 0.5;
    DataAdvice a = advise(o, plan);
    EXPECT_EQ(a.prefetch_batches, 4u);  // the baseline 2 / 0.5
    EXPECT_EQ(a.baseline.prefetch_batches, 2u);
    EXPECT_THAT(a.prefetch_reason,
                HasSubstr("divided by the prefetch factor floor 0.50, so that 4 x 0.50 still reads 2 batches ahead"));
    o.measurements.job = {.data_wait_fraction = 0.25, .prefetch_hit_rate = 0.5, .prefetch_depth = 3};
    a = advise(o, plan);
    EXPECT_EQ(a.prefetch_batches, 8u);  // ceil(3 / 0.75) = 4, / 0.5
    EXPECT_THAT(a.prefetch_reason, HasSubstr("= 4 batches from the depth in use"));
    EXPECT_THAT(a.prefetch_reason, HasSubstr("so that 8 x 0.50 still reads 4 batches ahead: 8 batches"));
    for (const NodeDataAdvice& n : a.nodes) EXPECT_EQ(n.prefetch_batches, 8u) << n.node;
    // 0.3 (the seed's lowest): ceil(4 / 0.3) = 14.
    o.prefetch_factor_floor = 0.3;
    EXPECT_EQ(advise(o, plan).prefetch_batches, 14u);
    // Still within the memory budget.
    o.memory_budget_bytes = 6 * MiB;
    a = advise(o, plan);
    EXPECT_EQ(a.prefetch_batches, 6u);
    EXPECT_THAT(a.prefetch_reason, HasSubstr("capped at 6 batches by the memory budget"));
    // A smaller floor never lowers the depth.
    o.memory_budget_bytes = 64 * MiB;
    uint32_t last = 0;
    for (int f = 100; f >= 1; --f) {
        o.prefetch_factor_floor = f / 100.0;
        const uint32_t depth = advise(o, plan).prefetch_batches;
        EXPECT_GE(depth, last) << "floor " << o.prefetch_factor_floor;
        EXPECT_LE(depth, 64u);
        last = depth;
    }
    EXPECT_EQ(last, 64u);
}

TEST(DataAdvisorCache, MemoryFirstThenLocalDiskWithinTheBudgets) {
    const ShardPlan plan = replicated_plan();
    DataAdvisorOptions o = base_options();
    o.epochs = 2;
    o.memory_budget_bytes = 2 * MiB + 16 * MiB;  // prefetch 2 MiB, then two 8 MiB shards
    DataAdvice a = advise(o, plan);
    EXPECT_TRUE(a.cache);
    // node-0 reads the half-remote eval shards (16-23): two in memory, the rest on disk.
    const NodeDataAdvice& remote = a.nodes[0];
    EXPECT_EQ(remote.shards, 8u);
    EXPECT_EQ(remote.cache_memory_bytes, 16 * MiB);
    EXPECT_EQ(remote.cache_disk_bytes, 48 * MiB);
    EXPECT_EQ(a.shards[16].cache, CacheStrategy::memory);
    EXPECT_THAT(a.shards[16].cache_reason, HasSubstr("fits node-0's memory"));
    EXPECT_EQ(a.shards[18].cache, CacheStrategy::local_disk);
    // node-2's shards are on its disk already: memory while it lasts, then none.
    EXPECT_EQ(a.shards[0].cache, CacheStrategy::memory);
    EXPECT_EQ(a.shards[2].cache, CacheStrategy::none);
    EXPECT_THAT(a.shards[2].cache_reason, HasSubstr("already on its local disk"));
    EXPECT_EQ(a.nodes[2].cache_disk_bytes, 0u);

    o.disk_budget_bytes = 20 * MiB;
    a = advise(o, plan);
    EXPECT_EQ(a.nodes[0].cache_disk_bytes, 16 * MiB);
    EXPECT_EQ(a.shards[20].cache, CacheStrategy::none);
    EXPECT_THAT(a.shards[20].cache_reason, HasSubstr("nor its disk budget of 20MiB"));
}

TEST(DataAdvisorPatterns, SelectFilesAndShards) {
    const ShardPlan plan = replicated_plan();
    DataAdvisorOptions o = base_options();
    o.patterns = {"train/*"};
    DataAdvice a = advise(o, plan);
    EXPECT_EQ(a.files, (std::vector<std::string>{"train/a.rec", "train/b.rec"}));
    ASSERT_EQ(a.shards.size(), 16u);
    EXPECT_EQ(a.shards.back().shard, 15u);
    EXPECT_EQ(a.bytes, 128 * MiB);
    EXPECT_EQ(a.nodes[0].shards, 0u);
    EXPECT_THAT(a.nodes[0].cache_reason, HasSubstr("read once"));

    o.patterns = {"**/c.rec", "train/[a]*"};
    a = advise(o, plan);
    EXPECT_EQ(a.files, (std::vector<std::string>{"train/a.rec", "eval/c.rec"}));
    o.patterns = {"*"};  // `*` stays inside a path component
    EXPECT_THAT(error_message(Errc::not_found, [&] { advise(o, plan); }),
                HasSubstr("file pattern '*' matches none of the dataset's 3 files, e.g. 'train/a.rec'"));
    o.patterns = {"**"};
    EXPECT_EQ(advise(o, plan).files.size(), 3u);
    o.patterns = {"train/*", "nothing/*.rec"};
    EXPECT_THAT(error_message(Errc::not_found, [&] { advise(o, plan); }), HasSubstr("'nothing/*.rec'"));
    o.patterns = {"train/[ab"};
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { DataAdvisor{o}; }),
                HasSubstr("file pattern 'train/[ab': the class opened at character 7 is not closed"));
    o.patterns = {""};
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { DataAdvisor{o}; }), HasSubstr("must not be empty"));
}

TEST(DataAdvisorErrors, BadArgumentsAreNamed) {
    const auto message = [](auto change) {
        DataAdvisorOptions o = base_options();
        change(o);
        return error_message(Errc::invalid_argument, [&] { DataAdvisor{o}; });
    };
    EXPECT_THAT(message([](auto& o) { o.batch_size = 0; }), HasSubstr("batch_size: must be at least 1"));
    EXPECT_THAT(message([](auto& o) { o.memory_budget_bytes = 0; }),
                HasSubstr("memory_budget_bytes: must be at least 1"));
    EXPECT_THAT(message([](auto& o) { o.epochs = 0; }), HasSubstr("epochs: must be at least 1"));
    EXPECT_THAT(message([](auto& o) { o.locality_threshold = 0; }), HasSubstr("locality_threshold: must be in (0, 1]"));
    EXPECT_THAT(message([](auto& o) { o.measurements.job.prefetch_hit_rate = 1.5; }),
                HasSubstr("measurements.job.prefetch_hit_rate: must be in [0, 1], got 1.5"));
    EXPECT_THAT(message([](auto& o) { o.measurements.job.data_wait_fraction = -0.1; }),
                HasSubstr("measurements.job.data_wait_fraction: must be in [0, 1]"));
    EXPECT_THAT(message([](auto& o) { o.measurements.nodes["node-1"].read_bytes_per_second = -1; }),
                HasSubstr("measurements.nodes.node-1.read_bytes_per_second: must be a finite number >= 0"));
    EXPECT_THAT(message([](auto& o) { o.measurements.job.samples_per_second = -3; }), HasSubstr("samples_per_second"));
    EXPECT_THAT(message([](auto& o) { o.measurements.job.step_time = 0; }), HasSubstr("step_time: must be a finite"));
    EXPECT_THAT(message([](auto& o) { o.measurements.job.prefetch_depth = 0; }),
                HasSubstr("measurements.job.prefetch_depth: must be in 1..64 batches"));
    EXPECT_THAT(message([](auto& o) { o.measurements.nodes["node-1"].prefetch_depth = 65; }),
                HasSubstr("measurements.nodes.node-1.prefetch_depth: must be in 1..64 batches (the read-ahead in use), "
                          "got 65"));
    for (double floor : {0.0, -0.5, 1.5, std::nan("")}) {
        EXPECT_THAT(message([floor](auto& o) { o.prefetch_factor_floor = floor; }),
                    HasSubstr("prefetch_factor_floor: must be in (0, 1]"))
            << floor;
    }

    DataAdvisorOptions o = base_options();
    o.measurements.nodes["ghost"] = {.data_wait_fraction = 0.2};
    EXPECT_THAT(error_message(Errc::not_found, [&] { advise(o, replicated_plan()); }),
                HasSubstr("measurements for node 'ghost': it is not a member of the plan (3 members)"));
}

TEST(DataAdvisorJson, OptionsAndMeasurementsFromJson) {
    const DataAdvisorOptions o = data_advisor_options_from_json(
        R"({"patterns": ["train/*"], "style": "parameter_server", "batch_size": 32, "sample_bytes": "4KiB",
            "memory_budget_bytes": "1GiB", "disk_budget_bytes": 1000000, "epochs": 3, "access": "random",
            "locality_threshold": 0.5, "prefetch_factor_floor": 0.5,
            "measurements": {"job": {"data_wait": 0.25, "step_time": 0.5, "prefetch_depth": 3},
                             "nodes": {"node-1": {"data_wait_fraction": 0.1, "prefetch_hit_rate": 0.3,
                                                  "read_bytes_per_second": 1e9, "samples_per_second": 900}}}})",
        "opts");
    EXPECT_EQ(o.patterns, (std::vector<std::string>{"train/*"}));
    EXPECT_EQ(o.style, CollectiveStyle::parameter_server);
    EXPECT_EQ(o.batch_size, 32u);
    EXPECT_EQ(o.sample_bytes, 4096u);
    EXPECT_EQ(o.memory_budget_bytes, uint64_t{1} << 30);
    EXPECT_EQ(o.disk_budget_bytes, 1000000u);
    EXPECT_EQ(o.epochs, 3u);
    EXPECT_EQ(o.access, AccessPattern::random);
    EXPECT_DOUBLE_EQ(o.locality_threshold, 0.5);
    EXPECT_DOUBLE_EQ(*o.measurements.job.data_wait_fraction, 0.5);
    EXPECT_DOUBLE_EQ(o.prefetch_factor_floor, 0.5);
    EXPECT_EQ(o.measurements.job.prefetch_depth, 3u);
    EXPECT_FALSE(o.measurements.nodes.at("node-1").prefetch_depth);
    const DataMeasurement& n = o.measurements.nodes.at("node-1");
    EXPECT_DOUBLE_EQ(*n.prefetch_hit_rate, 0.3);
    EXPECT_DOUBLE_EQ(*n.samples_per_second, 900);

    const auto bad = [](const char* text) {
        return error_message(Errc::invalid_argument, [&] { data_advisor_options_from_json(text, "opts"); });
    };
    EXPECT_THAT(bad(R"({"memory_budget_bytes": 1})"), HasSubstr("opts: missing field 'batch_size'"));
    EXPECT_THAT(bad(R"({"batch_size": 1})"), HasSubstr("missing field 'memory_budget_bytes'"));
    EXPECT_THAT(bad(R"({"batch_size": 1, "memory_budget_bytes": 1, "bach": 2})"), HasSubstr("unknown field 'bach'"));
    EXPECT_THAT(bad(R"({"batch_size": -4, "memory_budget_bytes": 1})"),
                HasSubstr("opts: batch_size: must not be negative"));
    EXPECT_THAT(bad(R"({"batch_size": 1, "memory_budget_bytes": "lots"})"),
                HasSubstr("memory_budget_bytes: expected a size such as 8GiB, got 'lots'"));
    EXPECT_THAT(bad(R"({"batch_size": 1, "memory_budget_bytes": 1, "style": "ring"})"),
                HasSubstr("style: unknown style 'ring'"));
    EXPECT_THAT(bad("{"), HasSubstr("opts: not JSON"));
    EXPECT_THAT(bad(R"({"batch_size": 1, "memory_budget_bytes": 1, "prefetch_factor_floor": "half"})"),
                HasSubstr("prefetch_factor_floor"));
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [] { data_measurements_from_json(R"({"job": {"prefetch_depth": 2.5}})", "m.json"); }),
                HasSubstr("m.json: job: prefetch_depth"));
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [] { data_measurements_from_json(R"({"job": {"prefetch_depth": 1e12}})", "m.json"); }),
                HasSubstr("m.json: job: prefetch_depth"));
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [] { data_measurements_from_json(R"({"job": {"data_wait": 0.2}})", "m.json"); }),
                HasSubstr("m.json: job: data_wait: needs step_time"));
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [] { data_measurements_from_json(R"({"nodes": {"a": {"wait": 1}}})", "m.json"); }),
                HasSubstr("m.json: nodes.a: unknown field 'wait'"));
}

const boost::json::value& at(const boost::json::value& v, std::string_view key) {
    return v.as_object().at(key);
}
int64_t number(const boost::json::value& v, std::string_view key) {
    return at(v, key).to_number<int64_t>();
}

TEST(DataAdvisorJson, AdviceJsonIsCompleteAndDeterministic) {
    const ShardPlan plan = replicated_plan();
    DataAdvisorOptions o = base_options();
    o.epochs = 2;
    o.measurements.nodes["node-0"] = {.data_wait_fraction = 0.3, .prefetch_hit_rate = 0.5};
    const std::string text = advise(o, plan).to_json();
    EXPECT_EQ(text, advise(o, plan).to_json());
    const boost::json::value root = boost::json::parse(text);
    EXPECT_EQ(at(root, "style").as_string(), "allreduce");
    EXPECT_EQ(number(at(root, "baseline"), "prefetch_batches"), 2);
    EXPECT_TRUE(at(at(root, "cache"), "enabled").as_bool());
    EXPECT_EQ(at(at(root, "high_locality"), "nodes").as_array().size(), 2u);
    const boost::json::value& node0 = at(root, "nodes").as_array()[0];
    EXPECT_EQ(at(node0, "node").as_string(), "node-0");
    EXPECT_EQ(number(at(node0, "prefetch"), "batches"), 3);  // ceil(2 / 0.7)
    EXPECT_TRUE(at(at(node0, "prefetch"), "measured").as_bool());
    const boost::json::value& shard = at(root, "shards").as_array()[17];
    EXPECT_EQ(number(shard, "shard"), 17);
    EXPECT_EQ(at(shard, "preferred_node").as_string(), "node-0");
    EXPECT_EQ(number(at(shard, "priority"), "value"), 50);
    EXPECT_EQ(at(at(shard, "cache"), "strategy").as_string(), "memory");
    EXPECT_EQ(number(at(shard, "prefetch"), "batches"), 3);
    for (const char* key : {"node_reason", "bytes", "locality"}) EXPECT_TRUE(shard.as_object().contains(key)) << key;
}

TEST(DataAdvisorNames, StylesAndStrategies) {
    EXPECT_EQ(to_string(CollectiveStyle::parameter_server), "parameter_server");
    EXPECT_EQ(parse_collective_style("allreduce"), CollectiveStyle::allreduce);
    EXPECT_EQ(parse_collective_style("ps"), CollectiveStyle::parameter_server);
    EXPECT_FALSE(parse_collective_style("ring"));
    EXPECT_EQ(to_string(CacheStrategy::local_disk), "local_disk");
}

}  // namespace
}  // namespace cohort::test
