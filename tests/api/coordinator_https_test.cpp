// The coordinator over HTTPS: a client with the right CA does everything a
// plain one does (the store through coordinator+https:// included); a wrong
// CA, a missing or foreign client certificate under mutual TLS, plain HTTP
// on the HTTPS port and bad files are each refused with a clear error.
// Certificates are made here with the openssl CLI, never checked in.
#include "../fixtures/etcd_cluster.hpp"
#include "support.hpp"

#include <cohort/coordinator.hpp>
#include <cohort/coordinator_client.hpp>
#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Two CAs, each with a server and a client certificate, made once.
struct Pki {
    std::filesystem::path dir;
    EtcdTls good, other;
};

const Pki& pki() {
    static const Pki made = [] {
        Pki p;
        p.dir = std::filesystem::temp_directory_path() / ("cohort-https-" + std::to_string(::getpid()));
        std::filesystem::remove_all(p.dir);
        std::filesystem::create_directories(p.dir / "good");
        std::filesystem::create_directories(p.dir / "other");
        p.good = make_tls_files(p.dir / "good");
        p.other = make_tls_files(p.dir / "other");
        return p;
    }();
    return made;
}

struct PkiCleanup : ::testing::Environment {
    void TearDown() override {
        std::error_code ignored;
        std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                                        ("cohort-https-" + std::to_string(::getpid())),
                                    ignored);
    }
};
[[maybe_unused]] auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new PkiCleanup);

CoordinatorOptions https_server(bool mutual) {
    CoordinatorOptions o;
    o.token.clear();
    o.tick = 20ms;
    o.idle_timeout = 2000ms;
    o.crowded_idle_timeout = 1000ms;
    o.tls_cert_file = pki().good.server_cert;
    o.tls_key_file = pki().good.server_key;
    if (mutual) o.tls_client_ca_file = pki().good.ca;
    return o;
}

CoordinatorClientOptions client(const std::string& ca, const std::string& cert = {}, const std::string& key = {}) {
    CoordinatorClientOptions o;
    o.token.clear();
    o.request_timeout = 3s;
    o.retry_deadline = 5s;  // a refusal must be told at once, not retried until this passes
    o.tls_ca_file = ca;
    o.tls_cert_file = cert;
    o.tls_key_file = key;
    return o;
}

JobSettings one_node() {
    JobSettings s;
    s.min_nodes = 1;
    s.max_nodes = 1;
    s.last_call = 0.0;
    s.heartbeat_interval = 0.05;
    s.failure_timeout = 5.0;
    return s;
}

void exercise(CoordinatorClient& c) {
    c.create_job("train", one_node());
    MemberDescriptor d;
    d.id = "a";
    d.host = "host-a";
    const JoinReply joined = c.join("train", d);
    ASSERT_EQ(joined.generation, 1u);
    EXPECT_FALSE(c.heartbeat("train", "a", joined.generation).rendezvous);
    c.store_set("train", joined.generation, "k", "v");
    EXPECT_EQ(c.store_get("train", joined.generation, "k", 2s), "v");
    const std::vector<std::string> keys{"k"};
    c.store_wait("train", joined.generation, keys, 2s);
}

TEST(CoordinatorHttps, RightCaWorksAndUrlIsHttps) {
    Coordinator server(https_server(false));
    ASSERT_THAT(server.url(), ::testing::StartsWith("https://127.0.0.1:"));
    CoordinatorClient c(server.url(), client(pki().good.ca));
    exercise(c);
}

TEST(CoordinatorHttps, MutualTlsWithClientCertificateWorks) {
    Coordinator server(https_server(true));
    CoordinatorClient c(server.url(), client(pki().good.ca, pki().good.client_cert, pki().good.client_key));
    exercise(c);
}

TEST(CoordinatorHttps, StoreOverHttpsTakesTheFilesFromTheEnvironment) {
    Coordinator server(https_server(true));
    CoordinatorClient c(server.url(), client(pki().good.ca, pki().good.client_cert, pki().good.client_key));
    c.create_job("s", one_node());
    MemberDescriptor d;
    d.id = "a";
    const JoinReply joined = c.join("s", d);
    ::setenv("COHORT_COORDINATOR_CACERT", pki().good.ca.c_str(), 1);
    ::setenv("COHORT_COORDINATOR_CERT", pki().good.client_cert.c_str(), 1);
    ::setenv("COHORT_COORDINATOR_KEY", pki().good.client_key.c_str(), 1);
    const std::string authority = server.url().substr(std::string("https://").size());
    StoreOptions so;
    so.timeout = 3s;
    std::shared_ptr<Store> store;
    std::string got;
    try {
        store = open_store("coordinator+https://" + authority + "/s/" + std::to_string(joined.generation), so);
        store->set("x", "1");
        got = store->get("x", 2s);
    } catch (...) {
        ::unsetenv("COHORT_COORDINATOR_CACERT");
        ::unsetenv("COHORT_COORDINATOR_CERT");
        ::unsetenv("COHORT_COORDINATOR_KEY");
        throw;
    }
    ::unsetenv("COHORT_COORDINATOR_CACERT");
    ::unsetenv("COHORT_COORDINATOR_CERT");
    ::unsetenv("COHORT_COORDINATOR_KEY");
    EXPECT_EQ(got, "1");
    EXPECT_EQ(c.store_get("s", joined.generation, "x", 1s), "1");
}

TEST(CoordinatorHttps, WrongCaIsRefusedAsUntrusted) {
    Coordinator server(https_server(false));
    CoordinatorClient c(server.url(), client(pki().other.ca));
    const std::string why = error_message(Errc::permission_denied, [&] { c.create_job("x", one_node()); });
    EXPECT_THAT(why, HasSubstr("is not trusted"));
    EXPECT_THAT(why, HasSubstr("COHORT_COORDINATOR_CACERT"));
}

TEST(CoordinatorHttps, MutualTlsRefusesClientsWithoutOrWithForeignCertificates) {
    Coordinator server(https_server(true));
    const auto started = std::chrono::steady_clock::now();
    {
        CoordinatorClient c(server.url(), client(pki().good.ca));
        const std::string why = error_message(Errc::permission_denied, [&] { c.create_job("x", one_node()); });
        EXPECT_THAT(why, HasSubstr("client certificate"));
    }
    {
        CoordinatorClient c(server.url(), client(pki().good.ca, pki().other.client_cert, pki().other.client_key));
        const std::string why = error_message(Errc::permission_denied, [&] { c.create_job("x", one_node()); });
        EXPECT_THAT(why, HasSubstr("client certificate"));
    }
    EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);  // not retried
}

TEST(CoordinatorHttps, PlainHttpOnTheHttpsPortIsToldToUseHttps) {
    Coordinator server(https_server(false));
    const std::string plain = "http://" + server.url().substr(std::string("https://").size());
    CoordinatorClient c(plain, client({}));
    const auto started = std::chrono::steady_clock::now();
    const std::string why = error_message(Errc::invalid_argument, [&] { c.create_job("x", one_node()); });
    EXPECT_THAT(why, HasSubstr("HTTPS only"));
    EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);  // told, not left to time out
}

// A client that starts a handshake and never finishes it is closed after
// idle_timeout (2 s here), while others are still served.
TEST(CoordinatorHttps, AStalledHandshakeIsClosedAfterTheIdleTimeout) {
    Coordinator server(https_server(false));
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(server.port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const unsigned char record_start[] = {0x16, 0x03, 0x01, 0x00, 0x80};  // a ClientHello's header, no more
    ASSERT_EQ(::send(fd, record_start, sizeof record_start, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof record_start));
    const auto started = std::chrono::steady_clock::now();

    CoordinatorClient c(server.url(), client(pki().good.ca));
    c.create_job("meanwhile", one_node());  // the stalled one holds nobody up

    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 5000);
    char byte = 0;
    const ssize_t n = ready > 0 ? ::recv(fd, &byte, 1, 0) : -2;
    const auto waited = std::chrono::steady_clock::now() - started;
    ::close(fd);
    ASSERT_EQ(ready, 1) << "not closed within 5 s";
    EXPECT_LE(n, 0);  // end of stream or reset: no answer
    EXPECT_GE(waited, 1500ms);
    EXPECT_LE(waited, 4000ms);
}

TEST(CoordinatorHttps, BadServerFilesAreNamedAtConstruction) {
    CoordinatorOptions o = https_server(false);
    o.tls_key_file = "/nonexistent/server.key";
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { Coordinator s(o); }),
                HasSubstr("'/nonexistent/server.key'"));
    o = https_server(false);
    o.tls_cert_file = pki().good.server_key;  // a key where a certificate goes
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { Coordinator s(o); }),
                HasSubstr("is not a PEM certificate"));
    o = https_server(false);
    o.tls_key_file = pki().other.server_key;  // another certificate's key
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { Coordinator s(o); }), HasSubstr("matches"));
    o = https_server(false);
    o.tls_key_file.clear();
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { Coordinator s(o); }), HasSubstr("give both"));
    o = https_server(true);
    o.tls_client_ca_file = "/nonexistent/ca.pem";
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { Coordinator s(o); }), HasSubstr("/nonexistent/ca.pem"));
}

TEST(CoordinatorHttps, BadClientFilesAreNamedAtConstruction) {
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [&] { CoordinatorClient c("https://127.0.0.1:1", client("/nonexistent/ca.pem")); }),
                HasSubstr("'/nonexistent/ca.pem'"));
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [&] {
                                  CoordinatorClient c("https://127.0.0.1:1",
                                                      client(pki().good.ca, pki().good.client_cert, ""));
                              }),
                HasSubstr("give both"));
}

// Replicas on etcd serving HTTPS: a follower names the leader by its
// https:// URL, which a client verifies and follows, and a client of the
// list carries on when the first replica stops.
TEST(CoordinatorHttps, ReplicasOnEtcdServeHttpsAndClientsFollowTheLeader) {
    EtcdCluster etcd;
    const auto replica = [&](const char* id) {
        CoordinatorOptions o = https_server(false);
        o.etcd = etcd.endpoints();
        o.etcd_prefix = "/cohort/https-replicas";
        o.replica_id = id;
        return std::make_unique<Coordinator>(o);
    };
    auto a = replica("a");
    auto b = replica("b");
    ASSERT_THAT(a->url(), ::testing::StartsWith("https://127.0.0.1:"));
    ASSERT_THAT(b->url(), ::testing::StartsWith("https://127.0.0.1:"));
    CoordinatorClient both(a->url() + "," + b->url(), client(pki().good.ca));
    exercise(both);
    // Each replica as a client's only URL: the follower's answer names the
    // leader, over HTTPS.
    for (const Coordinator* only : {a.get(), b.get()}) {
        CoordinatorClient c(only->url(), client(pki().good.ca));
        c.create_job("train", one_node());
        EXPECT_EQ(c.store_get("train", 1, "k", 2s), "v") << only->url();
    }
    a.reset();
    both.create_job("after", one_node());  // b leads now, or led already
    EXPECT_EQ(both.store_get("train", 1, "k", 2s), "v");
}

}  // namespace
}  // namespace cohort::test
