// Coordinator replicas on a real etcd (CoordinatorOptions::etcd): one is
// elected and answers; the other answers 503 not_leader naming it; a leader
// that stops hands over with the whole state, kept Idempotency-Key answers
// included; a leader whose key was taken over cannot write; settings that
// cannot work are refused.
#include "../fixtures/etcd_cluster.hpp"
#include "http_client.hpp"

#include <cohort/coordinator.hpp>
#include <cohort/error.hpp>

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <thread>

namespace cohort::test {
namespace {

namespace json = boost::json;
namespace http = boost::beast::http;
using namespace std::chrono_literals;

CoordinatorOptions replica_options(const EtcdCluster& etcd, const std::string& prefix, const std::string& id) {
    CoordinatorOptions o;
    o.etcd = etcd.endpoints();
    o.etcd_prefix = prefix;
    o.replica_id = id;
    return o;
}

json::object replica_view(const Coordinator& c) {
    HttpClient client(c.port());
    return json::parse(client.get("/v1/replica").body).as_object();
}

std::string field(const json::object& o, const char* name) {
    const json::value* v = o.if_contains(name);
    return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

// The index of the one replica that says it leads, once exactly one does.
int wait_for_leader(const std::vector<const Coordinator*>& replicas, std::chrono::milliseconds within = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < deadline) {
        int leader = -1, count = 0;
        for (std::size_t i = 0; i < replicas.size(); ++i) {
            if (replicas[i] != nullptr && field(replica_view(*replicas[i]), "role") == "leader") {
                leader = static_cast<int>(i);
                ++count;
            }
        }
        if (count == 1) return leader;
        std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "no single leader within " << within.count() << " ms";
    return -1;
}

HttpReply post_keyed(uint16_t port, const std::string& target, const std::string& body, const std::string& key) {
    boost::asio::io_context io;
    boost::beast::tcp_stream stream(io);
    stream.expires_after(5s);
    stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    http::request<http::string_body> request(http::verb::post, target, 11);
    request.set(http::field::host, "127.0.0.1");
    request.set(http::field::content_type, "application/json");
    request.set("Idempotency-Key", key);
    request.body() = body;
    request.prepare_payload();
    http::write(stream, request);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> response;
    stream.expires_after(10s);
    http::read(stream, buffer, response);
    return {response.result_int(), response.body(), std::string(response[http::field::content_type]),
            std::string(response["X-Cohort-Leader"])};
}

TEST(CoordinatorHa, OneReplicaLeadsTheOtherNamesIt) {
    EtcdCluster etcd;
    Coordinator a(replica_options(etcd, "/cohort/ha-one", "a"));
    Coordinator b(replica_options(etcd, "/cohort/ha-one", "b"));
    const int leader = wait_for_leader({&a, &b});
    ASSERT_GE(leader, 0);
    const Coordinator& l = leader == 0 ? a : b;
    const Coordinator& f = leader == 0 ? b : a;

    // The follower learns the leader from the key it watches.
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (field(replica_view(f), "leader") != l.url() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(20ms);
    }
    const json::object fv = replica_view(f);
    EXPECT_EQ(field(fv, "role"), "follower");
    EXPECT_EQ(field(fv, "leader"), l.url());
    EXPECT_EQ(field(fv, "id"), leader == 0 ? "b" : "a");

    HttpClient to_follower(f.port());
    const HttpReply refused = to_follower.post("/v1/jobs", R"({"name":"train"})");
    EXPECT_EQ(refused.status, 503u) << refused.body;
    EXPECT_EQ(refused.leader, l.url());
    EXPECT_NE(refused.body.find("not_leader"), std::string::npos) << refused.body;
    EXPECT_NE(refused.body.find(l.url()), std::string::npos) << refused.body;
    EXPECT_EQ(to_follower.get("/v1/jobs").status, 503u);

    HttpClient to_leader(l.port());
    EXPECT_EQ(to_leader.post("/v1/jobs", R"({"name":"train"})").status, 201u);
    EXPECT_EQ(to_leader.get("/v1/jobs/train").status, 200u);
}

TEST(CoordinatorHa, AStoppedLeaderHandsOverEverything) {
    EtcdCluster etcd;
    auto a = std::make_unique<Coordinator>(replica_options(etcd, "/cohort/ha-hand", "a"));
    ASSERT_EQ(wait_for_leader({a.get()}), 0);
    Coordinator b(replica_options(etcd, "/cohort/ha-hand", "b"));
    std::this_thread::sleep_for(200ms);
    ASSERT_EQ(field(replica_view(b), "role"), "follower");

    HttpClient c(a->port());
    ASSERT_EQ(c.post("/v1/jobs", R"({"name":"j","settings":{"min_nodes":2,"max_nodes":2,"last_call":0}})").status,
              201u);
    const HttpReply joined =
        post_keyed(a->port(), "/v1/jobs/j/join", R"({"id":"m0","host":"h0","address":"127.0.0.1:9000"})", "key-m0");
    ASSERT_EQ(joined.status, 200u) << joined.body;
    ASSERT_EQ(c.post("/v1/jobs/j/join", R"({"id":"m1","host":"h1","address":"127.0.0.1:9001"})").status, 200u);
    json::object world;
    for (auto until = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < until;) {
        const HttpReply r = c.get("/v1/jobs/j/world?member=m0");
        if (r.status == 200 && field(world = json::parse(r.body).as_object(), "state") == "active") break;
        std::this_thread::sleep_for(20ms);
    }
    ASSERT_EQ(field(world, "state"), "active") << world;
    const auto generation = world.at("generation").to_number<uint64_t>();
    const std::string store = "/v1/jobs/j/store/" + std::to_string(generation);
    EXPECT_LT(c.call(http::verb::put, store + "/addr", "10.0.0.1:29500").status, 300u);
    EXPECT_LT(c.post("/v1/jobs/j/dataset", R"({"shards":[{"id":"s0"},{"id":"s1"},{"id":"s2"}],"epochs":1})").status,
              300u);
    const json::object lease = json::parse(c.post("/v1/jobs/j/shards/next", R"({"member":"m1"})").body).as_object();
    ASSERT_TRUE(lease.contains("lease")) << lease;

    const auto stopped = std::chrono::steady_clock::now();
    a->stop();
    a.reset();
    ASSERT_EQ(wait_for_leader({&b}, 5s), 0);
    const auto took = std::chrono::steady_clock::now() - stopped;
    EXPECT_LT(took, 3s) << "a clean stop revokes the lease: the follower takes over at once";

    HttpClient n(b.port());
    const json::object state = json::parse(n.get("/v1/jobs/j").body).as_object();
    EXPECT_EQ(state.at("generation").to_number<uint64_t>(), generation) << "no new round for a hand-over";
    const json::object w1 = json::parse(n.get("/v1/jobs/j/world?member=m1").body).as_object();
    EXPECT_EQ(field(w1, "state"), "active");
    EXPECT_EQ(w1.at("rank").to_number<int>(), world.at("rank").to_number<int>() == 0 ? 1 : 0);
    EXPECT_EQ(n.get(store + "/addr").body, "10.0.0.1:29500");
    const json::object epoch = state.at("shards").at("epochs").at(0).as_object();
    EXPECT_EQ(epoch.at("leased").to_number<int>(), 1) << state.at("shards");
    // A heartbeat of the world's generation is welcome: nobody failed.
    EXPECT_EQ(n.post("/v1/jobs/j/heartbeat", R"({"member":"m0","generation":)" + std::to_string(generation) + "}")
                  .status,
              200u);
    // A retry of the first join, with its key, gets the first answer.
    const HttpReply again =
        post_keyed(b.port(), "/v1/jobs/j/join", R"({"id":"m0","host":"h0","address":"127.0.0.1:9000"})", "key-m0");
    EXPECT_EQ(again.status, joined.status);
    EXPECT_EQ(again.body, joined.body);
    // And the lease comes back done once.
    const std::string done = R"({"member":"m1","lease":)" + std::to_string(lease.at("lease").to_number<uint64_t>()) + "}";
    EXPECT_NE(n.post("/v1/jobs/j/shards/done", done).body.find("counted"), std::string::npos);
}

TEST(CoordinatorHa, ALeaderWhoseKeyWasTakenCannotWrite) {
    EtcdCluster etcd;
    Coordinator a(replica_options(etcd, "/cohort/ha-fence", "a"));
    ASSERT_EQ(wait_for_leader({&a}), 0);
    Coordinator b(replica_options(etcd, "/cohort/ha-fence", "b"));
    HttpClient c(a.port());
    ASSERT_EQ(c.post("/v1/jobs", R"({"name":"kept"})").status, 201u);
    std::this_thread::sleep_for(200ms);

    // The key goes (as if a's lease had expired) and b takes it; a, whose
    // lease still lives, does not know yet.
    std::string out;
    ASSERT_TRUE(etcd.etcdctl("del /cohort/ha-fence/leader", &out)) << out;
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (field(replica_view(b), "role") != "leader" && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(20ms);
    }
    ASSERT_EQ(field(replica_view(b), "role"), "leader");

    const HttpReply refused = c.post("/v1/jobs", R"({"name":"lost"})");
    EXPECT_EQ(refused.status, 503u) << refused.body;
    EXPECT_NE(refused.body.find("not_leader"), std::string::npos) << refused.body;
    const auto demoted_by = std::chrono::steady_clock::now() + 5s;
    while (field(replica_view(a), "role") != "follower" && std::chrono::steady_clock::now() < demoted_by) {
        std::this_thread::sleep_for(20ms);
    }
    EXPECT_EQ(field(replica_view(a), "role"), "follower");

    HttpClient n(b.port());
    EXPECT_EQ(n.get("/v1/jobs/kept").status, 200u);
    EXPECT_EQ(n.get("/v1/jobs/lost").status, 404u) << "the deposed leader's change reached etcd";
}

// etcd as users secure it: TLS with a client certificate, and etcd's own
// users with a role on the prefix.
TEST(CoordinatorHa, ReplicasSpeakTlsToEtcd) {
    EtcdCluster etcd(EtcdCluster::Options::with_tls());
    CoordinatorOptions o = replica_options(etcd, "/cohort/ha-tls", "a");
    o.etcd = etcd.url(0);
    o.etcd_ca_file = etcd.tls().ca;
    o.etcd_cert_file = etcd.tls().client_cert;
    o.etcd_key_file = etcd.tls().client_key;
    Coordinator a(o);
    ASSERT_EQ(wait_for_leader({&a}), 0);
    HttpClient c(a.port());
    EXPECT_EQ(c.post("/v1/jobs", R"({"name":"over-tls"})").status, 201u);
    std::string keys;
    ASSERT_TRUE(etcd.etcdctl("get --prefix --keys-only /cohort/ha-tls/log/", &keys)) << keys;
    EXPECT_NE(keys.find("/cohort/ha-tls/log/"), std::string::npos) << keys;
}

TEST(CoordinatorHa, ReplicasLogInAsAnEtcdUser) {
    EtcdCluster etcd;
    ASSERT_TRUE(etcd.etcdctl("user add root --new-user-password=rootpw"));
    ASSERT_TRUE(etcd.etcdctl("user add coord --new-user-password=coordpw"));
    ASSERT_TRUE(etcd.etcdctl("role add coordinators"));
    ASSERT_TRUE(etcd.etcdctl("role grant-permission coordinators readwrite /cohort/ha-auth --prefix=true"));
    ASSERT_TRUE(etcd.etcdctl("user grant-role coord coordinators"));
    ASSERT_TRUE(etcd.etcdctl("auth enable"));
    CoordinatorOptions o = replica_options(etcd, "/cohort/ha-auth", "a");
    o.etcd_user = "coord";
    o.etcd_password = "coordpw";
    Coordinator a(o);
    ASSERT_EQ(wait_for_leader({&a}), 0);
    HttpClient c(a.port());
    EXPECT_EQ(c.post("/v1/jobs", R"({"name":"as-a-user"})").status, 201u);
    // Without the user, a replica is never elected, and says why.
    CoordinatorOptions anonymous = replica_options(etcd, "/cohort/ha-auth", "b");
    Coordinator b(anonymous);
    std::this_thread::sleep_for(1s);
    EXPECT_EQ(field(replica_view(b), "role"), "follower");
    HttpClient to_b(b.port());
    EXPECT_EQ(to_b.post("/v1/jobs", R"({"name":"x"})").status, 503u);
}

TEST(CoordinatorHa, SettingsThatCannotWorkAreRefused) {
    EtcdCluster etcd;
    CoordinatorOptions both = replica_options(etcd, "/cohort/ha-bad", "a");
    both.data_dir = "/tmp/cohort-ha-never";
    EXPECT_THROW(Coordinator{both}, Error);
    CoordinatorOptions relative = replica_options(etcd, "cohort", "a");
    EXPECT_THROW(Coordinator{relative}, Error);
    CoordinatorOptions ttl = replica_options(etcd, "/cohort/ha-bad", "a");
    ttl.leader_ttl = 0s;
    EXPECT_THROW(Coordinator{ttl}, Error);
    CoordinatorOptions endpoints = replica_options(etcd, "/cohort/ha-bad", "a");
    endpoints.etcd = "127.0.0.1:2379,,";
    EXPECT_THROW(Coordinator{endpoints}, Error);
}

}  // namespace
}  // namespace cohort::test
