// The etcd client (src/etcd/) against a real etcd: key-value calls,
// transactions, leases and their keeper, watches, auth with a token that
// expires, TLS with client certificates, and the etcd:// URL grammar.
#include "../fixtures/etcd_cluster.hpp"

#include "etcd/client.hpp"
#include "etcd/lease.hpp"
#include "etcd/store.hpp"
#include "etcd/watch.hpp"
#include "etcd/wire.hpp"

#include <cohort/error.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <future>

namespace cohort::etcd {
namespace {

using namespace std::chrono_literals;
using cohort::test::EtcdCluster;

Clock::time_point soon(std::chrono::milliseconds d = 5s) { return Clock::now() + d; }

EtcdConfig config_for(const EtcdCluster& etcd) {
    EtcdConfig c;
    c.endpoints = parse_endpoints(etcd.endpoints(), "http", "test");
    return c;
}

std::string message_of(Errc code, const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), code) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no Error thrown";
    return {};
}

TEST(EtcdWire, Base64RoundTripsEveryByteAndRejectsGarbage) {
    std::string all;
    for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
    for (std::size_t n = 0; n < 8; ++n) EXPECT_EQ(base64_decode(base64_encode(all.substr(0, n))), all.substr(0, n));
    EXPECT_EQ(base64_decode(base64_encode(all)), all);
    EXPECT_EQ(base64_encode("hello"), "aGVsbG8=");
    EXPECT_FALSE(base64_decode("a*b=").has_value());
    EXPECT_FALSE(base64_decode("abcde").has_value());
}

TEST(EtcdWire, PrefixEndCoversThePrefix) {
    EXPECT_EQ(prefix_end("/a/"), "/a0");
    EXPECT_EQ(prefix_end(std::string("a\xff", 2)), "b");
    EXPECT_EQ(prefix_end(""), std::string(1, '\0'));
}

TEST(EtcdStoreUrl, ReadsEndpointsPrefixAndOptions) {
    const std::string dir = ::testing::TempDir();
    const std::string pw = dir + "/etcd-password";
    std::ofstream(pw) << "s3cret\n";
    const auto url = parse_store_url("etcd://h1:2379,h2:2380/cohort/job%207/3/?user=alice&password-file=" + pw +
                                     "&ttl=2m");
    EXPECT_EQ(url.config.endpoints, (std::vector<std::string>{"http://h1:2379", "http://h2:2380"}));
    EXPECT_EQ(url.prefix, "/cohort/job 7/3");
    EXPECT_EQ(url.ttl, 120s);
    EXPECT_EQ(url.config.user, "alice");
    EXPECT_EQ(url.config.password, "s3cret");
    EXPECT_EQ(url.address, "etcd://h1:2379,h2:2380/cohort/job 7/3");
    EXPECT_EQ(parse_store_url("etcd://h:1/p?tls=true").config.endpoints.front(), "https://h:1");
}

TEST(EtcdStoreUrl, SaysWhatIsWrong) {
    auto bad = [](const std::string& url) { return message_of(Errc::invalid_argument, [&] { parse_store_url(url); }); };
    EXPECT_NE(bad("etcd://h:2379").find("no key prefix"), std::string::npos);
    EXPECT_NE(bad("etcd://h:2379/").find("no key prefix"), std::string::npos);
    EXPECT_NE(bad("etcd:///p").find("no etcd endpoint"), std::string::npos);
    EXPECT_NE(bad("etcd://h/p").find("has no port"), std::string::npos);
    EXPECT_NE(bad("etcd://h:99999/p").find("not a number from 1 to 65535"), std::string::npos);
    EXPECT_NE(bad("etcd://h:1,/p").find("empty etcd endpoint"), std::string::npos);
    EXPECT_NE(bad("etcd://h:1/p?ttll=5").find("did you mean 'ttl'"), std::string::npos);
    EXPECT_NE(bad("etcd://h:1/p?ttl=1").find("from 2 s to 1 day"), std::string::npos);
    EXPECT_NE(bad("etcd://h:1/p?user=bob").find("needs password-file"), std::string::npos);
    EXPECT_NE(bad("etcd://h:1/p?user=bob&password-file=/nonexistent").find("cannot read the password file"),
              std::string::npos);
    EXPECT_NE(bad("etcd://h:1/p?cacert=/nonexistent.pem").find("cannot read the CA file '/nonexistent.pem'"),
              std::string::npos);
    EXPECT_NE(bad("etcd://h:1/p?cert=/etc/hostname").find("without its key"), std::string::npos);
}

TEST(EtcdClient, PutsReadsDeletesAndRunsTransactions) {
    EtcdCluster etcd;
    EtcdClient client(config_for(etcd));
    const std::string binary("k\0\xff", 3);
    const int64_t rev = client.put(binary, std::string("v\0", 2), 0, soon());
    auto r = client.get(binary, soon());
    ASSERT_EQ(r.kvs.size(), 1u);
    EXPECT_EQ(r.kvs[0].value, std::string("v\0", 2));
    EXPECT_EQ(r.kvs[0].mod_revision, rev);
    EXPECT_GE(r.revision, rev);
    EXPECT_TRUE(client.get("absent", soon()).kvs.empty());

    client.put("/p/a", "1", 0, soon());
    client.put("/p/b", "2", 0, soon());
    client.put("/q", "3", 0, soon());
    EXPECT_EQ(client.get_prefix("/p/", soon()).kvs.size(), 2u);

    Txn won;
    won.if_value("/p/a", Compare::equal, "1").then_put("/p/a", "10").then_get("/p/b").else_get("/p/a");
    auto t = client.txn(won, soon(), Replay::safe);
    EXPECT_TRUE(t.succeeded);
    ASSERT_EQ(t.responses.size(), 2u);
    EXPECT_EQ(t.responses[1].kvs.at(0).value, "2");
    Txn lost;
    lost.if_absent("/p/a").then_put("/p/a", "never").else_get("/p/a");
    t = client.txn(lost, soon(), Replay::unsafe);
    EXPECT_FALSE(t.succeeded);
    EXPECT_EQ(t.responses.at(0).kvs.at(0).value, "10");

    EXPECT_EQ(client.remove("/p/a", soon()), 1);
    EXPECT_EQ(client.remove("/p/a", soon()), 0);
    EXPECT_EQ(client.remove_prefix("/p/", soon()), 1);
    EXPECT_EQ(client.get("/q", soon()).kvs.size(), 1u);
}

TEST(EtcdClient, LeasesExpireUnlessKeptAlive) {
    EtcdCluster etcd;
    auto client = std::make_shared<EtcdClient>(config_for(etcd));
    const Lease kept = client->grant_lease(2s, soon());
    const Lease dropped = client->grant_lease(2s, soon());
    EXPECT_EQ(kept.ttl, 2);
    client->put("kept", "x", kept.id, soon());
    client->put("dropped", "x", dropped.id, soon());
    {
        LeaseKeeper keeper(client, kept);
        std::this_thread::sleep_for(3500ms);
        EXPECT_FALSE(keeper.lost());
        EXPECT_EQ(client->get("kept", soon()).kvs.size(), 1u);
        EXPECT_TRUE(client->get("dropped", soon()).kvs.empty());
        EXPECT_EQ(client->keep_alive_once(dropped.id, soon()), 0);
    }
    // The keeper stopped: the lease runs out by itself.
    std::this_thread::sleep_for(3s);
    EXPECT_TRUE(client->get("kept", soon()).kvs.empty());

    const Lease revoked = client->grant_lease(30s, soon());
    client->put("revoked", "x", revoked.id, soon());
    client->revoke_lease(revoked.id, soon());
    client->revoke_lease(revoked.id, soon());  // already gone: no error
    EXPECT_TRUE(client->get("revoked", soon()).kvs.empty());
    EXPECT_NE(message_of(Errc::not_found, [&] { client->put("k", "v", revoked.id, soon()); }).find("lease not found"),
              std::string::npos);
}

TEST(EtcdClient, KeeperReportsALeaseRevokedBehindItsBack) {
    EtcdCluster etcd;
    auto client = std::make_shared<EtcdClient>(config_for(etcd));
    const Lease lease = client->grant_lease(3s, soon());
    std::promise<std::string> reason;
    LeaseKeeper keeper(client, lease, [&](const std::string& why) { reason.set_value(why); });
    client->revoke_lease(lease.id, soon());
    auto future = reason.get_future();
    ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
    EXPECT_NE(future.get().find("expired or was revoked"), std::string::npos);
    EXPECT_TRUE(keeper.lost());
}

TEST(EtcdClient, WatchSeesChangesFromARevisionOn) {
    EtcdCluster etcd;
    auto client = std::make_shared<EtcdClient>(config_for(etcd));
    const int64_t before = client->put("/w/a", "1", 0, soon());
    client->put("/w/b", "2", 0, soon());
    client->remove("/w/a", soon());
    // From the first put on: all three changes, in order.
    std::vector<Event> seen;
    const auto end = watch(*client, watch_prefix("/w/", before), soon(), soon(), [&](const WatchBatch& b) {
        seen.insert(seen.end(), b.events.begin(), b.events.end());
        return seen.size() < 3;
    });
    EXPECT_EQ(end, StreamEnd::stopped);
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen[0].kv.key, "/w/a");
    EXPECT_EQ(seen[1].kv.value, "2");
    EXPECT_EQ(seen[2].type, Event::Type::remove);

    // Nothing new: the deadline ends it.
    const auto start = Clock::now();
    EXPECT_EQ(watch(*client, watch_prefix("/w/", 0), soon(500ms), soon(), [](const WatchBatch&) { return true; }),
              StreamEnd::deadline);
    EXPECT_LT(Clock::now() - start, 3s);

    // A stream on its own thread, stopped while idle.
    std::mutex mutex;
    std::vector<std::string> keys;
    {
        WatchStream stream(client, watch_prefix("/w/", 0), [&](const WatchBatch& b) {
            std::lock_guard lock(mutex);
            for (const auto& e : b.events) keys.push_back(e.kv.key);
        });
        for (int i = 0; i < 50; ++i) {
            client->put("/w/c", std::to_string(i), 0, soon());
            {
                std::lock_guard lock(mutex);
                if (!keys.empty()) break;
            }
            std::this_thread::sleep_for(50ms);
        }
    }
    std::lock_guard lock(mutex);
    ASSERT_FALSE(keys.empty());
    EXPECT_EQ(keys.front(), "/w/c");
}

TEST(EtcdClient, FailsOverWhenAMemberDies) {
    EtcdCluster etcd(EtcdCluster::Options::cluster(3));
    EtcdClient client(config_for(etcd));
    client.put("k", "before", 0, soon());
    etcd.kill(0);
    // The first endpoint refuses now; the others answer (after an election
    // if the dead member led).
    client.put("k", "after", 0, soon(10s));
    EXPECT_EQ(client.get("k", soon(10s)).kvs.at(0).value, "after");
}

TEST(EtcdClient, WatchStreamResumesOnAnotherMember) {
    EtcdCluster etcd(EtcdCluster::Options::cluster(3));
    auto client = std::make_shared<EtcdClient>(config_for(etcd));
    std::mutex mutex;
    std::vector<std::string> values;
    auto seen = [&] {
        std::lock_guard lock(mutex);
        return values;
    };
    WatchStream stream(client, watch_prefix("/r/", client->get("/r/", soon()).revision + 1),
                       [&](const WatchBatch& b) {
                           std::lock_guard lock(mutex);
                           for (const auto& e : b.events) values.push_back(e.kv.value);
                       });
    client->put("/r/k", "1", 0, soon());
    for (int i = 0; i < 100 && seen().size() < 1; ++i) std::this_thread::sleep_for(20ms);
    ASSERT_EQ(seen(), std::vector<std::string>{"1"});
    etcd.kill(0);  // the member the stream (and the client) used first
    client->put("/r/k", "2", 0, soon(10s));
    client->put("/r/k", "3", 0, soon(10s));
    for (int i = 0; i < 250 && seen().size() < 3; ++i) std::this_thread::sleep_for(20ms);
    // Every change once, in order, across the reconnection.
    EXPECT_EQ(seen(), (std::vector<std::string>{"1", "2", "3"}));
}

TEST(EtcdClient, EtcdDownIsUnavailableNamingEveryEndpoint) {
    const auto ports = cohort::test::free_ports(2);
    EtcdConfig c;
    c.endpoints = {"http://127.0.0.1:" + std::to_string(ports[0]), "http://127.0.0.1:" + std::to_string(ports[1])};
    EtcdClient client(c);
    const auto start = Clock::now();
    const auto what = message_of(Errc::unavailable, [&] { client.put("k", "v", 0, soon(700ms)); });
    EXPECT_LT(Clock::now() - start, 3s);
    EXPECT_NE(what.find("etcd unavailable"), std::string::npos) << what;
    EXPECT_NE(what.find(c.endpoints[0]), std::string::npos) << what;
    EXPECT_NE(what.find(c.endpoints[1]), std::string::npos) << what;
    EXPECT_NE(what.find("write of key 'k'"), std::string::npos) << what;
}

TEST(EtcdClient, AuthenticatesAndAgainWhenTheTokenExpires) {
    // Simple tokens that last one second.
    EtcdCluster etcd(EtcdCluster::Options::with_args({"--auth-token=simple", "--auth-token-ttl=1"}));
    ASSERT_TRUE(etcd.etcdctl("user add root --new-user-password=rootpw"));
    ASSERT_TRUE(etcd.etcdctl("user add alice --new-user-password=alicepw"));
    ASSERT_TRUE(etcd.etcdctl("role add rw"));
    ASSERT_TRUE(etcd.etcdctl("role grant-permission rw readwrite /a/ --prefix=true"));
    ASSERT_TRUE(etcd.etcdctl("user grant-role alice rw"));
    ASSERT_TRUE(etcd.etcdctl("auth enable"));

    EtcdConfig c = config_for(etcd);
    c.user = "alice";
    c.password = "alicepw";
    EtcdClient alice(c);
    alice.put("/a/x", "1", 0, soon());
    std::this_thread::sleep_for(2500ms);
    alice.put("/a/x", "2", 0, soon());  // the old token expired meanwhile
    EXPECT_EQ(alice.get("/a/x", soon()).kvs.at(0).value, "2");
    const auto denied = message_of(Errc::permission_denied, [&] { alice.put("/b", "1", 0, soon()); });
    EXPECT_NE(denied.find("permission denied"), std::string::npos) << denied;
    EXPECT_NE(denied.find("write of key '/b'"), std::string::npos) << denied;

    c.password = "wrong";
    EtcdClient wrong(c);
    const auto refused = message_of(Errc::permission_denied, [&] { wrong.get("/a/x", soon()); });
    EXPECT_NE(refused.find("authenticating as etcd user 'alice'"), std::string::npos) << refused;
    EXPECT_NE(refused.find("password-file="), std::string::npos) << refused;

    EtcdClient anonymous(config_for(etcd));
    const auto anon = message_of(Errc::permission_denied, [&] { anonymous.get("/a/x", soon()); });
    EXPECT_NE(anon.find("user="), std::string::npos) << anon;
}

TEST(EtcdClient, SpeaksTlsWithClientCertificates) {
    EtcdCluster etcd(EtcdCluster::Options::with_tls());
    EtcdConfig c;
    c.endpoints = parse_endpoints(etcd.endpoints(), "https", "test");
    c.ca_file = etcd.tls().ca;
    c.cert_file = etcd.tls().client_cert;
    c.key_file = etcd.tls().client_key;
    EtcdClient client(c);
    client.put("secure", "yes", 0, soon());
    EXPECT_EQ(client.get("secure", soon()).kvs.at(0).value, "yes");

    // Without the client certificate etcd's --client-cert-auth turns it away;
    // the error comes at once, not at the deadline.
    c.cert_file.clear();
    c.key_file.clear();
    EtcdClient anonymous(c);
    const auto start = Clock::now();
    const auto what = message_of(Errc::unavailable, [&] { anonymous.get("secure", soon(20s)); });
    EXPECT_LT(Clock::now() - start, 10s) << what;
    EXPECT_NE(what.find(c.endpoints[0]), std::string::npos) << what;
}

}  // namespace
}  // namespace cohort::etcd
