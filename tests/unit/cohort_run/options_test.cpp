// cohort-run's flags for torchrun's habits: --restart and --master-addr,
// their defaults, and the messages for bad values.
#include "options.hpp"

#include <cohort/error.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using cohort_run::RestartMode;

std::optional<cohort_run::Options> parse(std::vector<std::string> args) {
    std::vector<std::string> all = {"cohort-run", "--standalone"};
    all.insert(all.end(), args.begin(), args.end());
    all.insert(all.end(), {"--", "/bin/true"});
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    return cohort_run::parse(static_cast<int>(argv.size()), argv.data());
}

std::string error_of(std::vector<std::string> args) {
    try {
        parse(std::move(args));
    } catch (const cohort::Error& e) {
        EXPECT_EQ(e.code(), cohort::Errc::invalid_argument);
        return e.what();
    }
    return "(no error)";
}

TEST(CohortRunOptions, RestartDefaultsToSurvivors) {
    const auto o = parse({});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->restart, RestartMode::survivors);
    EXPECT_TRUE(o->master_addr.empty());
}

TEST(CohortRunOptions, RestartAllAndMasterAddr) {
    const auto o = parse({"--restart", "all", "--master-addr=10.0.0.7", "--max-restarts", "5"});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->restart, RestartMode::all);
    EXPECT_EQ(o->master_addr, "10.0.0.7");
    EXPECT_EQ(o->max_restarts, 5);
    EXPECT_EQ(parse({"--restart=survivors"})->restart, RestartMode::survivors);
}

TEST(CohortRunOptions, BadRestartModeNamesTheFlagAndTheChoices) {
    const std::string e = error_of({"--restart", "always"});
    EXPECT_NE(e.find("--restart: 'always' is not a mode"), std::string::npos) << e;
    EXPECT_NE(e.find("'survivors'"), std::string::npos) << e;
    EXPECT_NE(e.find("'all'"), std::string::npos) << e;
}

TEST(CohortRunOptions, MissingValuesAreErrors) {
    EXPECT_NE(error_of({"--restart"}).find("--restart"), std::string::npos);
    EXPECT_NE(error_of({"--master-addr"}).find("--master-addr"), std::string::npos);
}

TEST(CohortRunOptions, TlsFlagsAreForTheStandaloneCoordinator) {
    const auto o = parse({"--tls-cert", "s.pem", "--tls-key", "s.key", "--tls-client-ca", "ca.pem"});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->tls_cert, "s.pem");
    EXPECT_EQ(o->tls_key, "s.key");
    EXPECT_EQ(o->tls_client_ca, "ca.pem");
    std::vector<std::string> all = {"cohort-run", "--coordinator", "127.0.0.1:1", "--tls-cert", "s.pem", "--",
                                    "/bin/true"};
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    try {
        cohort_run::parse(static_cast<int>(argv.size()), argv.data());
        ADD_FAILURE() << "--tls-cert with --coordinator was accepted";
    } catch (const cohort::Error& e) {
        EXPECT_NE(std::string(e.what()).find("--tls-cert, --tls-key and --tls-client-ca are for --standalone"),
                  std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("COHORT_COORDINATOR_CACERT"), std::string::npos) << e.what();
    }
    EXPECT_NE(error_of({"--tls-key"}).find("--tls-key"), std::string::npos);
}

TEST(CohortRunOptions, BadMasterAddrIsRefused) {
    EXPECT_NE(error_of({"--master-addr", ""}).find("--master-addr: '' is not a host name"), std::string::npos);
    EXPECT_NE(error_of({"--master-addr", "a b"}).find("--master-addr: 'a b'"), std::string::npos);
    EXPECT_NE(error_of({"--master-addr", "http://x"}).find("--master-addr"), std::string::npos);
}

}  // namespace

namespace {

TEST(CohortRunOptions, SchedulerDefaultsToLocalAndTakesKubernetesFlags) {
    auto o = parse({});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->scheduler, cohort_run::SchedulerKind::local);
    EXPECT_EQ(o->pending_timeout, 300);
    EXPECT_EQ(o->k8s_master_port, 29500);
    o = parse({"--scheduler", "kubernetes", "--k8s-kubeconfig", "/k", "--k8s-context", "c", "--k8s-namespace", "ns",
               "--k8s-pod-template", "pod.yaml", "--k8s-image", "img", "--k8s-owner-pod", "me", "--pending-timeout",
               "2.5", "--worker-coordinator", "http://svc:29400", "--k8s-master-port", "23456"});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->scheduler, cohort_run::SchedulerKind::kubernetes);
    EXPECT_EQ(o->k8s_kubeconfig, "/k");
    EXPECT_EQ(o->k8s_context, "c");
    EXPECT_EQ(o->k8s_namespace, "ns");
    EXPECT_EQ(o->k8s_pod_template, "pod.yaml");
    EXPECT_EQ(o->k8s_image, "img");
    EXPECT_EQ(o->k8s_owner_pod, "me");
    EXPECT_EQ(o->pending_timeout, 2.5);
    EXPECT_EQ(o->worker_coordinator, "http://svc:29400");
    EXPECT_EQ(o->k8s_master_port, 23456);
}

TEST(CohortRunOptions, BadSchedulerFlagsSayWhatIsWrong) {
    EXPECT_NE(error_of({"--scheduler", "yarn"}).find("--scheduler: 'yarn' is not a scheduler"), std::string::npos);
    EXPECT_NE(error_of({"--worker-coordinator", "svc:1"}).find("is not a URL"), std::string::npos);
    EXPECT_NE(error_of({"--pending-timeout", "0"}).find("--pending-timeout: '0' is not a number"), std::string::npos);
    EXPECT_NE(error_of({"--k8s-master-port", "0"}).find("--k8s-master-port: '0'"), std::string::npos);
    EXPECT_NE(error_of({"--scheduler", "kubernetes", "--kill-worker", "0@1"}).find("only with --scheduler local"),
              std::string::npos);
    EXPECT_NE(error_of({"--scheduler", "kubernetes", "--restart", "all"}).find("not with --scheduler kubernetes"),
              std::string::npos);
}

}  // namespace
