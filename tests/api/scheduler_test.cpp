// LocalScheduler: real worker processes on this machine. Exit codes and
// signals come back from poll(), stopping escalates from SIGTERM to
// SIGKILL, a program that cannot start says why, the environment reaches
// the worker, plans are carried out step by step, and nothing is left
// behind (no zombies, no leftover group members). Waits are bounded by
// generous deadlines, never asserted as timings.
#include "support.hpp"

#include <cohort/scheduler.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cohort::test {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

WorkerSpec shell(const std::string& id, const std::string& script) {
    return {id, {"/bin/sh", "-c", script}, {}, {}};
}

// A factory for tests that only launch by hand: every plan step sleeps.
WorkerSpec sleeper(const PlanStep& step) {
    static int next = 0;
    return {step.node.empty() ? "new" + std::to_string(next++) : step.node, {"sleep", "30"}, {}, {}};
}

// Polls until `count` exits have come back, for at most 20 s.
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

bool wait_for_file(const std::filesystem::path& path) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!std::filesystem::exists(path)) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

// Our child `pid` has been reaped: it is no zombie of ours.
bool reaped(int64_t pid) {
    errno = 0;
    return ::waitpid(static_cast<pid_t>(pid), nullptr, WNOHANG) == -1 && errno == ECHILD;
}

// A process that is gone or a zombie (not ours to reap: it was reparented).
bool dead(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(stat, text)) return true;
    const auto close = text.rfind(')');
    return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z';
}

class TempDir {
public:
    TempDir()
        : path_(std::filesystem::temp_directory_path() /
                ("cohort_scheduler_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++))) {
        std::filesystem::create_directories(path_);
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    const std::filesystem::path& path() const { return path_; }

private:
    static inline int counter_ = 0;
    std::filesystem::path path_;
};

TEST(LocalScheduler, ReportsTheExitCode) {
    LocalScheduler scheduler(sleeper);
    EXPECT_EQ(scheduler.name(), "local");
    scheduler.launch(shell("w0", "exit 3"));
    const int64_t pid = scheduler.pid("w0");
    EXPECT_GT(pid, 0);
    const auto exits = wait_exits(scheduler, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].id, "w0");
    EXPECT_EQ(exits[0].kind, ExitKind::exited);
    EXPECT_EQ(exits[0].exit_code, 3);
    EXPECT_EQ(exits[0].message, "exit code 3");
    EXPECT_FALSE(exits[0].stopped);
    EXPECT_FALSE(exits[0].succeeded());
    EXPECT_THAT(scheduler.running(), IsEmpty());
    EXPECT_EQ(scheduler.pid("w0"), -1);
    EXPECT_TRUE(reaped(pid)) << "the worker was left a zombie";
    EXPECT_THAT(scheduler.poll(), IsEmpty());  // reported once
}

TEST(LocalScheduler, StopSendsSigtermAndReportsTheSignal) {
    LocalScheduler scheduler(sleeper);
    scheduler.launch({"w0", {"sleep", "30"}, {}, {}});
    EXPECT_THAT(scheduler.running(), ElementsAre("w0"));
    const auto start = std::chrono::steady_clock::now();
    scheduler.stop("w0", 10s);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 9s) << "SIGTERM should have ended sleep well within grace";
    const auto exits = scheduler.poll();
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].kind, ExitKind::signaled);
    EXPECT_EQ(exits[0].signal, SIGTERM);
    EXPECT_TRUE(exits[0].stopped);
    EXPECT_THAT(exits[0].message, HasSubstr("stopped by the scheduler: killed by signal 15"));
    EXPECT_THAT(scheduler.running(), IsEmpty());
}

TEST(LocalScheduler, AWorkerThatIgnoresSigtermIsKilledAfterTheGrace) {
    TempDir dir;
    const auto ready = dir.path() / "ready";
    LocalScheduler scheduler(sleeper);
    scheduler.launch(shell("w0", "trap '' TERM; touch '" + ready.string() + "'; sleep 30"));
    ASSERT_TRUE(wait_for_file(ready));
    scheduler.stop("w0", 200ms);
    const auto exits = scheduler.poll();
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].kind, ExitKind::signaled);
    EXPECT_EQ(exits[0].signal, SIGKILL);
    EXPECT_TRUE(exits[0].stopped);
}

TEST(LocalScheduler, AProgramThatCannotStartSaysWhy) {
    LocalScheduler scheduler(sleeper);
    scheduler.launch({"w0", {"cohort-no-such-program"}, {}, {}});
    scheduler.launch({"w1", {"/nonexistent/trainer", "--epochs", "3"}, {}, {}});
    scheduler.launch({"w2", {"/bin/sh", "-c", "exit 0"}, {}, "/nonexistent-cohort-dir"});
    const auto exits = scheduler.poll();
    ASSERT_EQ(exits.size(), 3u);
    EXPECT_EQ(exits[0].kind, ExitKind::not_started);
    EXPECT_EQ(exits[0].message, "cannot start 'cohort-no-such-program': No such file or directory (not found on PATH)");
    EXPECT_EQ(exits[1].message, "cannot start '/nonexistent/trainer': No such file or directory");
    EXPECT_EQ(exits[2].message, "cannot start '/bin/sh' in '/nonexistent-cohort-dir': No such file or directory");
    EXPECT_THAT(scheduler.running(), IsEmpty());
}

TEST(LocalScheduler, TheWorkerGetsTheLaunchersEnvironmentPlusItsOwn) {
    ::setenv("COHORT_TEST_INHERITED", "from the launcher", 1);
    ::setenv("COHORT_TEST_OVERRIDDEN", "old", 1);
    TempDir dir;
    LocalScheduler scheduler(sleeper);
    WorkerSpec spec = shell("w0",
                            "[ \"$COHORT_TEST_INHERITED\" = 'from the launcher' ] || exit 10; "
                            "[ \"$COHORT_TEST_OVERRIDDEN\" = new ] || exit 11; "
                            "[ \"$COHORT_TEST_OWN\" = 'a b=c' ] || exit 12; "
                            "[ \"$(pwd -P)\" = \"$EXPECTED_DIR\" ] || exit 13; exit 0");
    spec.env = {{"COHORT_TEST_OVERRIDDEN", "new"},
                {"COHORT_TEST_OWN", "a b=c"},
                {"EXPECTED_DIR", std::filesystem::canonical(dir.path()).string()}};
    spec.cwd = dir.path();
    scheduler.launch(spec);
    const auto exits = wait_exits(scheduler, 1);
    ::unsetenv("COHORT_TEST_INHERITED");
    ::unsetenv("COHORT_TEST_OVERRIDDEN");
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_TRUE(exits[0].succeeded()) << exits[0].message << " (10: inherited, 11: override, 12: own, 13: cwd)";

    spec.env = {{"BAD=NAME", "x"}};
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { scheduler.launch(spec); }),
                HasSubstr("environment variable name 'BAD=NAME' is empty or holds '='"));
}

TEST(LocalScheduler, SignalAllReachesEveryWorker) {
    LocalScheduler scheduler(sleeper);
    scheduler.launch({"w0", {"sleep", "30"}, {}, {}});
    scheduler.launch({"w1", {"sleep", "30"}, {}, {}});
    scheduler.signal_all(SIGUSR1);
    auto exits = wait_exits(scheduler, 2);
    ASSERT_EQ(exits.size(), 2u);
    for (const WorkerExit& exit : exits) {
        EXPECT_EQ(exit.kind, ExitKind::signaled) << exit.id;
        EXPECT_EQ(exit.signal, SIGUSR1) << exit.id;
        EXPECT_FALSE(exit.stopped) << exit.id;
    }
}

TEST(LocalScheduler, LeavesNoZombiesAndNoLeftoversOfAWorkersGroup) {
    TempDir dir;
    const auto child = dir.path() / "child";
    LocalScheduler scheduler(sleeper);
    // The worker leaves a background process behind in its group and exits.
    scheduler.launch(shell("w0", "sleep 30 & echo $! > '" + child.string() + "'; exit 0"));
    const int64_t pid = scheduler.pid("w0");
    const auto exits = wait_exits(scheduler, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_TRUE(exits[0].succeeded());
    EXPECT_TRUE(reaped(pid));
    std::ifstream in(child);
    pid_t leftover = 0;
    ASSERT_TRUE(in >> leftover);
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!dead(leftover) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
    EXPECT_TRUE(dead(leftover)) << "the worker's background process " << leftover << " still runs";
}

TEST(LocalScheduler, CarriesOutAPlan) {
    std::vector<PlanStep> asked;
    int next = 0;
    LocalScheduler scheduler(
        [&](const PlanStep& step) {
            asked.push_back(step);
            return WorkerSpec{
                step.node.empty() ? "w" + std::to_string(10 + next++) : step.node, {"sleep", "30"}, {}, {}};
        },
        5s);
    scheduler.launch({"w0", {"sleep", "30"}, {}, {}});
    scheduler.launch({"w1", {"sleep", "30"}, {}, {}});
    const int64_t w1_before = scheduler.pid("w1");

    ScalingPlan plan;
    plan.steps = {{StepKind::launch, "", "", {1, 2}, "grow", "capacity"},
                  {StepKind::relaunch, "w1", "", {}, "r", "failed"},
                  {StepKind::remove, "w0", "", {}, "r", "straggler"}};
    scheduler.execute(plan);
    EXPECT_THAT(scheduler.running(), ElementsAre("w1", "w10"));
    EXPECT_NE(scheduler.pid("w1"), w1_before);
    ASSERT_EQ(asked.size(), 2u);
    EXPECT_EQ(asked[0].kind, StepKind::launch);
    EXPECT_EQ(asked[0].resources, (Resources{1, 2}));
    EXPECT_EQ(asked[1].node, "w1");
    auto exits = scheduler.poll();
    ASSERT_EQ(exits.size(), 2u);  // the old w1 and w0, both stopped on purpose
    EXPECT_EQ(exits[0].id, "w1");
    EXPECT_EQ(exits[1].id, "w0");
    EXPECT_TRUE(exits[0].stopped && exits[1].stopped);

    const int64_t w10_before = scheduler.pid("w10");
    plan.steps = {{StepKind::restart_all, "", "", {}, "hang", "the job hung"}};
    scheduler.execute(plan);
    EXPECT_THAT(scheduler.running(), ElementsAre("w1", "w10"));
    EXPECT_NE(scheduler.pid("w10"), w10_before);
    ASSERT_EQ(asked.size(), 4u);
    EXPECT_EQ(asked[2].kind, StepKind::relaunch);
    EXPECT_EQ(asked[2].reason, "the job hung");
    EXPECT_EQ(scheduler.poll().size(), 2u);

    scheduler.stop_all(5s);
    EXPECT_THAT(scheduler.running(), IsEmpty());
    EXPECT_EQ(scheduler.poll().size(), 2u);
}

TEST(LocalScheduler, RefusesADuplicateIdAndAFactoryThatNamesNoWorker) {
    LocalScheduler scheduler([](const PlanStep&) { return WorkerSpec{"", {"sleep", "30"}, {}, {}}; }, 5s);
    scheduler.launch({"w0", {"sleep", "30"}, {}, {}});
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [&] {
                                  scheduler.launch({"w0", {"true"}, {}, {}});
                              }),
                HasSubstr("worker 'w0' is already running (pid "));
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [&] {
                                  scheduler.launch({"w1", {}, {}, {}});
                              }),
                HasSubstr("worker 'w1' has no program to run"));
    ScalingPlan plan;
    plan.steps = {{StepKind::launch, "", "", {}, "", ""}};
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { scheduler.execute(plan); }),
                HasSubstr("returned a WorkerSpec with no id for a launch step"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [] { LocalScheduler(nullptr); }),
                HasSubstr("the worker factory is empty"));
}

TEST(LocalScheduler, TheDestructorStopsAndReapsEveryWorker) {
    int64_t pid = -1;
    {
        LocalScheduler scheduler(sleeper, 5s);
        scheduler.launch({"w0", {"sleep", "30"}, {}, {}});
        pid = scheduler.pid("w0");
        ASSERT_GT(pid, 0);
    }
    EXPECT_TRUE(reaped(pid));
    EXPECT_EQ(::kill(static_cast<pid_t>(pid), 0), -1);
}

}  // namespace
}  // namespace cohort::test
