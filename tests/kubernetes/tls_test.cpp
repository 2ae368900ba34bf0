// KubernetesScheduler over HTTPS, as on a real cluster: the API-server
// double serves a certificate signed by a test CA made at run time
// (k8s_double/test_pki.hpp), and with a client CA requires client
// certificates (mTLS). The scheduler lists, watches, creates and deletes
// pods with the CA from a kubeconfig (file and -data forms), with a client
// certificate, and from in-cluster files; a wrong CA, a missing client
// certificate and one from another CA are refused at construction with a
// message naming the kubeconfig and what to check.
#include "k8s_double/api_server.hpp"
#include "k8s_double/pod_store.hpp"
#include "k8s_double/test_pki.hpp"

#include <cohort/error.hpp>
#include <cohort/kubernetes.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

namespace cohort::test {
namespace {

using namespace std::chrono_literals;
using k8s_double::ApiServer;
using k8s_double::PodFate;
using k8s_double::PodStore;
using k8s_double::ServerOptions;
using k8s_double::TestPki;
using k8s_double::TlsOptions;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string base64(const std::string& data) {
    std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(data.data()), static_cast<int>(data.size()));
    out.resize(static_cast<std::size_t>(n));
    return out;
}

// Two CAs that do not trust each other, in a folder of the test's own.
struct Pki {
    fs::path dir =
        fs::temp_directory_path() / ("cohort_k8s_tls_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    TestPki mine = k8s_double::make_test_pki(dir / "pki");
    TestPki other = k8s_double::make_test_pki(dir / "other", "some-other-ca", "stranger");
    ~Pki() { fs::remove_all(dir); }
    static inline int counter = 0;

    // A kubeconfig for `server`, with `cluster` and `user` as YAML flow-map bodies.
    fs::path kubeconfig(const std::string& server, const std::string& cluster, const std::string& user) const {
        const fs::path file = dir / "kubeconfig";
        std::ofstream(file) << "apiVersion: v1\nkind: Config\ncurrent-context: tls\n"
                            << "clusters:\n- name: double\n  cluster: {server: \"" << server << "\", " << cluster
                            << "}\n"
                            << "contexts:\n- name: tls\n  context: {cluster: double, user: u, namespace: default}\n"
                            << "users:\n- name: u\n  user: {" << user << "}\n";
        return file;
    }
};

struct HttpsCluster {
    explicit HttpsCluster(const TestPki& pki, bool mtls, std::string token = {})
        : server(store, [&] {
              ServerOptions o;
              o.bookmark_interval = 100ms;
              o.tls = TlsOptions{pki.server_cert, pki.server_key, mtls ? pki.ca_cert : fs::path()};
              o.token = std::move(token);
              return o;
          }()) {}
    PodStore store{"default"};
    ApiServer server;

    KubernetesOptions options(KubernetesCluster cluster) const {
        KubernetesOptions o;
        o.cluster = std::move(cluster);
        o.image = "registry.invalid/trainer:1";
        o.job = "tls";
        o.grace = 0s;
        o.request_timeout = 5s;
        return o;
    }
    bool has(const std::string& pod, bool present = true) const {
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        while (store.pod(pod).has_value() != present) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            std::this_thread::sleep_for(2ms);
        }
        return true;
    }
};

WorkerSpec worker(const std::string& id) {
    return {id, {"python3", "train.py"}, {{"COHORT_MEMBER", id}}, {}};
}

WorkerSpec from_step(const PlanStep& step) {
    return worker(step.node);
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

// The whole round trip over TLS: the first list and the watch (the
// scheduler's constructor waits for the list), a create, the watch
// reporting the pod's end, and the deletes of stop_all.
void round_trip(HttpsCluster& k, const KubernetesCluster& cluster) {
    KubernetesScheduler s(k.options(cluster), from_step);
    s.launch(worker("w0"));
    ASSERT_TRUE(k.has("tls-w0-0"));
    s.launch(worker("w1"));
    ASSERT_TRUE(k.has("tls-w1-0"));
    k.store.set_fate("tls-w0-0", PodFate::running);
    k.store.set_fate("tls-w0-0", PodFate::oom_killed);
    std::vector<WorkerExit> exits;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (exits.empty() && std::chrono::steady_clock::now() < deadline) {
        exits = s.poll();
        std::this_thread::sleep_for(2ms);
    }
    ASSERT_EQ(exits.size(), 1u) << "the watch over TLS reported the pod's end";
    EXPECT_EQ(exits[0].id, "w0");
    EXPECT_EQ(exits[0].cause, ExitCause::out_of_memory);
    s.stop_all(0s);
    EXPECT_TRUE(k.has("tls-w1-0", false)) << "stop_all deleted the pod over TLS";
    const auto counts = k.server.counts();
    EXPECT_GE(counts.lists, 1u);
    EXPECT_GE(counts.watches, 1u);
    EXPECT_EQ(counts.creates, 2u);
    EXPECT_GE(counts.deletes, 1u);
    EXPECT_GE(counts.tls_handshakes, 3u);
    EXPECT_EQ(counts.tls_failures, 0u);
}

TEST(KubernetesTls, CertificateAuthorityFileFromTheKubeconfig) {
    Pki pki;
    HttpsCluster k(pki.mine, false, "s3cret");
    ASSERT_EQ(k.server.url().rfind("https://127.0.0.1:", 0), 0u) << k.server.url();
    // Relative to the kubeconfig's folder, as kubectl reads it.
    const auto file = pki.kubeconfig(k.server.url(), "certificate-authority: pki/ca.crt", "token: s3cret");
    round_trip(k, kubeconfig_config(file));
}

TEST(KubernetesTls, CertificateAuthorityDataFromTheKubeconfig) {
    Pki pki;
    HttpsCluster k(pki.mine, false, "s3cret");
    const auto file =
        pki.kubeconfig(k.server.url(), "certificate-authority-data: " + base64(k8s_double::read_text(pki.mine.ca_cert)),
                       "token: s3cret");
    round_trip(k, kubeconfig_config(file));
}

TEST(KubernetesTls, InsecureSkipTlsVerifyTrustsAnyServer) {
    Pki pki;
    HttpsCluster k(pki.mine, false);
    const auto file = pki.kubeconfig(k.server.url(), "insecure-skip-tls-verify: true", "token: t");
    round_trip(k, kubeconfig_config(file));
}

TEST(KubernetesTls, ClientCertificateDataUnderMutualTls) {
    Pki pki;
    HttpsCluster k(pki.mine, true, "unused-token");
    const auto file =
        pki.kubeconfig(k.server.url(), "certificate-authority-data: " + base64(k8s_double::read_text(pki.mine.ca_cert)),
                       "client-certificate-data: " + base64(k8s_double::read_text(pki.mine.client_cert)) +
                           ", client-key-data: " + base64(k8s_double::read_text(pki.mine.client_key)));
    round_trip(k, kubeconfig_config(file));
    EXPECT_EQ(k.server.last_client(), "cohort-tester") << "the server verified the kubeconfig's client certificate";
}

TEST(KubernetesTls, ClientCertificateFilesUnderMutualTls) {
    Pki pki;
    HttpsCluster k(pki.mine, true);
    const auto file = pki.kubeconfig(k.server.url(), "certificate-authority: " + pki.mine.ca_cert.string(),
                                     "client-certificate: pki/client.crt, client-key: pki/client.key");
    round_trip(k, kubeconfig_config(file));
    EXPECT_EQ(k.server.last_client(), "cohort-tester");
}

TEST(KubernetesTls, AWrongCaIsRefusedAtOnceNamingTheKubeconfig) {
    Pki pki;
    HttpsCluster k(pki.mine, false);
    const auto file = pki.kubeconfig(k.server.url(), "certificate-authority: other/ca.crt", "token: t");
    const KubernetesCluster cluster = kubeconfig_config(file);
    const auto start = std::chrono::steady_clock::now();
    const std::string error = error_of([&] { KubernetesScheduler s(k.options(cluster), from_step); });
    EXPECT_THAT(error, HasSubstr("over TLS"));
    EXPECT_THAT(error, HasSubstr("not signed by the CA"));
    EXPECT_THAT(error, HasSubstr("kubeconfig '" + file.string() + "', context 'tls'"));
    // Refused at the first list, not after request_timeout (5 s).
    EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
    EXPECT_EQ(k.store.names().size(), 0u);
    EXPECT_EQ(k.server.counts().creates, 0u);
}

TEST(KubernetesTls, NoCaAtAllIsRefused) {
    Pki pki;
    HttpsCluster k(pki.mine, false);
    const auto file = pki.kubeconfig(k.server.url(), "proxy-url: \"\"", "token: t");
    const std::string error = error_of([&] { KubernetesScheduler s(k.options(kubeconfig_config(file)), from_step); });
    EXPECT_THAT(error, HasSubstr("gives no certificate-authority(-data)"));
}

TEST(KubernetesTls, AMissingClientCertificateIsRefusedUnderMutualTls) {
    Pki pki;
    HttpsCluster k(pki.mine, true);
    const auto file = pki.kubeconfig(k.server.url(), "certificate-authority: pki/ca.crt", "token: t");
    const std::string error = error_of([&] { KubernetesScheduler s(k.options(kubeconfig_config(file)), from_step); });
    EXPECT_THAT(error, HasSubstr("may require a client certificate"));
    EXPECT_THAT(error, HasSubstr("client-certificate(-data) and client-key(-data)"));
    EXPECT_THAT(error, HasSubstr(file.string()));
    EXPECT_GE(k.server.counts().tls_failures, 1u);
    EXPECT_EQ(k.server.last_client(), "");
}

TEST(KubernetesTls, AClientCertificateOfAnotherCaIsRefused) {
    Pki pki;
    HttpsCluster k(pki.mine, true);
    const auto file = pki.kubeconfig(k.server.url(), "certificate-authority: pki/ca.crt",
                                     "client-certificate: other/client.crt, client-key: other/client.key");
    const std::string error = error_of([&] { KubernetesScheduler s(k.options(kubeconfig_config(file)), from_step); });
    EXPECT_THAT(error, HasSubstr("refused the TLS handshake or the client certificate"));
    EXPECT_EQ(k.server.last_client(), "");
}

TEST(KubernetesTls, InClusterServiceAccountCaAndToken) {
    Pki pki;
    HttpsCluster k(pki.mine, false, "sa-token-1");
    const fs::path sa = pki.dir / "serviceaccount";
    fs::create_directories(sa);
    fs::copy_file(pki.mine.ca_cert, sa / "ca.crt");
    std::ofstream(sa / "token") << "sa-token-1\n";
    std::ofstream(sa / "namespace") << "default";
    ::setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    ::setenv("KUBERNETES_SERVICE_PORT", std::to_string(k.server.port()).c_str(), 1);
    const KubernetesCluster cluster = in_cluster_config(sa);
    ::unsetenv("KUBERNETES_SERVICE_HOST");
    ::unsetenv("KUBERNETES_SERVICE_PORT");
    EXPECT_EQ(cluster.server, k.server.url());
    EXPECT_EQ(cluster.token_file, sa / "token");
    round_trip(k, cluster);
}

TEST(KubernetesTls, WithoutTheTokenTheDoubleAnswers401) {
    // The double's token check is what makes the in-cluster test above
    // prove that the token went out.
    Pki pki;
    HttpsCluster k(pki.mine, false, "sa-token-1");
    KubernetesCluster cluster;
    cluster.server = k.server.url();
    cluster.ca_pem = k8s_double::read_text(pki.mine.ca_cert);
    cluster.token = "wrong";
    KubernetesOptions o = k.options(cluster);
    o.request_timeout = 1s;  // the constructor waits this long for a list that 401 keeps from coming
    KubernetesScheduler s(o, from_step);
    s.launch(worker("w0"));
    std::vector<WorkerExit> exits;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (exits.empty() && std::chrono::steady_clock::now() < deadline) {
        exits = s.poll();
        std::this_thread::sleep_for(2ms);
    }
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].cause, ExitCause::api_error);
    EXPECT_THAT(exits[0].message, HasSubstr("401"));
}

}  // namespace
}  // namespace cohort::test
