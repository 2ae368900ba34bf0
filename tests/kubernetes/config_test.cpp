// Where KubernetesScheduler finds its cluster: kubeconfig files (tokens,
// token files, base64 and file certificates, contexts, namespaces) and the
// service account's files, with the errors a user sees when one is wrong.
#include <cohort/error.hpp>
#include <cohort/kubernetes.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

class TempDir {
public:
    TempDir()
        : path_(std::filesystem::temp_directory_path() /
                ("cohort_k8s_config_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++))) {
        std::filesystem::create_directories(path_);
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    std::filesystem::path write(const std::string& name, const std::string& text) const {
        std::ofstream(path_ / name) << text;
        return path_ / name;
    }
    const std::filesystem::path& path() const { return path_; }

private:
    static inline int counter_ = 0;
    std::filesystem::path path_;
};

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

// "-----BEGIN CERTIFICATE-----\nabc\n" in base64.
constexpr const char* ca_b64 = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmFiYwo=";

TEST(KubeconfigConfig, ReadsTheCurrentContextsServerTokenCaAndNamespace) {
    TempDir dir;
    const auto file = dir.write("config", std::string(R"(apiVersion: v1
kind: Config
current-context: train
clusters:
- name: other
  cluster: {server: "https://other:6443"}
- name: prod
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: )") + ca_b64 + R"(
contexts:
- name: train
  context: {cluster: prod, user: trainer, namespace: ml}
users:
- name: trainer
  user: {token: abc.def}
)");
    const KubernetesCluster c = kubeconfig_config(file);
    EXPECT_EQ(c.server, "https://10.0.0.1:6443");
    EXPECT_EQ(c.ns, "ml");
    EXPECT_EQ(c.token, "abc.def");
    EXPECT_EQ(c.ca_pem, "-----BEGIN CERTIFICATE-----\nabc\n");
    EXPECT_FALSE(c.insecure_skip_tls_verify);
}

TEST(KubeconfigConfig, ReadsFilesRelativeToTheKubeconfigAndANamedContext) {
    TempDir dir;
    dir.write("token", "from-file\n");
    dir.write("client.crt", "CERT");
    dir.write("client.key", "KEY");
    const auto file = dir.write("config", R"(current-context: a
clusters:
- name: c
  cluster: {server: "http://127.0.0.1:1", insecure-skip-tls-verify: true}
contexts:
- name: a
  context: {cluster: c, user: u}
- name: b
  context: {cluster: c, user: v, namespace: jobs}
users:
- name: u
  user: {tokenFile: token}
- name: v
  user: {client-certificate: client.crt, client-key: client.key}
)");
    const KubernetesCluster a = kubeconfig_config(file);
    EXPECT_EQ(a.token, "from-file");
    EXPECT_EQ(a.ns, "default");
    EXPECT_TRUE(a.insecure_skip_tls_verify);
    const KubernetesCluster b = kubeconfig_config(file, "b");
    EXPECT_EQ(b.ns, "jobs");
    EXPECT_EQ(b.cert_pem, "CERT");
    EXPECT_EQ(b.key_pem, "KEY");
    EXPECT_TRUE(b.token.empty());
}

TEST(KubeconfigConfig, BadFilesSayWhatIsWrong) {
    TempDir dir;
    EXPECT_THAT(error_of([&] { kubeconfig_config(dir.path() / "missing"); }), HasSubstr("cannot read the file"));
    const auto broken = dir.write("broken", "clusters: [\n");
    EXPECT_THAT(error_of([&] { kubeconfig_config(broken); }), HasSubstr("broken':"));
    const auto no_context = dir.write("nocontext", "clusters: []\n");
    EXPECT_THAT(error_of([&] { kubeconfig_config(no_context); }), HasSubstr("no current-context"));
    const auto unknown = dir.write("unknown", "current-context: x\ncontexts: []\n");
    EXPECT_THAT(error_of([&] { kubeconfig_config(unknown); }), HasSubstr("no context named 'x'"));
    const auto exec = dir.write("exec", R"(current-context: a
clusters: [{name: c, cluster: {server: "https://h"}}]
contexts: [{name: a, context: {cluster: c, user: u}}]
users: [{name: u, user: {exec: {command: gke-gcloud-auth-plugin}}}]
)");
    EXPECT_THAT(error_of([&] { kubeconfig_config(exec); }), HasSubstr("exec or auth-provider plugin"));
    const auto no_server = dir.write("noserver", R"(current-context: a
clusters: [{name: c, cluster: {}}]
contexts: [{name: a, context: {cluster: c}}]
)");
    EXPECT_THAT(error_of([&] { kubeconfig_config(no_server); }), HasSubstr("cluster 'c' has no server"));
}

TEST(InClusterConfig, ReadsTheServiceAccountFilesAndTheServiceAddress) {
    TempDir dir;
    dir.write("token", "sa-token\n");
    dir.write("ca.crt", "CA");
    dir.write("namespace", "training");
    ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    const KubernetesCluster c = in_cluster_config(dir.path());
    EXPECT_EQ(c.server, "https://10.96.0.1:443");
    EXPECT_EQ(c.token, "sa-token");
    EXPECT_EQ(c.ca_pem, "CA");
    EXPECT_EQ(c.ns, "training");
    std::filesystem::remove(dir.path() / "token");
    EXPECT_THAT(error_of([&] { in_cluster_config(dir.path()); }), HasSubstr("service account token"));
    ::unsetenv("KUBERNETES_SERVICE_HOST");
    EXPECT_THAT(error_of([&] { in_cluster_config(dir.path()); }), HasSubstr("KUBERNETES_SERVICE_HOST"));
    ::unsetenv("KUBERNETES_SERVICE_PORT");
}

}  // namespace
}  // namespace cohort::test
