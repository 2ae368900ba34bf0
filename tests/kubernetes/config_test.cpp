// Where KubernetesScheduler finds its cluster: kubeconfig files (tokens,
// token files, base64 and file certificates, contexts, namespaces) and the
// service account's files, with the errors a user sees when one is wrong.
// Certificates are real ones, made at run time (k8s_double/test_pki.hpp):
// the configuration checks them as it reads them.
#include "k8s_double/test_pki.hpp"

#include <cohort/error.hpp>
#include <cohort/kubernetes.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>

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

std::string base64(const std::string& data) {
    std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(data.data()), static_cast<int>(data.size()));
    out.resize(static_cast<std::size_t>(n));
    return out;
}

TEST(KubeconfigConfig, ReadsTheCurrentContextsServerTokenCaAndNamespace) {
    TempDir dir;
    const auto pki = k8s_double::make_test_pki(dir.path() / "pki");
    const std::string ca = k8s_double::read_text(pki.ca_cert);
    const std::string ca_b64 = base64(ca);
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
    EXPECT_EQ(c.ca_pem, ca);
    EXPECT_FALSE(c.insecure_skip_tls_verify);
    EXPECT_TRUE(c.token_file.empty());
    EXPECT_EQ(c.origin, "kubeconfig '" + file.string() + "', context 'train'");
}

TEST(KubeconfigConfig, ReadsFilesRelativeToTheKubeconfigAndANamedContext) {
    TempDir dir;
    dir.write("token", "from-file\n");
    const auto pki = k8s_double::make_test_pki(dir.path());
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
    EXPECT_EQ(a.token_file, dir.path() / "token");
    EXPECT_EQ(a.ns, "default");
    EXPECT_TRUE(a.insecure_skip_tls_verify);
    const KubernetesCluster b = kubeconfig_config(file, "b");
    EXPECT_EQ(b.ns, "jobs");
    EXPECT_EQ(b.cert_pem, k8s_double::read_text(pki.client_cert));
    EXPECT_EQ(b.key_pem, k8s_double::read_text(pki.client_key));
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
    const auto pki = k8s_double::make_test_pki(dir.path() / "pki");
    std::filesystem::copy_file(pki.ca_cert, dir.path() / "ca.crt");
    dir.write("namespace", "training");
    ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    const KubernetesCluster c = in_cluster_config(dir.path());
    EXPECT_EQ(c.server, "https://10.96.0.1:443");
    EXPECT_EQ(c.token, "sa-token");
    EXPECT_EQ(c.ca_pem, k8s_double::read_text(pki.ca_cert));
    EXPECT_EQ(c.ns, "training");
    EXPECT_EQ(c.token_file, dir.path() / "token");
    dir.write("ca.crt", "not a certificate");
    EXPECT_THAT(error_of([&] { in_cluster_config(dir.path()); }),
                HasSubstr("the cluster's CA '" + (dir.path() / "ca.crt").string() + "': no PEM certificate"));
    dir.write("token", "\n");
    EXPECT_THAT(error_of([&] { in_cluster_config(dir.path()); }), HasSubstr("token"));
    EXPECT_THAT(error_of([&] { in_cluster_config(dir.path()); }), HasSubstr("is empty"));
    std::filesystem::remove(dir.path() / "token");
    EXPECT_THAT(error_of([&] { in_cluster_config(dir.path()); }), HasSubstr("service account token"));
    ::unsetenv("KUBERNETES_SERVICE_HOST");
    EXPECT_THAT(error_of([&] { in_cluster_config(dir.path()); }), HasSubstr("KUBERNETES_SERVICE_HOST"));
    ::unsetenv("KUBERNETES_SERVICE_PORT");
}

// Each bad certificate field is named with the file, the cluster or user,
// and the field.
TEST(KubeconfigConfig, BadCertificatesAndKeysNameTheFileAndField) {
    TempDir dir;
    const auto pki = k8s_double::make_test_pki(dir.path() / "pki");
    const auto other = k8s_double::make_test_pki(dir.path() / "other", "other-ca");
    const std::string ca = k8s_double::read_text(pki.ca_cert);
    const auto config = [&](const std::string& cluster, const std::string& user) {
        return dir.write("config", "current-context: a\nclusters: [{name: c, cluster: {server: \"https://h:6443\", " +
                                       cluster + "}}]\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n" +
                                       "users: [{name: u, user: {" + user + "}}]\n");
    };
    const auto error = [&](const std::string& cluster, const std::string& user) {
        const auto file = config(cluster, user);
        return error_of([&] { kubeconfig_config(file); });
    };
    const std::string where = "kubeconfig '" + (dir.path() / "config").string() + "': ";
    EXPECT_THAT(error("certificate-authority-data: \"not*base64\"", "token: t"),
                HasSubstr(where + "cluster 'c': certificate-authority-data: not base64"));
    EXPECT_THAT(error("certificate-authority-data: " + base64("hello"), "token: t"),
                HasSubstr(where + "cluster 'c': certificate-authority-data: no PEM certificate"));
    EXPECT_THAT(
        error("certificate-authority-data: " + base64(ca.substr(0, ca.size() / 2) + "\n-----END CERTIFICATE-----\n"),
              "token: t"),
        HasSubstr("certificate-authority-data: the PEM certificate does not parse"));
    EXPECT_THAT(error("certificate-authority: missing.crt", "token: t"),
                HasSubstr(where + "cluster 'c': certificate-authority: cannot read '" +
                          (dir.path() / "missing.crt").string() + "': No such file or directory"));
    EXPECT_THAT(error("certificate-authority: pki/ca.crt, insecure-skip-tls-verify: true", "token: t"),
                HasSubstr("insecure-skip-tls-verify with a certificate-authority"));
    EXPECT_THAT(error("certificate-authority: pki/ca.crt", "client-certificate: pki/client.crt"),
                HasSubstr(where + "user 'u': client-certificate without a client-key(-data)"));
    EXPECT_THAT(error("certificate-authority: pki/ca.crt", "client-key-data: " + base64("x")),
                HasSubstr(where + "user 'u': client-key without a client-certificate(-data)"));
    EXPECT_THAT(
        error("certificate-authority: pki/ca.crt", "client-certificate: pki/client.crt, client-key: other/client.key"),
        HasSubstr(where + "user 'u': client-key 'other/client.key': this key is not the key of the certificate in " +
                  where + "user 'u': client-certificate 'pki/client.crt'"));
    EXPECT_THAT(error("certificate-authority: pki/ca.crt", "client-certificate: pki/client.crt, client-key-data: " +
                                                               base64("-----BEGIN PRIVATE KEY-----\n")),
                HasSubstr(where + "user 'u': client-key-data: not an unencrypted PEM private key"));
    EXPECT_THAT(
        error("certificate-authority: pki/ca.crt", "client-certificate: pki/ca.key, client-key: pki/client.key"),
        HasSubstr("client-certificate 'pki/ca.key': not a PEM certificate"));
    EXPECT_THAT(error("certificate-authority: pki/ca.crt", "tokenFile: missing-token"),
                HasSubstr(where + "user 'u': tokenFile: cannot read"));
    // The good forms, for contrast.
    EXPECT_NO_THROW(
        kubeconfig_config(config("certificate-authority: pki/ca.crt",
                                 "client-certificate-data: " + base64(k8s_double::read_text(pki.client_cert)) +
                                     ", client-key-data: " + base64(k8s_double::read_text(pki.client_key)))));
    (void)other;
}

}  // namespace
}  // namespace cohort::test
