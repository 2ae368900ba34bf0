// CoordinatorClient against a coordinator hosted in the test: rendezvous,
// the store (parked gets included), shards, error mapping, retries through
// a late start and a dead server; and a Communicator that bootstraps
// through a generation's store (open_store("coordinator://...")).
#include "comm_support.hpp"

#include <cohort/communicator.hpp>
#include <cohort/coordinator.hpp>
#include <cohort/coordinator_client.hpp>
#include <cohort/store.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

CoordinatorOptions server_options(std::string token = {}) {
    CoordinatorOptions o;
    o.token = std::move(token);
    o.tick = std::chrono::milliseconds(20);
    return o;
}

CoordinatorClientOptions client_options(std::string token = {}, std::chrono::milliseconds retry = 2s) {
    CoordinatorClientOptions o;
    o.token = std::move(token);
    o.request_timeout = 5s;
    o.retry_deadline = retry;
    o.initial_backoff = 20ms;
    o.max_backoff = 200ms;
    return o;
}

// A job whose round closes as soon as `nodes` have joined.
JobSettings closes_at(uint32_t nodes) {
    JobSettings s;
    s.min_nodes = nodes;
    s.max_nodes = nodes;
    s.last_call = 0.0;
    s.heartbeat_interval = 0.05;
    s.failure_timeout = 5.0;
    return s;
}

MemberDescriptor node(std::string id, std::string address = {}) {
    MemberDescriptor d;
    d.id = std::move(id);
    d.host = "host-" + d.id;
    d.address = std::move(address);
    return d;
}

class CoordinatorClientTest : public ::testing::Test {
protected:
    Coordinator server_{server_options("s3cret")};
    CoordinatorClient client_{server_.url(), client_options("s3cret")};
};

TEST_F(CoordinatorClientTest, JoinHeartbeatWorldLeave) {
    const std::string state = client_.create_job("train", closes_at(2));
    EXPECT_THAT(state, HasSubstr("\"name\":\"train\""));
    // The same settings again is fine.
    client_.create_job("train", closes_at(2));

    const JoinReply first = client_.join("train", node("a", "10.0.0.1:1000"));
    EXPECT_EQ(first.state, "waiting");
    EXPECT_FALSE(first.rank);
    EXPECT_FALSE(client_.world("train", "a").active);
    const HeartbeatReply waiting = client_.heartbeat("train", "a", 0);
    EXPECT_EQ(waiting.state, "waiting");

    const JoinReply second = client_.join("train", node("b", "10.0.0.2:1000"));
    EXPECT_EQ(second.state, "active");
    ASSERT_TRUE(second.rank);
    const cohort::MemberWorld w = client_.world("train", "a");
    ASSERT_TRUE(w.active);
    EXPECT_EQ(w.world_size, 2u);
    EXPECT_EQ(w.generation, second.generation);
    ASSERT_EQ(w.peers.size(), 2u);
    EXPECT_EQ(w.peers[w.rank].id, "a");
    EXPECT_EQ(w.peers[w.rank].address, "10.0.0.1:1000");

    HeartbeatMetrics metrics;
    metrics.step = 12;
    metrics.step_time = 0.5;
    metrics.gpu_json = R"({"util": 90})";
    const HeartbeatReply hb = client_.heartbeat("train", "a", w.generation, metrics);
    EXPECT_EQ(hb.state, "active");
    EXPECT_FALSE(hb.rendezvous);
    EXPECT_THAT(client_.job_state("train"), HasSubstr("\"step\":12"));

    client_.leave("train", "b");
    EXPECT_TRUE(client_.heartbeat("train", "a", w.generation).rendezvous);
}

TEST_F(CoordinatorClientTest, HealthSettingsAndAFailedLeave) {
    cohort::JobSettings settings = closes_at(2);
    settings.health.hang_timeout = 42;
    settings.health.straggler_threshold = 0.5;
    settings.health.reference = "best";
    client_.create_job("h", settings);
    const std::string state = client_.job_state("h");
    EXPECT_THAT(state, HasSubstr("\"hang_timeout\":4.2E1"));
    EXPECT_THAT(state, HasSubstr("\"straggler_threshold\":5E-1"));
    EXPECT_THAT(state, HasSubstr("\"reference\":\"best\""));
    cohort::JobSettings bad = closes_at(2);
    bad.health.reference = "fastest";
    EXPECT_THAT(error_message(cohort::Errc::invalid_argument, [&] { client_.create_job("h2", bad); }),
                HasSubstr("reference"));

    client_.join("h", node("a"));
    client_.join("h", node("b"));
    client_.leave("h", "b", "killed by signal 9");
    const std::string after = client_.job_state("h");
    EXPECT_THAT(after, HasSubstr("killed by signal 9"));
    EXPECT_THAT(after, HasSubstr("\"failed\""));
}

// A survivor reports a dead peer over HTTP: accepted from a member of the
// world, 409 naming why from one outside it; the round then closes with
// the live members alone, without waiting last_call.
TEST_F(CoordinatorClientTest, ASurvivorReportsADeadPeer) {
    cohort::JobSettings settings = closes_at(3);
    settings.min_nodes = 2;
    settings.last_call = 30.0;  // long: the round must not wait for it
    client_.create_job("r", settings);
    for (const char* id : {"a", "b", "c"}) client_.join("r", node(id));
    const cohort::MemberWorld w = client_.world("r", "a");
    ASSERT_TRUE(w.active);
    client_.join("r", node("x"));  // waiting: in no world
    EXPECT_THAT(error_message(cohort::Errc::mismatch, [&] { client_.report_dead("r", "x", w.generation, "c"); }),
                HasSubstr("the reporter is waiting (generation 0), not an active member of generation"));
    EXPECT_THAT(error_message(cohort::Errc::mismatch, [&] { client_.report_dead("r", "a", w.generation + 1, "c"); }),
                HasSubstr("the job has no generation"));
    const cohort::ReportReply reply = client_.report_dead("r", "a", w.generation, "c", "connection closed");
    EXPECT_EQ(reply.member, "c");
    EXPECT_EQ(reply.outcome, "failed");
    EXPECT_EQ(client_.report_dead("r", "b", w.generation, "c").outcome, "already_gone");
    EXPECT_THAT(client_.job_state("r"), HasSubstr("reported dead by node 'a' (generation"));
    // a and b come back; with x waiting too the round may take three, but
    // it closes well before last_call.
    const auto start = std::chrono::steady_clock::now();
    client_.join("r", node("a"));
    client_.join("r", node("b"));
    const cohort::MemberWorld next = client_.wait_for_world("r", "a", 10s);
    EXPECT_GT(next.generation, w.generation);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

// The settings alone, every field filled in with the server's defaults:
// what a member that only needs heartbeat_interval reads.
TEST_F(CoordinatorClientTest, JobSettingsAlone) {
    cohort::JobSettings settings = closes_at(3);
    settings.health.hang_timeout = 42;
    client_.create_job("s", settings);
    const cohort::JobSettings got = client_.job_settings("s");
    EXPECT_EQ(got.min_nodes, 3u);
    EXPECT_EQ(got.max_nodes, 3u);
    EXPECT_EQ(got.heartbeat_interval, 0.05);
    EXPECT_EQ(got.join_timeout, 600.0);  // the default, filled in
    EXPECT_EQ(got.rejoin, "auto");
    EXPECT_EQ(got.health.hang_timeout, 42.0);
    EXPECT_EQ(got.health.window, 120u);
    EXPECT_EQ(got.health.reference, "median");
    // It does not grow with the members, unlike the job's state.
    for (int i = 0; i < 3; ++i) client_.join("s", node("m" + std::to_string(i)));
    EXPECT_EQ(client_.job_settings("s").min_nodes, 3u);
    EXPECT_THAT(error_message(Errc::not_found, [&] { client_.job_settings("nosuch"); }), HasSubstr("nosuch"));
}

TEST_F(CoordinatorClientTest, WaitForWorldHeartbeatsUntilTheRoundCloses) {
    client_.create_job("w", closes_at(2));
    client_.join("w", node("a"));
    auto waiter = std::async(std::launch::async, [&] { return client_.wait_for_world("w", "a", 5s); });
    std::this_thread::sleep_for(150ms);
    client_.join("w", node("b"));
    const cohort::MemberWorld w = waiter.get();
    EXPECT_TRUE(w.active);
    EXPECT_EQ(w.world_size, 2u);

    client_.create_job("alone", closes_at(2));
    client_.join("alone", node("x"));
    const auto start = Clock::now();
    const auto message = error_message(Errc::timeout, [&] { client_.wait_for_world("alone", "x", 200ms); });
    EXPECT_THAT(message, HasSubstr("'x' has no world after 200 ms"));
    EXPECT_LT(since(start), 3s);
}

TEST_F(CoordinatorClientTest, StoreOperations) {
    client_.create_job("s", closes_at(1));
    const uint64_t gen = client_.join("s", node("a")).generation;
    client_.store_set("s", gen, "addr/0", std::string("\0\xff bytes", 8));
    EXPECT_EQ(client_.store_get("s", gen, "addr/0", 0ms), std::string("\0\xff bytes", 8));
    EXPECT_EQ(client_.store_try_get("s", gen, "nope"), std::nullopt);
    EXPECT_EQ(client_.store_add("s", gen, "n", 5), 5);
    EXPECT_EQ(client_.store_add("s", gen, "n", -2), 3);
    auto cas = client_.store_compare_and_set("s", gen, "leader", std::nullopt, "r3");
    EXPECT_TRUE(cas.stored);
    EXPECT_EQ(cas.value, "r3");
    cas = client_.store_compare_and_set("s", gen, "leader", std::nullopt, "r5");
    EXPECT_FALSE(cas.stored);
    EXPECT_EQ(cas.value, "r3");
    EXPECT_TRUE(client_.store_remove("s", gen, "leader"));
    EXPECT_FALSE(client_.store_remove("s", gen, "leader"));

    // A parked get is released by a set from another client.
    CoordinatorClient other(server_.url(), client_options("s3cret"));
    auto getter = std::async(std::launch::async, [&] { return client_.store_get("s", gen, "late", 5s); });
    std::this_thread::sleep_for(100ms);
    other.store_set("s", gen, "late", "here");
    EXPECT_EQ(getter.get(), "here");

    const std::vector<std::string> keys = {"late", "never"};
    EXPECT_THAT(error_message(Errc::timeout, [&] { client_.store_wait("s", gen, keys, 50ms); }), HasSubstr("'never'"));
    EXPECT_THAT(error_message(Errc::timeout, [&] { client_.store_get("s", gen, "never", 50ms); }),
                HasSubstr("'never'"));
    // Another generation's store.
    EXPECT_THAT(error_message(Errc::mismatch, [&] { client_.store_set("s", gen + 1, "k", "v"); }),
                HasSubstr("generation"));
}

TEST_F(CoordinatorClientTest, ShardsAreLeasedAndCountedOnce) {
    client_.create_job("d", closes_at(1));
    client_.join("d", node("a"));
    client_.register_dataset("d", R"({"shards": [{"id": "s0", "bytes": 10}, {"id": "s1", "bytes": 20}]})");
    std::vector<uint64_t> leases;
    for (int i = 0; i < 2; ++i) {
        const ShardLease l = client_.next_shard("d", "a");
        ASSERT_TRUE(l.granted);
        EXPECT_FALSE(l.finished);
        leases.push_back(l.lease);
    }
    EXPECT_FALSE(client_.next_shard("d", "a").granted);
    for (uint64_t lease : leases) EXPECT_TRUE(client_.shard_done("d", "a", lease).counted);
    EXPECT_EQ(client_.shard_done("d", "a", leases[0]).outcome, "already_done");
    const ShardLease end = client_.next_shard("d", "a");
    EXPECT_FALSE(end.granted);
    EXPECT_TRUE(end.finished);
}

// shards/release over HTTP: the shard given back goes to the other member
// at once; a second give-back says so; bad requests are errors by status.
TEST_F(CoordinatorClientTest, ALeaseGivenBackGoesToTheNextMember) {
    client_.create_job("r", closes_at(2));
    client_.join("r", node("a"));
    client_.join("r", node("b"));
    client_.register_dataset("r", R"({"shards": [{"id": "s0", "bytes": 10}], "lease_duration": 3600})");
    const ShardLease held = client_.next_shard("r", "a");
    ASSERT_TRUE(held.granted);
    EXPECT_FALSE(client_.next_shard("r", "b").granted);  // leased to a for an hour
    const ShardRelease r = client_.shard_release("r", "a", held.lease);
    EXPECT_EQ(r.outcome, "released");
    EXPECT_TRUE(r.released);
    EXPECT_EQ(to_json_text(r), R"({"outcome":"released","released":true})");
    const ShardLease again = client_.next_shard("r", "b");
    ASSERT_TRUE(again.granted);
    EXPECT_EQ(again.shard_id, "s0");
    EXPECT_EQ(client_.shard_release("r", "a", held.lease).outcome, "requeued");
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { client_.shard_release("r", "a", again.lease); }),
                HasSubstr("was granted to 'b', not 'a'"));
    EXPECT_THAT(error_message(Errc::not_found, [&] { client_.shard_release("r", "a", 42); }),
                HasSubstr("never granted lease 42"));
    EXPECT_THAT(error_message(Errc::not_found, [&] { client_.shard_release("r", "zed", held.lease); }),
                HasSubstr("no member 'zed'"));
    EXPECT_TRUE(client_.shard_done("r", "b", again.lease).counted);
    EXPECT_EQ(client_.shard_release("r", "b", again.lease).outcome, "reported");
}

TEST_F(CoordinatorClientTest, ErrorsAreMappedByStatus) {
    CoordinatorClient wrong(server_.url(), client_options("wrong"));
    auto message = error_message(Errc::permission_denied, [&] { wrong.job_state("x"); });
    EXPECT_THAT(message, HasSubstr(server_.url()));
    EXPECT_THAT(message, HasSubstr("401"));

    message = error_message(Errc::not_found, [&] { client_.job_state("no-such-job"); });
    EXPECT_THAT(message, HasSubstr("no-such-job"));

    client_.create_job("e", closes_at(1));
    EXPECT_THAT(error_message(Errc::mismatch, [&] { client_.create_job("e", closes_at(3)); }), HasSubstr("409"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { client_.create_job_json("e2", R"({"min_nodes": -1})"); }),
                HasSubstr("min_nodes"));
    const uint64_t gen = client_.join("e", node("a")).generation;
    EXPECT_THAT(error_message(Errc::mismatch, [&] { client_.heartbeat("e", "a", gen + 7); }), HasSubstr("generation"));
    EXPECT_THROW(CoordinatorClient("localhost:1"), Error);
}

// max_members caps the members held across all jobs: a new member past it
// is refused (503, naming the cap) and retried to the deadline like any
// 503; one that joins again is not a new one; deleting a job frees its
// places.
TEST(CoordinatorMemberCap, NewMembersPastTheCapAreRefused) {
    CoordinatorOptions o = server_options();
    o.max_members = 3;
    Coordinator server(o);
    CoordinatorClient client(server.url(), client_options({}, 200ms));
    client.create_job("a", closes_at(2));
    client.create_job("b", closes_at(2));
    client.join("a", node("a1"));
    client.join("a", node("a2"));
    client.join("b", node("b1"));
    const std::string message = error_message(Errc::unavailable, [&] { client.join("b", node("b2")); });
    EXPECT_THAT(message, HasSubstr("holds 3 members across its jobs"));
    EXPECT_THAT(message, HasSubstr("--max-members"));
    client.leave("a", "a2");
    client.join("a", node("a2"));  // known: joins again
    client.delete_job("a");
    client.join("b", node("b2"));
    EXPECT_THAT(client.job_state("b"), HasSubstr("\"id\":\"b2\""));
}

TEST(CoordinatorClientRetry, ServerThatStartsLateIsReached) {
    const uint16_t port = free_port();
    ASSERT_NE(port, 0);
    CoordinatorClient client("http://127.0.0.1:" + std::to_string(port), client_options({}, 10s));
    std::optional<Coordinator> server;
    std::thread starter([&] {
        std::this_thread::sleep_for(300ms);
        CoordinatorOptions o = server_options();
        o.port = port;
        server.emplace(o);
    });
    const auto start = Clock::now();
    std::string state;
    EXPECT_NO_THROW(state = client.create_job("late", closes_at(1)));
    starter.join();
    EXPECT_GE(since(start), 250ms);
    EXPECT_THAT(state, HasSubstr("late"));
}

TEST(CoordinatorClientRetry, DeadServerIsUnavailableWithinTheDeadline) {
    const uint16_t port = free_port();
    ASSERT_NE(port, 0);
    const std::string url = "http://127.0.0.1:" + std::to_string(port);
    CoordinatorClient client(url, client_options({}, 500ms));
    const auto start = Clock::now();
    const auto message = error_message(Errc::unavailable, [&] { client.job_state("x"); });
    EXPECT_LT(since(start), 3s);
    EXPECT_GE(since(start), 400ms);
    EXPECT_THAT(message, HasSubstr(url));
    EXPECT_THAT(message, HasSubstr("curl error"));
}

TEST(CoordinatorStore, UrlsAndSemantics) {
    Coordinator server(server_options());
    CoordinatorClient client(server.url(), client_options());
    client.create_job("job", closes_at(1));
    const uint64_t gen = client.join("job", node("a")).generation;
    const std::string url = "coordinator://" + server.url().substr(7) + "/job/" + std::to_string(gen);
    StoreOptions options;
    options.timeout = 2s;
    auto store = open_store(url, options);
    EXPECT_EQ(store->address(), url);
    EXPECT_EQ(store->host(), "127.0.0.1");
    EXPECT_EQ(scoped_store(store, "p/")->host(), "127.0.0.1");
    store->set("k", "v");
    EXPECT_EQ(open_store(url, options)->get("k", 1s), "v");
    EXPECT_EQ(store->try_get("absent"), std::nullopt);
    EXPECT_EQ(store->add("n", 2), 2);
    EXPECT_EQ(store->compare_and_set("c", std::nullopt, "x"), "x");
    EXPECT_EQ(store->compare_and_set("c", std::nullopt, "y"), "x");
    EXPECT_EQ(store->compare_and_set("absent", "x", "y"), "");
    EXPECT_THAT(error_message(Errc::timeout, [&] { store->get("never", 30ms); }),
                HasSubstr("key 'never' not set after 30 ms"));
    const std::vector<std::string> keys = {"k", "never"};
    EXPECT_THAT(error_message(Errc::timeout, [&] { store->wait(keys, 30ms); }), HasSubstr(url));
    EXPECT_TRUE(store->remove("k"));

    for (const std::string bad : {"coordinator://127.0.0.1/job/1", "coordinator://127.0.0.1:1/job",
                                  "coordinator://127.0.0.1:1/job/x", "coordinator://127.0.0.1:99999/job/1"}) {
        EXPECT_THAT(error_message(Errc::invalid_argument, [&] { open_store(bad); }), HasSubstr(bad));
    }
}

// Three members join; their world's generation store bootstraps a
// Communicator, and an all-reduce goes through it.
TEST(CoordinatorStore, CommunicatorBootstrapsThroughAGeneration) {
    Coordinator server(server_options());
    CoordinatorClient admin(server.url(), client_options());
    admin.create_job("comm", closes_at(3));
    constexpr int kRanks = 3;
    const auto outcomes = spawn(kRanks, [&](int i, int) {
        auto client = std::make_shared<CoordinatorClient>(server.url(), client_options());
        const std::string id = "member-" + std::to_string(i);
        client->join("comm", node(id));
        const cohort::MemberWorld w = client->wait_for_world("comm", id, 10s);
        StoreOptions so;
        so.timeout = 10s;
        const std::string url = "coordinator://" + server.url().substr(7) + "/comm/" + std::to_string(w.generation);
        CommOptions options;
        options.rank = static_cast<int>(w.rank);
        options.size = static_cast<int>(w.world_size);
        options.store = open_store(url, so);
        options.job_id = "comm";
        options.generation = w.generation;
        options.timeout = 10s;
        options.connect_timeout = 10s;
        Communicator comm(options);
        // No address given: the rank listens where the coordinator is
        // reached, here loopback, and not on the default route's interface.
        const std::string described = comm.describe();
        if (described.find(R"("listen":{"address":"127.0.0.1")") == std::string::npos ||
            described.find(R"("chosen_by":"the store is on this machine")") == std::string::npos)
            throw std::runtime_error("listens elsewhere than on the route to the coordinator: " + described);
        std::vector<int32_t> data = {static_cast<int32_t>(w.rank) + 1, 10};
        comm.allreduce(std::span<int32_t>(data));
        if (data[0] != 6 || data[1] != 30) throw std::runtime_error("wrong sum");
    });
    expect_ok(outcomes);
}

}  // namespace
}  // namespace cohort::test
