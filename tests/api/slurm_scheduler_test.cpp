// SlurmScheduler against a stand-in srun: a shell script that records its
// arguments, runs the program after "--" on this machine, passes SIGTERM
// on, and reports the end as srun does ("srun: error: NODE: task 0: Exited
// with exit code 3"). What srun is asked for (node, exclusions, the job),
// where workers are placed, how ends and causes come back, and stopping are
// checked here; tests/integration/slurm_job.py runs the real srun on a real
// Slurm cluster. Waits are bounded, never asserted as timings.
#include "support.hpp"

#include <cohort/slurm_scheduler.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace cohort::test {
namespace {

using namespace std::chrono_literals;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// srun's stand-in. $FAKE_SRUN_LOG gets one line of arguments per call.
constexpr const char* kFakeSrun = R"sh(#!/bin/sh
echo "$*" >> "$FAKE_SRUN_LOG"
node=unknown
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in --nodelist=*) node="${1#--nodelist=}";; esac
  shift
done
shift
"$@" &
child=$!
trap 'kill -TERM $child 2>/dev/null' TERM
trap 'kill -KILL $child 2>/dev/null' INT
wait $child
rc=$?
while kill -0 $child 2>/dev/null; do wait $child; rc=$?; done
if [ $rc -gt 128 ]; then
  echo "srun: error: $node: task 0: Killed" >&2
elif [ $rc -ne 0 ]; then
  echo "srun: error: $node: task 0: Exited with exit code $rc" >&2
fi
exit $rc
)sh";

class FakeSlurm {
public:
    FakeSlurm()
        : dir_(std::filesystem::temp_directory_path() /
               ("cohort_slurm_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++))) {
        std::filesystem::create_directories(dir_);
        std::ofstream(dir_ / "srun") << kFakeSrun;
        ::chmod((dir_ / "srun").c_str(), 0755);
        log_ = (dir_ / "srun.log").string();
        ::setenv("FAKE_SRUN_LOG", log_.c_str(), 1);
    }
    ~FakeSlurm() { std::filesystem::remove_all(dir_); }

    SlurmOptions options(std::vector<std::string> nodes, int per_node = 1) const {
        SlurmOptions o;
        o.job_id = "42";
        o.nodes = std::move(nodes);
        o.workers_per_node = per_node;
        o.srun = (dir_ / "srun").string();
        o.scontrol = "/bin/false";  // no node is down
        o.squeue = o.scancel = "/bin/false";
        o.grace = 5s;
        return o;
    }

    // srun's calls so far: waits (up to 10 s) until there are `at_least`,
    // since a stand-in srun just started may not have logged yet.
    std::vector<std::string> calls(std::size_t at_least = 0) const {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        for (;;) {
            std::vector<std::string> out;
            std::ifstream in(log_);
            for (std::string line; std::getline(in, line);) out.push_back(line);
            if (out.size() >= at_least || std::chrono::steady_clock::now() > deadline) return out;
            std::this_thread::sleep_for(5ms);
        }
    }

    const std::filesystem::path& dir() const { return dir_; }

private:
    static inline int counter_ = 0;
    std::filesystem::path dir_;
    std::string log_;
};

WorkerSpec shell(const std::string& id, const std::string& script) {
    return {id, {"/bin/sh", "-c", script}, {}, {}};
}

// Relaunched workers sleep; the factory sees the node chosen for them.
struct Factory {
    std::vector<std::string> hosts;  // step.host of each call
    WorkerSpec operator()(const PlanStep& step) {
        hosts.push_back(step.host);
        return {step.node.empty() ? "new" + std::to_string(hosts.size()) : step.node, {"sleep", "30"}, {}, {}};
    }
};

std::vector<WorkerExit> wait_exits(Scheduler& scheduler, std::size_t count) {
    std::vector<WorkerExit> out;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
        for (WorkerExit& exit : scheduler.poll()) out.push_back(std::move(exit));
        if (out.size() < count) std::this_thread::sleep_for(5ms);
    }
    EXPECT_EQ(out.size(), count) << "exits that came back before the deadline";
    return out;
}

TEST(SlurmScheduler, StartsAStepOnANodeOfTheJobAndReportsItsExitCode) {
    FakeSlurm slurm;
    Factory factory;
    SlurmScheduler scheduler(std::ref(factory), slurm.options({"n0", "n1"}));
    EXPECT_EQ(scheduler.name(), "slurm");
    scheduler.launch(shell("w0", "exit 3"), "n1");
    EXPECT_EQ(scheduler.node_of("w0"), "n1");
    EXPECT_GT(scheduler.pid("w0"), 0);
    const auto exits = wait_exits(scheduler, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].id, "w0");
    EXPECT_EQ(exits[0].kind, ExitKind::exited);
    EXPECT_EQ(exits[0].exit_code, 3);
    EXPECT_EQ(exits[0].cause, ExitCause::none);
    EXPECT_THAT(exits[0].message, HasSubstr("exit code 3 on n1"));
    EXPECT_THAT(scheduler.running(), IsEmpty());
    const auto calls = slurm.calls(1);
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0], "--jobid=42 --nodelist=n1 --nodes=1 --ntasks=1 --overlap --job-name=w0 -- /bin/sh -c exit 3");
}

TEST(SlurmScheduler, PassesTheEnvironmentAndExtraSrunOptions) {
    FakeSlurm slurm;
    Factory factory;
    SlurmOptions o = slurm.options({"n0"});
    o.srun_args = {"--cpus-per-task=2"};
    SlurmScheduler scheduler(std::ref(factory), o);
    const auto out = slurm.dir() / "env.txt";
    WorkerSpec spec = shell("w0", "echo \"$COHORT_MEMBER\" > " + out.string());
    spec.env["COHORT_MEMBER"] = "w0";
    scheduler.launch(spec);
    const auto exits = wait_exits(scheduler, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_TRUE(exits[0].succeeded()) << exits[0].message;
    std::ifstream in(out);
    std::string text;
    std::getline(in, text);
    EXPECT_EQ(text, "w0");
    EXPECT_THAT(slurm.calls(1).at(0), HasSubstr("--job-name=w0 --cpus-per-task=2 -- /bin/sh"));
}

TEST(SlurmScheduler, SpreadsWorkersOverTheLeastLoadedNodesAndRefusesPastRoom) {
    FakeSlurm slurm;
    Factory factory;
    SlurmScheduler scheduler(std::ref(factory), slurm.options({"n0", "n1"}, 2));
    for (const char* id : {"a", "b", "c", "d"}) scheduler.launch(shell(id, "sleep 30"));
    EXPECT_EQ(scheduler.node_of("a"), "n0");
    EXPECT_EQ(scheduler.node_of("b"), "n1");
    EXPECT_EQ(scheduler.node_of("c"), "n0");
    EXPECT_EQ(scheduler.node_of("d"), "n1");
    scheduler.launch(shell("e", "sleep 30"));  // 2 per node, all taken
    const auto exits = wait_exits(scheduler, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].id, "e");
    EXPECT_EQ(exits[0].kind, ExitKind::not_started);
    EXPECT_THAT(exits[0].message, HasSubstr("no node of Slurm job 42 has room"));
    EXPECT_THAT(scheduler.running(), ElementsAre("a", "b", "c", "d"));
    scheduler.stop_all(5s);
    EXPECT_EQ(wait_exits(scheduler, 4).size(), 4u);
}

TEST(SlurmScheduler, RefusesBadArguments) {
    FakeSlurm slurm;
    Factory factory;
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { SlurmScheduler(std::ref(factory), slurm.options({})); }),
                HasSubstr("has no nodes"));
    SlurmOptions no_job = slurm.options({"n0"});
    no_job.job_id.clear();
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { SlurmScheduler(std::ref(factory), no_job); }),
                HasSubstr("run inside an allocation"));
    SlurmScheduler scheduler(std::ref(factory), slurm.options({"n0"}));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { scheduler.launch(shell("w0", "true"), "n9"); }),
                HasSubstr("node 'n9' is not in Slurm job 42"));
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [&] {
                                  scheduler.launch({"w0", {}, {}, {}});
                              }),
                HasSubstr("no program to run"));
}

TEST(SlurmScheduler, AMissingSrunIsNotStarted) {
    FakeSlurm slurm;
    Factory factory;
    SlurmOptions o = slurm.options({"n0"});
    o.srun = "/nonexistent/srun";
    SlurmScheduler scheduler(std::ref(factory), o);
    scheduler.launch(shell("w0", "true"));
    const auto exits = wait_exits(scheduler, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].kind, ExitKind::not_started);
    EXPECT_THAT(exits[0].message, HasSubstr("cannot start '/nonexistent/srun'"));
}

// srun's "Node failure" line: the worker failed (srun itself exits 0), its
// cause is node_lost, and the node is used no more: the relaunch goes to
// another node, and srun is told to exclude the lost one.
TEST(SlurmScheduler, ANodeFailureIsNodeLostAndTheRelaunchAvoidsTheNode) {
    FakeSlurm slurm;
    Factory factory;
    SlurmScheduler scheduler(std::ref(factory), slurm.options({"n0", "n1", "n2"}));
    scheduler.launch(shell("w0", "echo 'srun: error: Node failure on n0' >&2; exit 0"), "n0");
    scheduler.launch(shell("w1", "sleep 30"), "n1");
    const auto exits = wait_exits(scheduler, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_FALSE(exits[0].succeeded());
    EXPECT_EQ(exits[0].cause, ExitCause::node_lost);
    EXPECT_THAT(exits[0].message, HasSubstr("node n0 lost"));
    EXPECT_THAT(scheduler.lost_nodes(), ElementsAre("n0"));

    ScalingPlan plan;
    plan.steps.push_back({StepKind::relaunch, "w0", "n0", {}, "relaunch_failed_node", "node w0 failed"});
    scheduler.execute(plan);
    EXPECT_EQ(scheduler.node_of("w0"), "n2");
    ASSERT_THAT(factory.hosts, ElementsAre("n2"));  // the factory was told where
    const auto calls = slurm.calls(3);
    ASSERT_EQ(calls.size(), 3u);
    EXPECT_THAT(calls,
                Contains(HasSubstr("--nodelist=n2 --nodes=1 --ntasks=1 --overlap --job-name=w0 --exclude=n0 --")));
    scheduler.stop_all(5s);
    for (const WorkerExit& e : wait_exits(scheduler, 2)) EXPECT_TRUE(e.stopped) << e.id;
}

TEST(SlurmScheduler, OomAndPreemptionCauses) {
    FakeSlurm slurm;
    Factory factory;
    SlurmScheduler scheduler(std::ref(factory), slurm.options({"n0", "n1"}));
    scheduler.launch(shell("oom",
                           "echo 'slurmstepd: error: Detected 1 oom-kill event(s) in StepId=42.0.' >&2; "
                           "kill -9 $$"));
    scheduler.launch(shell("pre",
                           "echo 'slurmstepd: error: *** STEP 42.1 ON n1 CANCELLED AT 2026-11-26T15:00:00 "
                           "DUE TO PREEMPTION ***' >&2; kill -15 $$"));
    auto exits = wait_exits(scheduler, 2);
    ASSERT_EQ(exits.size(), 2u);
    std::sort(exits.begin(), exits.end(), [](const WorkerExit& a, const WorkerExit& b) { return a.id < b.id; });
    EXPECT_EQ(exits[0].id, "oom");
    EXPECT_EQ(exits[0].cause, ExitCause::out_of_memory);
    EXPECT_EQ(exits[0].kind, ExitKind::signaled);
    EXPECT_EQ(exits[0].signal, 9);
    EXPECT_EQ(exits[1].id, "pre");
    EXPECT_EQ(exits[1].cause, ExitCause::preempted);
    EXPECT_THAT(exits[1].message, HasSubstr("preempted"));
    EXPECT_THAT(scheduler.lost_nodes(), IsEmpty());
}

// A plan's avoid_hosts are never chosen, and a relaunch whose own node is
// usable stays there.
TEST(SlurmScheduler, RelaunchStaysInPlaceUnlessThePlanAvoidsTheNode) {
    FakeSlurm slurm;
    Factory factory;
    SlurmScheduler scheduler(std::ref(factory), slurm.options({"n0", "n1"}));
    scheduler.launch(shell("w0", "exit 1"), "n1");
    ASSERT_EQ(wait_exits(scheduler, 1).size(), 1u);
    ScalingPlan plan;
    plan.steps.push_back({StepKind::relaunch, "w0", "", {}, "relaunch_failed_node", "node w0 failed"});
    scheduler.execute(plan);
    EXPECT_EQ(scheduler.node_of("w0"), "n1");
    ASSERT_EQ(slurm.calls(2).size(), 2u);  // the relaunch's srun runs (stopped sooner, it would log nothing)
    plan.avoid_hosts = {"n1"};
    scheduler.execute(plan);  // stops it and starts it again, away from n1
    EXPECT_EQ(scheduler.node_of("w0"), "n0");
    const auto calls = slurm.calls(3);
    ASSERT_EQ(calls.size(), 3u);
    EXPECT_THAT(calls, Contains(HasSubstr("--nodelist=n0 --nodes=1 --ntasks=1 --overlap --job-name=w0 "
                                          "--exclude=n1 --")));
    const auto stopped = wait_exits(scheduler, 1);
    ASSERT_EQ(stopped.size(), 1u);
    EXPECT_TRUE(stopped[0].stopped);
    EXPECT_THAT(stopped[0].message, HasSubstr("stopped by the scheduler"));
}

// Stopping sends SIGTERM through srun; a task that ignores it is ended by
// srun's step abort (two SIGINTs) after the grace period.
TEST(SlurmScheduler, StopEscalatesPastTheGracePeriod) {
    FakeSlurm slurm;
    Factory factory;
    SlurmScheduler scheduler(std::ref(factory), slurm.options({"n0"}));
    scheduler.launch(shell("w0", "trap '' TERM; sleep 30 & wait; sleep 30"));
    std::this_thread::sleep_for(200ms);  // its trap is set
    const auto start = std::chrono::steady_clock::now();
    scheduler.stop("w0", 300ms);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
    const auto exits = wait_exits(scheduler, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_TRUE(exits[0].stopped);
    EXPECT_THAT(scheduler.running(), IsEmpty());
}

TEST(SlurmScheduler, OptionsFromTheEnvironment) {
    ::setenv("SLURM_JOB_ID", "77", 1);
    ::setenv("SLURM_JOB_NODELIST", "gpu[01-02],login", 1);
    const SlurmOptions o = SlurmOptions::from_env();
    EXPECT_EQ(o.job_id, "77");
    EXPECT_THAT(o.nodes, ElementsAre("gpu01", "gpu02", "login"));
    ::setenv("SLURM_JOB_NODELIST", "gpu[01-", 1);
    EXPECT_THAT(error_message(Errc::parse, [] { SlurmOptions::from_env(); }), HasSubstr("SLURM_JOB_NODELIST"));
    ::unsetenv("SLURM_JOB_NODELIST");
    ::unsetenv("SLURM_NODELIST");
    EXPECT_THAT(error_message(Errc::invalid_argument, [] { SlurmOptions::from_env(); }),
                HasSubstr("start the launcher from an sbatch script or within salloc"));
    ::unsetenv("SLURM_JOB_ID");
    EXPECT_THAT(expand_slurm_hostlist("h[0-1]"), ElementsAre("h0", "h1"));
}

}  // namespace
}  // namespace cohort::test
