// The etcd:// store, as a user opens it (open_store, CommOptions::store_url)
// against a real etcd: every operation, waits woken by writers, races of add
// and compare_and_set, keys that go with the lease once every store has
// closed, a 3-member cluster losing a member, etcd down, and auth.
#include "../fixtures/etcd_cluster.hpp"
#include "comm_support.hpp"

#include <cohort/communicator.hpp>
#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <set>

namespace cohort::test {
namespace {

std::shared_ptr<Store> open_etcd(const EtcdCluster& etcd, const std::string& prefix, const std::string& query = "",
                                 std::chrono::milliseconds timeout = 10s) {
    StoreOptions options;
    options.timeout = timeout;
    return open_store("etcd://" + etcd.endpoints() + prefix + query, options);
}

template <typename F>
std::string error_of(Errc code, F&& f) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), code) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no Error thrown";
    return {};
}

// etcdctl's view of the keys under a prefix, one per line.
std::string keys_under(const EtcdCluster& etcd, const std::string& prefix) {
    std::string out;
    EXPECT_TRUE(etcd.etcdctl("get --prefix --keys-only " + prefix, &out)) << out;
    std::string keys;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);)
        if (!line.empty()) keys += line + "\n";
    return keys;
}

TEST(EtcdStore, EveryOperation) {
    EtcdCluster etcd;
    auto store = open_etcd(etcd, "/cohort/job/1");
    EXPECT_EQ(store->address(), "etcd://" + etcd.endpoints() + "/cohort/job/1");
    EXPECT_EQ(store->host(), "127.0.0.1");

    store->set("a", std::string("x\0y", 3));
    EXPECT_EQ(store->get("a", 1s), std::string("x\0y", 3));
    EXPECT_EQ(store->try_get("a"), std::string("x\0y", 3));
    EXPECT_EQ(store->try_get("absent"), std::nullopt);

    EXPECT_EQ(store->add("n", 5), 5);
    EXPECT_EQ(store->add("n", -2), 3);
    EXPECT_EQ(store->get("n", 1s), "3");
    const auto not_int = error_of(Errc::invalid_argument, [&] { store->add("a", 1); });
    EXPECT_EQ(not_int.rfind("store etcd://" + etcd.endpoints() + "/cohort/job/1: add: the value of key 'a' is not an "
                            "integer",
                            0),
              0u)
        << not_int;

    EXPECT_EQ(store->compare_and_set("c", std::nullopt, "first"), "first");
    EXPECT_EQ(store->compare_and_set("c", std::nullopt, "second"), "first");
    EXPECT_EQ(store->compare_and_set("c", std::string("wrong"), "third"), "first");
    EXPECT_EQ(store->compare_and_set("c", std::string("first"), "fourth"), "fourth");
    EXPECT_EQ(store->compare_and_set("nope", std::string("x"), "y"), "");

    const std::vector<std::string> present{"a", "n", "c"};
    store->wait(present, 1s);
    EXPECT_TRUE(store->remove("a"));
    EXPECT_FALSE(store->remove("a"));

    const auto start = Clock::now();
    const auto missing = error_of(Errc::timeout, [&] { store->wait(std::vector<std::string>{"n", "a", "b"}, 300ms); });
    EXPECT_GE(Clock::now() - start, 300ms);
    EXPECT_NE(missing.find("2 of 3 keys not set after 300 ms: 'a', 'b'"), std::string::npos) << missing;
    const auto never = error_of(Errc::timeout, [&] { store->get("never", 200ms); });
    EXPECT_NE(never.find("key 'never' not set after 200 ms"), std::string::npos) << never;
    EXPECT_NE(error_of(Errc::invalid_argument, [&] { store->set("", "v"); }).find("empty key"), std::string::npos);
    // Values past etcd's request limit (1.5 MiB by default) are refused by
    // etcd, and the message says which limit.
    const auto big = error_of(Errc::invalid_argument, [&] { store->set("big", std::string(2 << 20, 'x')); });
    EXPECT_NE(big.find("--max-request-bytes"), std::string::npos) << big;

    // The keys live under the prefix, next to the record of the shared lease.
    EXPECT_EQ(keys_under(etcd, "/cohort/job/1"), "/cohort/job/1\n/cohort/job/1/c\n/cohort/job/1/n\n");
    // Another prefix sees none of them.
    EXPECT_EQ(open_etcd(etcd, "/cohort/job/2")->try_get("c"), std::nullopt);
}

TEST(EtcdStore, GetAndWaitWakeWhenAnotherThreadSets) {
    EtcdCluster etcd;
    auto reader = open_etcd(etcd, "/w");
    auto writer = open_etcd(etcd, "/w");
    std::thread late([&] {
        std::this_thread::sleep_for(300ms);
        writer->set("k", "v");
        std::this_thread::sleep_for(200ms);
        for (int i = 0; i < 150; ++i) writer->set("many/" + std::to_string(i), "x");
    });
    const auto start = Clock::now();
    EXPECT_EQ(reader->get("k", 10s), "v");
    const auto waited = Clock::now() - start;
    EXPECT_GE(waited, 250ms);
    EXPECT_LT(waited, 5s);  // woken by the watch, far from the timeout
    // More keys than one etcd transaction may read.
    std::vector<std::string> many;
    for (int i = 0; i < 150; ++i) many.push_back("many/" + std::to_string(i));
    reader->wait(many, 10s);
    late.join();
}

TEST(EtcdStore, AddRacesCountEveryIncrementOnce) {
    EtcdCluster etcd;
    constexpr int kThreads = 6, kAdds = 20;
    std::vector<std::vector<int64_t>> seen(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            auto store = open_etcd(etcd, "/race");
            for (int i = 0; i < kAdds; ++i) seen[t].push_back(store->add("counter", 1));
        });
    }
    for (auto& t : threads) t.join();
    std::set<int64_t> all;
    for (const auto& s : seen) all.insert(s.begin(), s.end());
    EXPECT_EQ(all.size(), std::size_t(kThreads * kAdds));  // no sum returned twice
    EXPECT_EQ(*all.rbegin(), kThreads * kAdds);
    EXPECT_EQ(open_etcd(etcd, "/race")->get("counter", 1s), std::to_string(kThreads * kAdds));
}

TEST(EtcdStore, CompareAndSetHasOneWinner) {
    EtcdCluster etcd;
    constexpr int kThreads = 8;
    std::vector<std::string> results(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            auto store = open_etcd(etcd, "/cas");
            results[t] = store->compare_and_set("leader", std::nullopt, "rank" + std::to_string(t));
        });
    }
    for (auto& t : threads) t.join();
    int winners = 0;
    for (int t = 0; t < kThreads; ++t) {
        EXPECT_EQ(results[t], results[0]);  // everyone sees the one winner
        if (results[t] == "rank" + std::to_string(t)) ++winners;
    }
    EXPECT_EQ(winners, 1);
}

TEST(EtcdStore, KeysGoWithTheLeaseOnceEveryStoreHasClosed) {
    EtcdCluster etcd;
    auto first = open_etcd(etcd, "/ttl", "?ttl=2");
    {
        auto second = open_etcd(etcd, "/ttl", "?ttl=2");
        second->set("from-second", "x");
    }
    first->set("from-first", "x");
    // The second store closed, but the first keeps the shared lease alive.
    std::this_thread::sleep_for(3500ms);
    EXPECT_EQ(first->try_get("from-second"), "x");
    first.reset();
    // Nobody keeps it now: gone within the TTL (and a little).
    std::string left;
    for (int i = 0; i < 50; ++i) {
        left = keys_under(etcd, "/ttl");
        if (left.empty()) break;
        std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(left, "");
    // A store opened afterwards starts afresh.
    EXPECT_EQ(open_etcd(etcd, "/ttl", "?ttl=2")->try_get("from-first"), std::nullopt);
}

TEST(EtcdStore, SaysSoWhenItsLeaseIsGoneWhileOpen) {
    EtcdCluster etcd;
    auto store = open_etcd(etcd, "/lost", "?ttl=5");
    store->set("k", "v");
    // Someone revokes the shared lease (etcdctl wants its id in hex): etcd
    // deletes the keys with it.
    std::string id;
    ASSERT_TRUE(etcd.etcdctl("get /lost --print-value-only", &id)) << id;
    char hex[32];
    std::snprintf(hex, sizeof hex, "%llx", std::stoull(id));
    std::string out;
    ASSERT_TRUE(etcd.etcdctl(std::string("lease revoke ") + hex, &out)) << out;
    const auto what = error_of(Errc::unavailable, [&] { store->set("k", "w"); });
    EXPECT_NE(what.find("store etcd://" + etcd.endpoints() + "/lost: its etcd lease"), std::string::npos) << what;
    EXPECT_NE(what.find("open the store again"), std::string::npos) << what;
    EXPECT_EQ(store->try_get("k"), std::nullopt);
    // A store opened now starts a new lease and works.
    auto again = open_etcd(etcd, "/lost", "?ttl=5");
    again->set("k", "new");
    EXPECT_EQ(again->get("k", 1s), "new");
}

TEST(EtcdStore, GoesOnWhenOneOfThreeMembersDies) {
    EtcdCluster etcd(EtcdCluster::Options::cluster(3));
    auto store = open_etcd(etcd, "/ha");
    store->set("before", "1");
    etcd.kill(0);  // the store's first endpoint
    store->set("after", "2");
    EXPECT_EQ(store->add("n", 1), 1);
    EXPECT_EQ(store->get("before", 5s), "1");
    store->wait(std::vector<std::string>{"before", "after"}, 5s);
    std::thread late([&] {
        std::this_thread::sleep_for(200ms);
        open_etcd(etcd, "/ha")->set("late", "3");
    });
    EXPECT_EQ(store->get("late", 10s), "3");
    late.join();
}

TEST(EtcdStore, EtcdDownIsAClearErrorWithinTheTimeout) {
    const auto ports = free_ports(2);
    const std::string hosts = "127.0.0.1:" + std::to_string(ports[0]) + ",127.0.0.1:" + std::to_string(ports[1]);
    StoreOptions options;
    options.timeout = 1s;
    auto start = Clock::now();
    const auto what = error_of(Errc::unavailable, [&] { open_store("etcd://" + hosts + "/p", options); });
    EXPECT_LT(Clock::now() - start, 4s);
    EXPECT_NE(what.find("etcd unavailable"), std::string::npos) << what;
    EXPECT_NE(what.find("http://127.0.0.1:" + std::to_string(ports[0])), std::string::npos) << what;
    EXPECT_NE(what.find("http://127.0.0.1:" + std::to_string(ports[1])), std::string::npos) << what;

    // Down after the store opened: each call, a wait included, fails within
    // the store's timeout rather than waiting its own out.
    EtcdCluster etcd;
    auto store = open_etcd(etcd, "/down", "", 1s);
    store->set("k", "v");
    etcd.kill_all();
    start = Clock::now();
    const auto set = error_of(Errc::unavailable, [&] { store->set("k", "w"); });
    EXPECT_NE(set.find("store etcd://" + etcd.endpoints() + "/down"), std::string::npos) << set;
    EXPECT_NE(set.find("key '/down/k'"), std::string::npos) << set;
    error_of(Errc::unavailable, [&] { store->get("other", 60s); });
    EXPECT_LT(Clock::now() - start, 6s);
}

TEST(EtcdStore, UsesAUserAndPassword) {
    EtcdCluster etcd;
    ASSERT_TRUE(etcd.etcdctl("user add root --new-user-password=rootpw"));
    ASSERT_TRUE(etcd.etcdctl("user add job --new-user-password=jobpw"));
    ASSERT_TRUE(etcd.etcdctl("role add jobs"));
    ASSERT_TRUE(etcd.etcdctl("role grant-permission jobs readwrite /jobs --prefix=true"));
    ASSERT_TRUE(etcd.etcdctl("user grant-role job jobs"));
    ASSERT_TRUE(etcd.etcdctl("auth enable"));
    const auto password = etcd.dir() / "password";
    std::ofstream(password) << "jobpw\n";

    auto store = open_etcd(etcd, "/jobs/7/0", "?user=job&password-file=" + password.string());
    store->set("k", "v");
    EXPECT_EQ(store->get("k", 1s), "v");
    const auto anonymous = error_of(Errc::permission_denied, [&] { open_etcd(etcd, "/jobs/7/0"); });
    EXPECT_NE(anonymous.find("user="), std::string::npos) << anonymous;
    const auto outside = error_of(Errc::permission_denied, [&] {
        open_etcd(etcd, "/elsewhere", "?user=job&password-file=" + password.string());
    });
    EXPECT_NE(outside.find("permission denied"), std::string::npos) << outside;
}

TEST(EtcdStore, SpeaksTls) {
    EtcdCluster etcd(EtcdCluster::Options::with_tls());
    const auto& tls = etcd.tls();
    auto store = open_etcd(etcd, "/tls", "?cacert=" + tls.ca + "&cert=" + tls.client_cert + "&key=" + tls.client_key);
    store->set("k", "v");
    EXPECT_EQ(store->get("k", 1s), "v");
}

TEST(EtcdStore, BootstrapsACommunicator) {
    EtcdCluster etcd;
    const std::string url = "etcd://" + etcd.endpoints() + "/cohort/allreduce/0";
    constexpr int kRanks = 4;
    std::vector<std::vector<float>> results(kRanks);
    const auto outcomes = spawn(kRanks, [&](int rank, int size) {
        CommOptions options;
        options.rank = rank;
        options.size = size;
        options.store_url = url;
        options.connect_timeout = 30s;
        Communicator comm(options);
        std::vector<float> data(1000, static_cast<float>(rank + 1));
        comm.allreduce(std::span<float>(data));
        results[rank] = data;
    });
    expect_ok(outcomes);
    for (int r = 0; r < kRanks; ++r) {
        ASSERT_EQ(results[r].size(), 1000u);
        EXPECT_EQ(results[r].front(), 10.0f);
        EXPECT_EQ(results[r].back(), 10.0f);
    }
}

}  // namespace
}  // namespace cohort::test
