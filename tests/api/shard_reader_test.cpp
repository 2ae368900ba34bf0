// ShardReader against a coordinator hosted in the test and real temporary
// files: every shard read once per epoch with the right bytes; the number
// of shards leased ahead follows a policy that reduces the prefetch depth;
// data wait measured when reads are slow and carried by the member's
// heartbeat; errors that name the shard, the file and the offset.
#include "comm_support.hpp"

#include <cohort/coordinator.hpp>
#include <cohort/coordinator_client.hpp>
#include <cohort/membership.hpp>
#include <cohort/shard_reader.hpp>
#include <cohort/transfers.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

// Byte `offset` of data file `file`.
std::byte content(uint32_t file, uint64_t offset) {
    return static_cast<std::byte>((offset * 7 + file * 31 + offset / 251) % 256);
}

// Data files in a temporary directory, with a dataset that lists them by
// relative path and the sizes given (which may be larger than the files
// written, to make short files).
class DataFiles {
public:
    DataFiles(const std::vector<uint64_t>& listed, const std::vector<uint64_t>& written) {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = std::filesystem::temp_directory_path() /
               ("cohort-shard-reader-" + std::to_string(::getpid()) + "-" + info->name());
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
        for (uint32_t f = 0; f < listed.size(); ++f) {
            const std::string name = "part-" + std::to_string(f) + ".bin";
            std::ofstream out(dir_ / name, std::ios::binary);
            for (uint64_t i = 0; i < written[f]; ++i) out.put(static_cast<char>(content(f, i)));
            dataset_.add(DataFile{name, listed[f], std::nullopt});
        }
    }
    explicit DataFiles(const std::vector<uint64_t>& sizes) : DataFiles(sizes, sizes) {}
    ~DataFiles() { std::filesystem::remove_all(dir_); }
    const Dataset& dataset() const { return dataset_; }
    const std::filesystem::path& dir() const { return dir_; }

private:
    std::filesystem::path dir_;
    Dataset dataset_;
};

// Whether `bytes` are the shard's segments, in order.
bool holds_shard(const ShardSet& shards, uint64_t shard, std::span<const std::byte> bytes) {
    if (bytes.size() != shards.bytes(shard)) return false;
    std::size_t at = 0;
    for (const Segment& s : shards.segments(shard)) {
        for (uint64_t o = s.begin; o < s.end; ++o)
            if (bytes[at++] != content(s.file, o)) return false;
    }
    return true;
}

CoordinatorOptions server_options() {
    CoordinatorOptions o;
    o.token.clear();
    o.port = 0;
    o.tick = 20ms;
    return o;
}

CoordinatorClientOptions client_options() {
    CoordinatorClientOptions o;
    o.token.clear();
    o.request_timeout = 5s;
    o.retry_deadline = 5s;
    o.initial_backoff = 20ms;
    o.max_backoff = 200ms;
    return o;
}

JobSettings one_node() {
    JobSettings s;
    s.min_nodes = 1;
    s.max_nodes = 1;
    s.last_call = 0.0;
    s.heartbeat_interval = 0.1;
    s.failure_timeout = 2.0;
    return s;
}

MembershipOptions member_options(const std::string& url, const std::string& job, const std::string& id) {
    MembershipOptions o;
    o.coordinator = url;
    o.job = job;
    o.node.id = id;
    o.node.host = "host-" + id;
    o.client = client_options();
    return o;
}

MemberDescriptor node(const std::string& id) {
    MemberDescriptor d;
    d.id = id;
    d.host = "host-" + id;
    return d;
}

// The number after "field": in `text` (its first occurrence), or -1.
double number_after(const std::string& text, const std::string& field) {
    const auto at = text.find("\"" + field + "\":");
    if (at == std::string::npos) return -1;
    return std::strtod(text.c_str() + at + field.size() + 3, nullptr);
}

std::string member_entry(const std::string& state, const std::string& id) {
    const auto start = state.find("{\"id\":\"" + id + "\"");
    if (start == std::string::npos) return {};
    const auto end = state.find("{\"id\":", start + 1);
    return state.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s) {
    const auto start = Clock::now();
    while (!done()) {
        if (since(start) > limit) return false;
        std::this_thread::sleep_for(10ms);
    }
    return true;
}

class ShardReaderTest : public ::testing::Test {
protected:
    // A one-node job with `shards` as its dataset plan, and its member in a world.
    Membership& start(const std::string& job, const ShardSet& shards, uint32_t epochs = 1) {
        admin_.create_job(job, one_node());
        admin_.register_dataset(job, dataset_plan_json(shards, epochs));
        member_.emplace(member_options(server_.url(), job, "w0"));
        EXPECT_TRUE(member_->next_world(10s).active);
        return *member_;
    }

    Coordinator server_{server_options()};
    CoordinatorClient admin_{server_.url(), client_options()};
    std::optional<Membership> member_;
};

TEST_F(ShardReaderTest, EveryShardIsReadOncePerEpochWithItsBytes) {
    // Shards of 2.5 KB span files: a shard's bytes come from up to three reads.
    DataFiles files({10000, 1700, 13001});
    const ShardSet shards = ShardSet::split(files.dataset(), {.shard_count = 10});
    Membership& m = start("epochs", shards, 2);
    ShardReader reader(m, shards,
                       {.transfers = {.workers = 2, .prefetch_depth = 3}, .root = files.dir()});
    std::map<uint32_t, std::multiset<uint64_t>> seen;
    for (;;) {
        std::optional<ShardData> shard = reader.next(10s);
        if (!shard) break;
        EXPECT_TRUE(holds_shard(shards, shard->lease.shard, shard->bytes)) << "shard " << shard->lease.shard;
        seen[shard->lease.epoch].insert(shard->lease.shard);
        EXPECT_TRUE(reader.done(shard->lease.lease).counted);
        EXPECT_THAT(error_message(Errc::invalid_argument, [&] { reader.done(shard->lease.lease); }),
                    HasSubstr("not a shard next() handed out"));
    }
    std::multiset<uint64_t> all;
    for (uint64_t s = 0; s < shards.size(); ++s) all.insert(s);
    EXPECT_EQ(seen[0], all);
    EXPECT_EQ(seen[1], all);
    EXPECT_EQ(seen.size(), 2u);
    EXPECT_FALSE(reader.next(1s).has_value());  // still finished
    const ShardReaderStats stats = reader.stats();
    EXPECT_EQ(stats.shards, 20u);
    EXPECT_EQ(stats.bytes, 2 * files.dataset().total_bytes());
    EXPECT_EQ(stats.reported, 20u);
    EXPECT_EQ(stats.prefetch_hits + stats.prefetch_misses, 20u);
    EXPECT_EQ(stats.failed, 0u);
    EXPECT_EQ(stats.ahead, 0u);
    EXPECT_LE(stats.max_ahead, 3u);
    EXPECT_TRUE(stats.finished);
    EXPECT_EQ(number_after(admin_.job_state("epochs"), "done"), 10);
}

// A policy whose reduce_prefetch factor the test sets.
TransferPolicy factor_policy(std::atomic<double>& factor) {
    return [&factor](const TransferFacts&) {
        std::vector<PolicyAction> actions;
        const double f = factor.load();
        if (f < 1.0) {
            actions.push_back({.rule = "reduce_prefetch_on_memory_pressure",
                               .type = "reduce_prefetch",
                               .category = "memory",
                               .factor = f,
                               .values = {{"gpu_memory", 91}}});
        }
        return actions;
    };
}

TEST_F(ShardReaderTest, TheShardsAheadFollowAPolicyThatReducesPrefetch) {
    DataFiles files({40 * 1000});
    const ShardSet shards = ShardSet::split(files.dataset(), {.shard_count = 40});
    Membership& m = start("depth", shards);
    std::atomic<double> factor{1.0};
    TransferScheduler scheduler({.workers = 2, .prefetch_depth = 8, .policy = factor_policy(factor)});
    ShardReader reader(m, shards, {.scheduler = &scheduler, .root = files.dir()});
    const auto leased = [&] { return number_after(admin_.job_state("depth"), "leased"); };

    // A loop that does not ask: the reader fills the full depth, and no more.
    ASSERT_TRUE(eventually([&] { return reader.stats().ahead == 8; })) << reader.stats().ahead;
    std::this_thread::sleep_for(150ms);
    EXPECT_EQ(reader.stats().ahead, 8u);
    EXPECT_EQ(leased(), 8);
    EXPECT_EQ(reader.stats().depth, 8u);

    // Memory pressure: 8 x 0.25 = 2 ahead once the policy is next asked.
    factor = 0.25;
    for (int i = 0; i < 12; ++i) {
        std::optional<ShardData> shard = reader.next(10s);
        ASSERT_TRUE(shard);
        EXPECT_TRUE(holds_shard(shards, shard->lease.shard, shard->bytes));
        reader.done(shard->lease.lease);
        std::this_thread::sleep_for(20ms);
    }
    std::this_thread::sleep_for(150ms);
    ShardReaderStats stats = reader.stats();
    EXPECT_EQ(stats.depth, 2u);
    EXPECT_LE(stats.ahead, 2u);
    EXPECT_LE(leased(), 2);  // every shard handed out was reported
    EXPECT_EQ(scheduler.stats().prefetch_depth, 2u);
    EXPECT_EQ(scheduler.stats().prefetch_factor, 0.25);
    // Reads in flight and read ahead never pass the depth while it holds.
    for (int i = 0; i < 8; ++i) {
        std::optional<ShardData> shard = reader.next(10s);
        ASSERT_TRUE(shard);
        reader.done(shard->lease.lease);
        const TransferStats t = scheduler.stats();
        EXPECT_LE(t.running + t.queued, 2u);
        EXPECT_LE(reader.stats().ahead, 2u);
        EXPECT_LE(leased(), 2);
    }
    EXPECT_GT(reader.stats().prefetch_hits, 0u);

    // The pressure ends: the next read asks the policy, and the depth is 8 again.
    factor = 1.0;
    std::optional<ShardData> shard = reader.next(10s);
    ASSERT_TRUE(shard);
    reader.done(shard->lease.lease);
    EXPECT_TRUE(eventually([&] { return reader.stats().ahead == 8; })) << reader.stats().ahead;
    EXPECT_EQ(reader.stats().depth, 8u);
}

TEST_F(ShardReaderTest, AFactorOfZeroReadsOnlyTheShardTheLoopWaitsFor) {
    DataFiles files({4000});
    const ShardSet shards = ShardSet::split(files.dataset(), {.shard_count = 4});
    Membership& m = start("zero", shards);
    std::atomic<double> factor{0.0};
    TransferScheduler scheduler({.workers = 1, .prefetch_depth = 4, .policy = factor_policy(factor)});
    ShardReader reader(m, shards, {.scheduler = &scheduler, .root = files.dir()});
    std::set<uint64_t> seen;
    while (std::optional<ShardData> shard = reader.next(10s)) {
        EXPECT_TRUE(holds_shard(shards, shard->lease.shard, shard->bytes));
        seen.insert(shard->lease.shard);
        reader.done(shard->lease.lease);
        std::this_thread::sleep_for(50ms);
        EXPECT_EQ(reader.stats().ahead, 0u);  // nothing read ahead at depth 0
    }
    EXPECT_EQ(seen.size(), 4u);
    // The first lease, taken before the policy spoke, then only the ones asked for.
    EXPECT_EQ(reader.stats().max_ahead, 1u);
    EXPECT_EQ(reader.stats().shards, 4u);
}

// Holds each transfer for `hold` after the policy first sees it.
TransferPolicy slow_policy(std::chrono::milliseconds hold) {
    auto first_seen = std::make_shared<std::map<std::string, Clock::time_point>>();
    auto mutex = std::make_shared<std::mutex>();
    return [=](const TransferFacts& t) {
        std::lock_guard lock(*mutex);
        const auto at = first_seen->emplace(std::string(t.id), Clock::now()).first->second;
        std::vector<PolicyAction> actions;
        if (Clock::now() - at < hold) {
            actions.push_back(
                {.rule = "slow_storage", .type = "delay_transfer", .category = "io", .delay_seconds = 0.05});
        }
        return actions;
    };
}

TEST_F(ShardReaderTest, DataWaitIsMeasuredAndReachesTheHeartbeat) {
    DataFiles files({3000});
    const ShardSet shards = ShardSet::split(files.dataset(), {.shard_count = 3});
    Membership& m = start("wait", shards);
    ShardReader reader(m, shards,
                       {.transfers = {.workers = 1, .prefetch_depth = 1, .policy = slow_policy(300ms)},
                        .root = files.dir()});
    std::optional<ShardData> first = reader.next(10s);
    ASSERT_TRUE(first);
    EXPECT_FALSE(first->prefetch_hit);
    EXPECT_GE(first->wait_seconds, 0.2);
    reader.done(first->lease.lease);
    ShardReaderStats stats = reader.stats();
    EXPECT_EQ(stats.prefetch_misses, 1u);
    EXPECT_NEAR(stats.data_wait_seconds, first->wait_seconds, 1e-9);

    // The step leaves data_wait unset: the reader's wait fills it.
    m.record_step({.step = 1, .step_time = 1.5});
    std::string entry;
    EXPECT_TRUE(eventually([&] {
        entry = member_entry(admin_.job_state("wait"), "w0");
        return number_after(entry, "step") == 1;
    })) << entry;
    EXPECT_NEAR(number_after(entry, "data_wait"), first->wait_seconds, 1e-3) << entry;

    // A data wait the program measured itself wins, and the sum starts again.
    std::optional<ShardData> second = reader.next(10s);
    ASSERT_TRUE(second);
    reader.done(second->lease.lease);
    m.record_step({.step = 2, .step_time = 1.0, .data_wait = 0.75});
    EXPECT_TRUE(eventually([&] {
        entry = member_entry(admin_.job_state("wait"), "w0");
        return number_after(entry, "step") == 2;
    })) << entry;
    EXPECT_EQ(number_after(entry, "data_wait"), 0.75);
    m.record_step({.step = 3, .step_time = 1.0});
    EXPECT_TRUE(eventually([&] {
        entry = member_entry(admin_.job_state("wait"), "w0");
        return number_after(entry, "step") == 3;
    })) << entry;
    EXPECT_EQ(number_after(entry, "data_wait"), 0) << "nothing waited since step 2";
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { m.add_data_wait(-1); }), HasSubstr("add_data_wait"));
}

TEST_F(ShardReaderTest, AFileShorterThanTheLayoutIsAnErrorNamingShardFileAndOffset) {
    // Listed as 1000 bytes, 600 written: shard 2 (500-750) ends early, shard 3 (750-1000) has nothing.
    DataFiles files({1000}, {600});
    const ShardSet shards = ShardSet::split(files.dataset(), {.shard_count = 4});
    admin_.create_job("short", one_node());
    admin_.register_dataset("short", dataset_plan_json(shards));
    ASSERT_EQ(admin_.join("short", node("w0")).state, "active");
    ShardReader reader(lease_source(admin_, "short", "w0"), shards, {.root = files.dir()});
    std::set<uint64_t> good;
    std::map<uint64_t, std::string> errors;
    for (int i = 0; i < 4; ++i) {
        try {
            std::optional<ShardData> shard = reader.next(10s);
            ASSERT_TRUE(shard);
            EXPECT_TRUE(holds_shard(shards, shard->lease.shard, shard->bytes));
            good.insert(shard->lease.shard);
            reader.done(shard->lease.lease);
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), Errc::io) << e.what();
            const std::string what = e.what();
            const uint64_t shard = what.find("shard 2 (") != std::string::npos ? 2 : 3;
            errors[shard] = what;
        }
    }
    EXPECT_EQ(good, (std::set<uint64_t>{0, 1}));
    ASSERT_EQ(errors.size(), 2u);
    const std::string file = (files.dir() / "part-0.bin").string();
    EXPECT_THAT(errors[2], HasSubstr("shard 2 ('2', lease"));
    EXPECT_THAT(errors[2], HasSubstr(file));
    EXPECT_THAT(errors[2], HasSubstr("offset 500"));
    EXPECT_THAT(errors[2], HasSubstr("member 'w0' of job 'short'"));
    EXPECT_THAT(errors[3], HasSubstr("shard 3 ('3', lease"));
    EXPECT_THAT(errors[3], HasSubstr("offset 750"));
    EXPECT_EQ(reader.stats().failed, 2u);
    // The failed shards are not reported: they stay leased until their
    // lease expires, so the epoch is not over and there is nothing to lease.
    EXPECT_THAT(error_message(Errc::timeout, [&] { reader.next(200ms); }), HasSubstr("for a lease"));
    EXPECT_FALSE(reader.stats().finished);
    EXPECT_EQ(number_after(admin_.job_state("short"), "leased"), 2);
}

TEST_F(ShardReaderTest, APlanOfAnotherLayoutIsAMismatch) {
    DataFiles files({1000});
    const ShardSet mine = ShardSet::split(files.dataset(), {.shard_count = 2});
    const ShardSet theirs = ShardSet::split(files.dataset(), {.shard_count = 3});
    admin_.create_job("other", one_node());
    admin_.register_dataset("other", dataset_plan_json(theirs));
    ASSERT_EQ(admin_.join("other", node("w0")).state, "active");
    ShardReader reader(lease_source(admin_, "other", "w0"), mine, {.root = files.dir()});
    std::vector<std::string> errors;
    for (int i = 0; i < 3; ++i) {
        try {
            reader.next(10s);
            ADD_FAILURE() << "a shard of another layout was handed out";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), Errc::mismatch) << e.what();
            errors.push_back(e.what());
        }
    }
    ASSERT_EQ(errors.size(), 3u);
    for (const std::string& e : errors) EXPECT_THAT(e, HasSubstr("dataset_plan_json"));
    EXPECT_THAT(errors[2], HasSubstr("has 2 shards, so it has no shard 2"));
    EXPECT_THAT(errors[0], HasSubstr("shard 0 ('0', lease"));
    EXPECT_THAT(errors[0], HasSubstr("bytes, the reader's layout 500"));
    EXPECT_EQ(reader.stats().shards, 0u);
}

// The reader's end gives back what it holds (read ahead, and handed out
// without done()): the coordinator shows none leased, and the next reader
// gets those shards at once, not after the leases' minute. Without
// release_on_close they stay leased.
TEST_F(ShardReaderTest, ItsEndGivesTheLeasesItHoldsBack) {
    DataFiles files({8 * 1000});
    const ShardSet shards = ShardSet::split(files.dataset(), {.shard_count = 8});
    Membership& m = start("release", shards);
    const auto leased = [&] { return number_after(admin_.job_state("release"), "leased"); };
    {
        ShardReader reader(m, shards, {.transfers = {.workers = 2, .prefetch_depth = 4}, .root = files.dir()});
        const std::optional<ShardData> first = reader.next(10s);
        ASSERT_TRUE(first.has_value());
        ASSERT_TRUE(eventually([&] { return reader.stats().ahead >= 3; }));
        EXPECT_GE(leased(), 4);
    }
    EXPECT_EQ(leased(), 0);
    EXPECT_GE(number_after(admin_.job_state("release"), "released"), 4);
    {
        ShardReader reader(m, shards, {.transfers = {.workers = 1, .prefetch_depth = 2}, .root = files.dir(),
                                       .release_on_close = false});
        std::set<uint64_t> seen;
        for (;;) {
            std::optional<ShardData> shard = reader.next(10s);
            ASSERT_TRUE(shard.has_value()) << "the shards given back were not leased again";
            seen.insert(shard->lease.shard);
            reader.done(shard->lease.lease);
            if (seen.size() == 7) break;  // all but one: some stay read ahead
        }
        ASSERT_TRUE(eventually([&] { return reader.stats().ahead >= 1; }));
    }
    EXPECT_GE(leased(), 1);  // kept: they go back when the leases expire
}

TEST(ShardReader, ASourceThatFailsOrHasNothingIsAnErrorNotAHang) {
    DataFiles files({100});
    const ShardSet shards = ShardSet::split(files.dataset(), {.shard_count = 1});
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { ShardReader r(ShardLeaseSource{}, shards); }),
                HasSubstr("next_shard and shard_done"));
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [&] {
                                  ShardReader r({.next_shard = [] { return ShardLease{}; },
                                                 .shard_done = [](uint64_t) { return ShardDone{}; }},
                                                shards, {.poll_interval = 0ms});
                              }),
                HasSubstr("poll_interval"));

    // The first ask fails; then nothing to lease now (others hold every shard): next() times out.
    std::atomic<int> asked{0};
    std::atomic<bool> fail{true};
    ShardLeaseSource source{.next_shard =
                                [&] {
                                    ++asked;
                                    if (fail.exchange(false)) throw Error(Errc::unavailable, "coordinator down");
                                    return ShardLease{};  // not granted, not finished
                                },
                            .shard_done = [](uint64_t) { return ShardDone{}; },
                            .name = "the test's source"};
    ShardReader reader(source, shards, {.root = files.dir(), .poll_interval = 5ms});
    EXPECT_THAT(error_message(Errc::unavailable, [&] { reader.next(5s); }),
                HasSubstr("the test's source: asking for a lease failed: coordinator down"));
    const int before = asked.load();
    EXPECT_THAT(error_message(Errc::timeout, [&] { reader.next(200ms); }), HasSubstr("for a lease"));
    EXPECT_GT(asked.load(), before + 1);  // polled again after the error was handed out
    EXPECT_GE(reader.stats().data_wait_seconds, 0.2);
    EXPECT_THAT(dataset_plan_json(shards, 3), HasSubstr("\"epochs\": 3"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { dataset_plan_json(shards, 0); }), HasSubstr("epochs"));
}

}  // namespace
}  // namespace cohort::test
