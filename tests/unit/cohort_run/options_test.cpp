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

TEST(CohortRunOptions, BadMasterAddrIsRefused) {
    EXPECT_NE(error_of({"--master-addr", ""}).find("--master-addr: '' is not a host name"), std::string::npos);
    EXPECT_NE(error_of({"--master-addr", "a b"}).find("--master-addr: 'a b'"), std::string::npos);
    EXPECT_NE(error_of({"--master-addr", "http://x"}).find("--master-addr"), std::string::npos);
}

}  // namespace
