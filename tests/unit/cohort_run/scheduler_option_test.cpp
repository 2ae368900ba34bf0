// cohort-run --scheduler: local by default; slurm listens on 0.0.0.0 for
// the workers on other nodes unless --host says otherwise, takes
// --srun-arg, and refuses what only makes sense for local workers.
#include "options.hpp"

#include <cohort/error.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using cohort_run::SchedulerKind;

std::optional<cohort_run::Options> parse(std::vector<std::string> args) {
    std::vector<std::string> all = {"cohort-run"};
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

TEST(CohortRunScheduler, LocalByDefault) {
    const auto o = parse({"--standalone"});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->scheduler, SchedulerKind::local);
    EXPECT_EQ(o->host, "127.0.0.1");
    EXPECT_EQ(parse({"--standalone", "--scheduler", "local"})->scheduler, SchedulerKind::local);
}

TEST(CohortRunScheduler, SlurmListensForOtherNodesAndTakesSrunArgs) {
    const auto o =
        parse({"--standalone", "--scheduler=slurm", "--srun-arg=--gpus-per-task=1", "--srun-arg", "--mem=4G"});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->scheduler, SchedulerKind::slurm);
    EXPECT_EQ(o->host, "0.0.0.0");
    EXPECT_EQ(o->srun_args, (std::vector<std::string>{"--gpus-per-task=1", "--mem=4G"}));
    EXPECT_EQ(parse({"--standalone", "--scheduler", "slurm", "--host", "10.1.2.3"})->host, "10.1.2.3");
    EXPECT_EQ(parse({"--coordinator", "h:1", "--scheduler", "slurm"})->host, "127.0.0.1");
}

TEST(CohortRunScheduler, BadValuesAndMisplacedFlagsSayWhy) {
    std::string e = error_of({"--standalone", "--scheduler", "pbs"});
    EXPECT_NE(e.find("--scheduler: 'pbs' is not a scheduler"), std::string::npos) << e;
    EXPECT_NE(e.find("'slurm'"), std::string::npos) << e;
    e = error_of({"--standalone", "--srun-arg=--mem=1G"});
    EXPECT_NE(e.find("--srun-arg is for --scheduler slurm"), std::string::npos) << e;
    e = error_of({"--standalone", "--scheduler", "slurm", "--kill-worker", "0@1"});
    EXPECT_NE(e.find("--kill-worker is for --scheduler local"), std::string::npos) << e;
    EXPECT_NE(error_of({"--standalone", "--scheduler"}).find("--scheduler"), std::string::npos);
}

}  // namespace
