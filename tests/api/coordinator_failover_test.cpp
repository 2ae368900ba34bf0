// CoordinatorClient across the replicas of a highly available coordinator,
// without the real replicas: FakeReplica (fake_replica.hpp) plays a leader
// (forwarding to a real in-process Coordinator) or a follower (503
// not_leader, with or without X-Cohort-Leader). A dead URL before a live
// one, a follower naming the leader, a leader that dies in the middle of a
// member's life (join, heartbeats, a parked store get) with no new round
// and no rank change, a parked store wait re-asked for what is left of it,
// a join whose answer died with the old leader and is
// not applied twice on the new one, the leader found through a real etcd's
// leader key, and lists that are refused saying why.
#include "../fixtures/etcd_cluster.hpp"
#include "comm_support.hpp"
#include "fake_replica.hpp"
#include "support.hpp"

#include <cohort/coordinator.hpp>
#include <cohort/coordinator_client.hpp>
#include <cohort/membership.hpp>
#include <cohort/store.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <set>
#include <string>
#include <thread>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;
using clock_type = std::chrono::steady_clock;

CoordinatorOptions server_options() {
    CoordinatorOptions o;
    o.tick = std::chrono::milliseconds(20);
    return o;
}

CoordinatorClientOptions quick(std::chrono::milliseconds retry = 5s) {
    CoordinatorClientOptions o;
    o.request_timeout = 5s;
    o.retry_deadline = retry;
    o.initial_backoff = 20ms;
    o.max_backoff = 100ms;
    return o;
}

JobSettings closes_at(uint32_t nodes) {
    JobSettings s;
    s.min_nodes = nodes;
    s.max_nodes = nodes;
    s.last_call = 0.0;
    s.heartbeat_interval = 0.05;
    s.failure_timeout = 30.0;
    return s;
}

MemberDescriptor node(std::string id) {
    MemberDescriptor d;
    d.id = std::move(id);
    d.host = "host-" + d.id;
    return d;
}

// A loopback URL where nothing listens.
std::string dead_url() {
    return "http://127.0.0.1:" + std::to_string(free_ports(1).front());
}

double seconds_since(clock_type::time_point start) {
    return std::chrono::duration<double>(clock_type::now() - start).count();
}

TEST(CoordinatorFailover, ADeadFirstUrlIsPassedOverAtOnce) {
    Coordinator server(server_options());
    const std::string dead = dead_url();
    CoordinatorClient client(dead + "," + server.url(), quick());
    EXPECT_EQ(client.url(), dead + "," + server.url());
    const auto start = clock_type::now();
    client.create_job("j", closes_at(1));
    // The next URL right after the refusal: no backoff before it.
    EXPECT_LT(seconds_since(start), 1.0);
    EXPECT_EQ(client.leader_url(), server.url());
    EXPECT_EQ(client.join("j", node("a")).state, "active");
}

TEST(CoordinatorFailover, AFollowerNamingTheLeaderIsLeftForIt) {
    Coordinator server(server_options());
    FakeReplica follower(server.port());
    follower.follow(server.url());
    CoordinatorClient client(follower.url(), quick());
    const auto start = clock_type::now();
    client.create_job("j", closes_at(1));
    EXPECT_LT(seconds_since(start), 1.0);
    EXPECT_EQ(follower.refused(), 1);
    EXPECT_EQ(follower.forwarded(), 0);
    // Remembered: later calls go to the leader straight away.
    EXPECT_EQ(client.leader_url(), server.url());
    client.join("j", node("a"));
    client.heartbeat("j", "a", 0);
    EXPECT_EQ(follower.refused(), 1);
    EXPECT_EQ(client.url(), follower.url());  // the address as given stays
}

TEST(CoordinatorFailover, AFollowerInAnElectionSendsTheClientDownTheList) {
    Coordinator server(server_options());
    FakeReplica follower(server.port());
    follower.follow("");
    CoordinatorClient client(follower.url() + "," + server.url(), quick());
    client.create_job("j", closes_at(1));
    EXPECT_EQ(follower.refused(), 1);
    EXPECT_EQ(client.leader_url(), server.url());
}

TEST(CoordinatorFailover, TheLeaderDiesMidJobWithoutANewRoundOrRankChange) {
    Coordinator server(server_options());
    FakeReplica a(server.port());
    FakeReplica b(server.port());
    b.follow(a.url());
    CoordinatorClient direct(server.url(), quick());
    // b first: it names a, the leader.
    CoordinatorClient client(b.url() + "," + a.url(), quick());
    client.create_job("j", closes_at(2));
    direct.join("j", node("other"));
    const JoinReply joined = client.join("j", node("m"));
    ASSERT_EQ(joined.state, "active");
    ASSERT_TRUE(joined.rank);
    const uint64_t generation = joined.generation;
    EXPECT_EQ(client.leader_url(), a.url());
    for (int i = 0; i < 3; ++i) EXPECT_FALSE(client.heartbeat("j", "m", generation).rendezvous);

    // A get parked on a when it dies; b leads from then on.
    auto parked = std::async(std::launch::async, [&] {
        const auto start = clock_type::now();
        std::string value = client.store_get("j", generation, "late", 8s);
        return std::make_pair(value, seconds_since(start));
    });
    std::this_thread::sleep_for(1200ms);  // parked longer than the client's kParked (1 s)
    b.lead();
    a.follow(b.url());
    a.kill();
    std::this_thread::sleep_for(300ms);
    direct.store_set("j", generation, "late", "v");
    ASSERT_EQ(parked.wait_for(10s), std::future_status::ready);
    const auto [value, took] = parked.get();
    EXPECT_EQ(value, "v");
    EXPECT_LT(took, 8.0);
    EXPECT_EQ(client.leader_url(), b.url());
    // b got the get again with what was left of its wait, not the whole 8 s.
    bool rewaited = false;
    for (const auto& [line, key] : b.seen()) {
        if (line.find("/store/") == std::string::npos || line.find("timeout_ms=") == std::string::npos) continue;
        const auto ms = std::stol(line.substr(line.find("timeout_ms=") + 11));
        EXPECT_LT(ms, 7000) << line;
        rewaited = true;
    }
    EXPECT_TRUE(rewaited);

    // The member goes on in the same world.
    for (int i = 0; i < 3; ++i) {
        const HeartbeatReply beat = client.heartbeat("j", "m", generation);
        EXPECT_FALSE(beat.rendezvous);
        EXPECT_EQ(beat.state, "active");
    }
    const MemberWorld w = client.world("j", "m");
    EXPECT_TRUE(w.active);
    EXPECT_EQ(w.generation, generation);
    EXPECT_EQ(w.rank, *joined.rank);
    EXPECT_EQ(w.world_size, 2u);
}

TEST(CoordinatorFailover, AParkedStoreWaitAsksTheNewLeaderForWhatIsLeft) {
    Coordinator server(server_options());
    FakeReplica a(server.port());
    FakeReplica b(server.port());
    b.follow(a.url());
    CoordinatorClient direct(server.url(), quick());
    CoordinatorClient client(a.url() + "," + b.url(), quick());
    client.create_job("w", closes_at(1));
    const uint64_t generation = client.join("w", node("m")).generation;
    auto parked = std::async(std::launch::async, [&] {
        const auto start = clock_type::now();
        const std::vector<std::string> keys{"x", "y"};
        client.store_wait("w", generation, keys, 8s);
        return seconds_since(start);
    });
    std::this_thread::sleep_for(1200ms);
    direct.store_set("w", generation, "x", "1");
    b.lead();
    a.kill();
    std::this_thread::sleep_for(300ms);
    direct.store_set("w", generation, "y", "2");
    ASSERT_EQ(parked.wait_for(10s), std::future_status::ready);
    EXPECT_LT(parked.get(), 8.0);
    // b's wait asked for what was left of the 8 s.
    const auto lines = b.seen();
    const auto bodies = b.bodies();
    bool rewaited = false;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (lines[i].first.find("/wait") == std::string::npos) continue;
        const auto at = bodies[i].find("\"timeout_ms\":");
        ASSERT_NE(at, std::string::npos) << bodies[i];
        EXPECT_LT(std::stol(bodies[i].substr(at + 13)), 7000) << bodies[i];
        rewaited = true;
    }
    EXPECT_TRUE(rewaited);
}

TEST(CoordinatorFailover, AJoinWhoseAnswerDiedWithTheLeaderIsNotAppliedTwice) {
    Coordinator server(server_options());
    FakeReplica a(server.port());
    FakeReplica b(server.port());
    b.follow(a.url());
    CoordinatorClient direct(server.url(), quick());
    CoordinatorClient client(a.url() + "," + b.url(), quick());
    client.create_job("j", closes_at(2));
    direct.join("j", node("first"));
    // a passes the join on, the Coordinator makes it, and a dies before
    // answering; b leads and, sharing the Coordinator's kept answers as the
    // real replicas share them through etcd, answers the retry.
    a.die_after("/join");
    b.lead();
    const JoinReply joined = client.join("j", node("second"));
    EXPECT_EQ(joined.state, "active");
    ASSERT_TRUE(joined.rank);
    EXPECT_EQ(client.leader_url(), b.url());

    // The same Idempotency-Key reached both replicas.
    std::string key_a, key_b;
    for (const auto& [line, key] : a.seen())
        if (line.find("/join") != std::string::npos) key_a = key;
    for (const auto& [line, key] : b.seen())
        if (line.find("/join") != std::string::npos) key_b = key;
    EXPECT_FALSE(key_a.empty());
    EXPECT_EQ(key_a, key_b);

    // Applied once: one world of two, formed once, no round pending.
    const MemberWorld w = direct.world("j", "first");
    ASSERT_TRUE(w.active);
    EXPECT_EQ(w.world_size, 2u);
    EXPECT_EQ(w.generation, joined.generation);
    const std::string state = direct.job_state("j");
    EXPECT_EQ(state.find("\"id\":\"second\""), state.rfind("\"id\":\"second\""));
    EXPECT_FALSE(direct.heartbeat("j", "first", w.generation).rendezvous);
}

TEST(CoordinatorFailover, ShardsAreNeitherLostNorCountedTwiceAcrossAFailover) {
    Coordinator server(server_options());
    FakeReplica a(server.port());
    FakeReplica b(server.port());
    b.follow(a.url());
    CoordinatorClient direct(server.url(), quick());
    CoordinatorClient client(a.url() + "," + b.url(), quick());
    client.create_job("d", closes_at(1));
    client.join("d", node("m"));
    client.register_dataset("d", R"({"shards": [{"id": "s0"}, {"id": "s1"}, {"id": "s2"}]})");
    const ShardLease first = client.next_shard("d", "m");
    ASSERT_TRUE(first.granted);
    // The done of the first shard is made, and its answer lost with a.
    a.die_after("/shards/done");
    b.lead();
    const ShardDone done = client.shard_done("d", "m", first.lease);
    EXPECT_NE(done.outcome, "already_done");  // the first answer: the caller knows it counted
    std::set<std::string> seen{first.shard_id};
    for (int i = 0; i < 10; ++i) {
        const ShardLease next = client.next_shard("d", "m");
        if (!next.granted) {
            EXPECT_TRUE(next.finished);
            break;
        }
        EXPECT_TRUE(seen.insert(next.shard_id).second) << next.shard_id << " handed out twice";
        EXPECT_EQ(client.shard_done("d", "m", next.lease).outcome, "counted");
    }
    EXPECT_EQ(seen, (std::set<std::string>{"s0", "s1", "s2"}));
    EXPECT_THAT(direct.job_state("d"), HasSubstr("\"done\":3"));
}

TEST(CoordinatorFailover, FollowersNamingEachOtherAreNotChasedForever) {
    Coordinator server(server_options());
    FakeReplica a(server.port());
    FakeReplica b(server.port());
    a.follow(b.url());
    b.follow(a.url());
    CoordinatorClient client(a.url() + "," + b.url(), quick(600ms));
    const auto start = clock_type::now();
    const std::string message = error_message(Errc::unavailable, [&] { client.job_state("j"); });
    EXPECT_LT(seconds_since(start), 3.0);
    EXPECT_THAT(message, HasSubstr(a.url()));
    EXPECT_THAT(message, HasSubstr(b.url()));
    EXPECT_THAT(message, HasSubstr("hops"));
    // Four hops, then a pause: a few dozen requests at most, not thousands.
    EXPECT_LT(a.refused() + b.refused(), 100);
}

TEST(CoordinatorFailover, AnErrorAfterTheDeadlineNamesEveryUrlTried) {
    const std::string first = dead_url(), second = dead_url();
    CoordinatorClient client(first + "," + second, quick(300ms));
    const std::string message = error_message(Errc::unavailable, [&] { client.job_state("j"); });
    EXPECT_THAT(message, HasSubstr(first));
    EXPECT_THAT(message, HasSubstr(second));
    EXPECT_THAT(message, HasSubstr("is the coordinator running there?"));
}

TEST(CoordinatorFailover, OneAttemptTriesEachReplicaOnce) {
    // Membership's heartbeats use one attempt (retry_deadline 0).
    Coordinator server(server_options());
    CoordinatorClient client(dead_url() + "," + server.url(), quick(0ms));
    client.create_job("j", closes_at(1));
    EXPECT_EQ(client.leader_url(), server.url());
}

TEST(CoordinatorFailover, BadListsAreRefusedSayingWhatAndWhere) {
    auto message = [](const std::string& url) {
        return error_message(Errc::invalid_argument, [&] { CoordinatorClient client(url); });
    };
    EXPECT_THAT(message(""), HasSubstr("empty"));
    EXPECT_THAT(message("http://a:1,,http://b:2"), HasSubstr("entry 2 is empty"));
    EXPECT_THAT(message("http://a:1,ftp://b:2"), HasSubstr("entry 2 ('ftp://b:2') scheme 'ftp' is not http or https"));
    EXPECT_THAT(message("http://a:1,b:2"), HasSubstr("entry 2 ('b:2') has no http://"));
    EXPECT_THAT(message("http://a:1,http://b"), HasSubstr("entry 2 ('http://b') has no port"));
    EXPECT_THAT(message("http://a:1,http://a:1/"), HasSubstr("listed twice"));
    EXPECT_THAT(message("http://a:1,etcd://e:2379/p"), HasSubstr("an etcd:// URL stands alone"));
    EXPECT_THAT(message("http://a:1/v1"), HasSubstr("has a path"));
    EXPECT_THAT(message("etcd:///p"), HasSubstr("no etcd endpoint"));
    EXPECT_THAT(message("etcd://e/p"), HasSubstr("has no port"));
    EXPECT_THAT(message("etcd://e:2379/p?cacrt=x"), HasSubstr("did you mean 'cacert'"));
    EXPECT_THAT(message("etcd://e:2379/p?user=u"), HasSubstr("needs password-file"));
}

TEST(CoordinatorFailover, NormalizeAddsTheSchemeToEachEntry) {
    EXPECT_EQ(normalize_coordinator_url("a:1,http://b:2"), "http://a:1,http://b:2");
    EXPECT_EQ(normalize_coordinator_url("etcd://e:2379/p"), "etcd://e:2379/p");
    EXPECT_THROW(normalize_coordinator_url("a:1,"), Error);
}

TEST(CoordinatorFailover, TheCoordinatorStoreTakesAList) {
    Coordinator server(server_options());
    CoordinatorClient direct(server.url(), quick());
    direct.create_job("s", closes_at(1));
    const uint64_t generation = direct.join("s", node("a")).generation;
    const std::string dead = dead_url();
    const std::string authorities = dead.substr(7) + "," + server.url().substr(7);
    StoreOptions options;
    options.timeout = 5s;
    auto store = open_store("coordinator://" + authorities + "/s/" + std::to_string(generation), options);
    EXPECT_EQ(store->address(), "coordinator://" + authorities + "/s/" + std::to_string(generation));
    store->set("k", "v");
    EXPECT_EQ(store->get("k", 1s), "v");
    EXPECT_EQ(store->host(), "127.0.0.1");
    EXPECT_EQ(direct.store_get("s", generation, "k", 0ms), "v");
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { open_store("coordinator://h:1,,h:2/s/1"); }),
                HasSubstr("replica 2 is empty"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { open_store("coordinator://h:1,h/s/1"); }),
                HasSubstr("no port in 'h'"));
}

TEST(CoordinatorFailover, MembershipFollowsAListFromTheEnvironmentForm) {
    Coordinator server(server_options());
    CoordinatorClient direct(server.url(), quick());
    direct.create_job("m", closes_at(1));
    MembershipOptions options;
    // HOST:PORT entries, as COHORT_COORDINATOR may give them.
    options.coordinator = dead_url().substr(7) + "," + server.url().substr(7);
    options.job = "m";
    options.node.id = "w";
    options.client = quick();
    Membership member(options);
    const MemberWorld w = member.next_world(10s);
    EXPECT_TRUE(w.active);
    EXPECT_EQ(w.world_size, 1u);
    EXPECT_EQ(member.client().leader_url(), server.url());
}

// The leader key as the replicas write it.
void write_leader(const EtcdCluster& etcd, const std::string& key, const std::string& url) {
    std::string out;
    ASSERT_TRUE(etcd.etcdctl("put " + key + " '{\"id\":\"r\",\"url\":\"" + url + "\",\"since\":1}'", &out)) << out;
}

TEST(CoordinatorFailover, EtcdNamesTheLeaderAndAgainAfterItDies) {
    EtcdCluster etcd;
    Coordinator server(server_options());
    FakeReplica a(server.port());
    FakeReplica b(server.port());
    b.follow(a.url());
    write_leader(etcd, "/cohort/coordinator/leader", a.url());

    CoordinatorClient client("etcd://" + etcd.endpoints(), quick());
    EXPECT_EQ(client.url(), "etcd://" + etcd.endpoints() + "/cohort/coordinator");
    EXPECT_EQ(client.leader_url(), "");
    client.create_job("e", closes_at(1));
    const JoinReply joined = client.join("e", node("m"));
    EXPECT_EQ(client.leader_url(), a.url());
    EXPECT_EQ(b.refused() + b.forwarded(), 0);

    // a dies; until the key names b, the client reads it again and waits.
    a.kill();
    b.lead();
    auto later = std::async(std::launch::async, [&] {
        std::this_thread::sleep_for(400ms);
        write_leader(etcd, "/cohort/coordinator/leader", b.url());
    });
    const auto start = clock_type::now();
    const HeartbeatReply beat = client.heartbeat("e", "m", joined.generation);
    later.get();
    EXPECT_FALSE(beat.rendezvous);
    EXPECT_LT(seconds_since(start), 4.0);
    EXPECT_EQ(client.leader_url(), b.url());
    EXPECT_GE(b.forwarded(), 1);
}

TEST(CoordinatorFailover, EtcdWithAPrefixAndNoLeaderYet) {
    EtcdCluster etcd;
    Coordinator server(server_options());
    CoordinatorClient client("etcd://" + etcd.endpoints() + "/ha/one/", quick(500ms));
    EXPECT_EQ(client.url(), "etcd://" + etcd.endpoints() + "/ha/one");
    const std::string message = error_message(Errc::unavailable, [&] { client.job_state("j"); });
    EXPECT_THAT(message, HasSubstr("no leader key '/ha/one/leader'"));

    write_leader(etcd, "/ha/one/leader", server.url());
    client.create_job("j", closes_at(1));
    EXPECT_EQ(client.leader_url(), server.url());

    // A key that does not hold a leader says what it holds.
    ASSERT_TRUE(etcd.etcdctl("put /ha/two/leader nonsense"));
    CoordinatorClient other("etcd://" + etcd.endpoints() + "/ha/two", quick(300ms));
    EXPECT_THAT(error_message(Errc::unavailable, [&] { other.job_state("j"); }), HasSubstr("holds 'nonsense'"));
}

TEST(CoordinatorFailover, TheCoordinatorStoreFindsTheLeaderThroughEtcd) {
    EtcdCluster etcd;
    Coordinator server(server_options());
    CoordinatorClient direct(server.url(), quick());
    direct.create_job("s", closes_at(1));
    const uint64_t generation = direct.join("s", node("a")).generation;
    write_leader(etcd, "/cohort/coordinator/leader", server.url());
    StoreOptions options;
    options.timeout = 5s;
    const std::string url =
        "coordinator+etcd://" + etcd.endpoints() + "/cohort/coordinator/s/" + std::to_string(generation);
    auto store = open_store(url, options);
    EXPECT_EQ(store->address(), url);
    store->set("k", "v");
    EXPECT_EQ(direct.store_get("s", generation, "k", 0ms), "v");
    EXPECT_EQ(store->host(), "127.0.0.1");
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { open_store("coordinator+etcd://e:1/s"); }),
                HasSubstr("no job and generation"));
}

}  // namespace
}  // namespace cohort::test
