// core/subprocess.hpp: a child run under a hard deadline never hangs the
// caller and leaves no process, zombie or file descriptor behind. Timing
// bounds are generous: they check "does not hang", not speed.
#include "core/subprocess.hpp"

#include <cohort/error.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cohort::detail {
namespace {

std::string fake_smi(const std::string& name) {
    return (std::filesystem::path(__FILE__).parent_path().parent_path() / "fixtures" / "fake_smi" / name).string();
}

// A fresh path under the temp directory, removed at scope exit.
struct TempPath {
    std::filesystem::path path;
    explicit TempPath(const std::string& stem)
        : path(std::filesystem::temp_directory_path() / (stem + "-" + std::to_string(::getpid()))) {
        std::filesystem::remove(path);
    }
    ~TempPath() { std::filesystem::remove(path); }
};

// Dead, or a zombie nobody has reaped yet (PID 1 in a container may not reap).
bool gone(pid_t pid) {
    if (::kill(pid, 0) != 0) return errno == ESRCH;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string skip, state;
    stat >> skip >> skip >> state;  // "pid (comm) state": comm has no spaces here (sleep)
    return state == "Z" || state == "X";
}

bool gone_within(pid_t pid, std::chrono::seconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!gone(pid)) {
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

pid_t read_pid(const std::filesystem::path& file) {
    std::ifstream in(file);
    pid_t pid = 0;
    in >> pid;
    return pid;
}

std::size_t open_fds() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

// No child left, running or zombie: the test process starts none of its own.
void expect_no_children() {
    errno = 0;
    EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
    EXPECT_EQ(errno, ECHILD);
}

TEST(RunWithDeadline, CapturesOutputAndExitStatus) {
    const RunResult r = run_with_deadline({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, 10);
    EXPECT_TRUE(r.exited);
    EXPECT_EQ(r.exit_status, 3);
    EXPECT_EQ(r.signal, 0);
    EXPECT_FALSE(r.timed_out);
    EXPECT_FALSE(r.succeeded());
    EXPECT_EQ(r.stdout_text, "out\n");
    EXPECT_EQ(r.stderr_text, "err\n");
    EXPECT_GT(r.elapsed_seconds, 0);
    EXPECT_EQ(describe_failure(r, 10), "exit status 3: err");
    EXPECT_TRUE(run_with_deadline({"true"}, 10).succeeded());
    expect_no_children();
}

TEST(RunWithDeadline, ReadsMoreThanAPipeHolds) {
    // 1 MB: far past the 64 KiB pipe buffer, so stdout and stderr must be
    // read as they come or the child blocks.
    const RunResult r = run_with_deadline(
        {"/bin/sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' a; head -c 300000 /dev/zero | tr '\\0' b >&2"}, 20);
    EXPECT_TRUE(r.succeeded());
    EXPECT_EQ(r.stdout_text, std::string(1000000, 'a'));
    EXPECT_EQ(r.stderr_text, std::string(300000, 'b'));
}

TEST(RunWithDeadline, StdinIsEmpty) {
    // cat would wait for input forever if stdin were the test's terminal.
    const RunResult r = run_with_deadline({"cat"}, 10);
    EXPECT_TRUE(r.succeeded());
    EXPECT_EQ(r.stdout_text, "");
}

TEST(RunWithDeadline, ReportsTheSignalThatEndedIt) {
    const RunResult r = run_with_deadline({"/bin/sh", "-c", "kill -SEGV $$"}, 10);
    EXPECT_FALSE(r.exited);
    EXPECT_EQ(r.signal, SIGSEGV);
    EXPECT_EQ(describe_failure(r, 10).rfind("killed by signal 11 (", 0), 0u) << describe_failure(r, 10);
}

TEST(RunWithDeadline, ChildSignalsAreResetWhateverTheCallerBlocks) {
    // A probe thread may block signals; the child must not inherit that mask.
    RunResult r;
    std::thread([&] {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &set, nullptr);
        r = run_with_deadline({"/bin/sh", "-c", "kill -TERM $$; sleep 5"}, 10);
    }).join();
    EXPECT_EQ(r.signal, SIGTERM);
    EXPECT_LT(r.elapsed_seconds, 4);
}

TEST(RunWithDeadline, KillsAHangingChildAtTheDeadline) {
    const RunResult r = run_with_deadline({"/bin/sh", "-c", "echo early; echo late >&2; exec sleep 100000"}, 0.5);
    EXPECT_TRUE(r.timed_out);
    EXPECT_FALSE(r.exited);
    EXPECT_EQ(r.signal, SIGKILL);
    EXPECT_GE(r.elapsed_seconds, 0.45);
    EXPECT_LT(r.elapsed_seconds, 3);
    EXPECT_EQ(r.stdout_text, "early\n");  // what it printed before the deadline is kept
    EXPECT_EQ(r.stderr_text, "late\n");
    EXPECT_EQ(describe_failure(r, 0.5), "timed out after 0.5s (killed)");
    expect_no_children();
}

TEST(RunWithDeadline, KillsTheWholeProcessGroup) {
    // The script forks a child holding stdout open and waits for it: killing
    // only the script would leave the child, and the pipe, alive.
    TempPath pidfile("cohort-smi-hang-forks");
    ::setenv("FAKE_SMI_PIDFILE", pidfile.path.c_str(), 1);
    const auto start = std::chrono::steady_clock::now();
    const RunResult r = run_with_deadline({fake_smi("nvidia-smi-hang-forks")}, 0.5);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ::unsetenv("FAKE_SMI_PIDFILE");
    EXPECT_TRUE(r.timed_out);
    EXPECT_LT(took, 3);
    EXPECT_EQ(r.stdout_text, "partial output\n");
    const pid_t child = read_pid(pidfile.path);
    ASSERT_GT(child, 0);
    EXPECT_TRUE(gone_within(child, std::chrono::seconds(2))) << "the forked child " << child << " survived";
    expect_no_children();
}

TEST(RunWithDeadline, DoesNotWaitForADescendantHoldingThePipe) {
    // The script exits at once but leaves a child with stdout open: EOF never
    // comes, yet the run is over when the script is.
    TempPath pidfile("cohort-smi-parent-exits");
    ::setenv("FAKE_SMI_PIDFILE", pidfile.path.c_str(), 1);
    ::setenv("FAKE_SMI_PARENT_EXITS", "1", 1);
    const RunResult r = run_with_deadline({fake_smi("nvidia-smi-hang-forks")}, 2);
    ::unsetenv("FAKE_SMI_PIDFILE");
    ::unsetenv("FAKE_SMI_PARENT_EXITS");
    EXPECT_TRUE(r.succeeded());
    EXPECT_FALSE(r.timed_out);
    EXPECT_LT(r.elapsed_seconds, 1.5);
    EXPECT_EQ(r.stdout_text, "partial output\n");
    const pid_t child = read_pid(pidfile.path);
    ASSERT_GT(child, 0);
    EXPECT_TRUE(gone_within(child, std::chrono::seconds(2))) << "the left-behind child " << child << " survived";
}

TEST(RunWithDeadline, LeaksNoFileDescriptors) {
    const std::size_t before = open_fds();
    for (int i = 0; i < 3; ++i) {
        run_with_deadline({"/bin/sh", "-c", "echo hi; exit 1"}, 5);
        run_with_deadline({"/bin/sh", "-c", "exec sleep 100"}, 0.05);
        EXPECT_THROW(run_with_deadline({"cohort-test-no-such-program"}, 5), Error);
    }
    EXPECT_EQ(open_fds(), before);
    expect_no_children();
}

TEST(RunWithDeadline, MissingProgramIsUnavailable) {
    try {
        run_with_deadline({"cohort-test-no-such-program"}, 5);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::unavailable);
        EXPECT_STREQ(e.what(), "cohort-test-no-such-program: not found on PATH");
    }
    try {
        run_with_deadline({"/nonexistent/dir/nvidia-smi", "-L"}, 5);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::unavailable);
        EXPECT_STREQ(e.what(), "/nonexistent/dir/nvidia-smi: not found");
    }
}

TEST(RunWithDeadline, NotExecutableIsUnavailable) {
    TempPath file("cohort-not-executable");
    std::ofstream(file.path) << "#!/bin/sh\n";
    try {
        run_with_deadline({file.path.string()}, 5);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::unavailable);
        EXPECT_EQ(std::string(e.what()), file.path.string() + ": permission denied (not executable?)");
    }
}

TEST(RunWithDeadline, RejectsBadArguments) {
    EXPECT_THROW(run_with_deadline({}, 1), Error);
    for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL}) {
        try {
            run_with_deadline({"true"}, bad);
            ADD_FAILURE() << "no error for " << bad;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
        }
    }
}

TEST(DescribeFailure, QuotesStderrElseStdout) {
    RunResult r;
    r.exited = true;
    r.exit_status = 6;
    r.stdout_text = "No devices were found\n";
    EXPECT_EQ(describe_failure(r, 2), "exit status 6: No devices were found");
    r.stderr_text = "\n  first line  \n\nsecond\nthird\nfourth\n";
    EXPECT_EQ(describe_failure(r, 2), "exit status 6: first line second third");
    r.stderr_text = std::string(1000, 'x');
    EXPECT_EQ(describe_failure(r, 2), "exit status 6: " + std::string(400, 'x') + "...");
    EXPECT_EQ(format_seconds(2), "2");
    EXPECT_EQ(format_seconds(0.25), "0.25");
}

// spawn_process, the one posix_spawn wrapper (run_with_deadline and the
// local scheduler's workers): its own process group, the environment and
// directory asked for, a signal the parent ignores back at its default, and
// a program that cannot start reported as an errno, not a child.
TEST(SpawnProcess, StartsInItsOwnGroupWithTheGivenSetup) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const auto old = std::signal(SIGTERM, SIG_IGN);
    SpawnRequest request;
    request.argv = {"sh", "-c",
                    "echo \"$(pwd) $COHORT_SPAWN_TEST $(ps -o pgid= -p $$ | tr -d ' ') $$\"; "
                    "kill -TERM $$; echo survived"};
    request.env = {"COHORT_SPAWN_TEST=here", "PATH=" + std::string(std::getenv("PATH"))};
    request.cwd = "/";
    request.stdout_fd = fds[1];
    const Spawned spawned = spawn_process(request);
    std::signal(SIGTERM, old);
    ::close(fds[1]);
    ASSERT_GT(spawned.pid, 0);
    EXPECT_EQ(spawned.error, 0);
    std::string out;
    char buffer[256];
    for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(spawned.pid, &status, 0), spawned.pid);
    const std::string pid = std::to_string(spawned.pid);
    EXPECT_EQ(out, "/ here " + pid + " " + pid + "\n") << out;
    ASSERT_TRUE(WIFSIGNALED(status)) << out;  // SIGTERM was at its default again
    EXPECT_EQ(WTERMSIG(status), SIGTERM);

    SpawnRequest missing;
    missing.argv = {"cohort-no-such-program-anywhere"};
    const Spawned failed = spawn_process(missing);
    EXPECT_EQ(failed.pid, -1);
    EXPECT_EQ(failed.error, ENOENT);
}

// A child spawned with parent_death_signal dies when the thread that spawned
// it ends: how cohort-run's workers die with a launcher killed by SIGKILL
// (which no handler of the launcher's can see).
TEST(SpawnProcess, ParentDeathSignalKillsTheChildWhenItsSpawnerEnds) {
    SpawnRequest request;
    request.argv = {"sleep", "30"};
    request.parent_death_signal = SIGKILL;
    Spawned spawned;
    std::thread spawner([&] { spawned = spawn_process(request); });
    spawner.join();
    ASSERT_GT(spawned.pid, 0);
    ASSERT_EQ(spawned.error, 0);
    int status = 0;
    pid_t r = 0;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((r = ::waitpid(spawned.pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (r == 0) {
        ::kill(spawned.pid, SIGKILL);
        ::waitpid(spawned.pid, &status, 0);
        FAIL() << "the child outlived the thread that spawned it by 5 s";
    }
    ASSERT_EQ(r, spawned.pid);
    ASSERT_TRUE(WIFSIGNALED(status));
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

// Without it the child runs on (run_with_deadline's children: their caller
// waits for them). Either way it gets 0, 1 and 2 only: not a descriptor
// opened close-on-exec, and not one opened without it (libcurl's, a
// driver's) either.
TEST(SpawnProcess, NoParentDeathSignalAndOnlyTheStandardDescriptors) {
    int keep[2], drop[2];
    ASSERT_EQ(::pipe(keep), 0);
    ASSERT_EQ(::pipe2(drop, O_CLOEXEC), 0);
    // What each of ours is, as /proc names it ("pipe:[1234]"): the child's
    // descriptors are compared by that, not by number.
    const auto target = [](const std::string& link) {
        std::error_code ec;
        return std::filesystem::read_symlink(link, ec).string();
    };
    std::vector<std::string> ours;
    for (int fd : {keep[0], keep[1], drop[0], drop[1]}) ours.push_back(target("/proc/self/fd/" + std::to_string(fd)));
    SpawnRequest request;
    request.argv = {"sleep", "30"};
    Spawned spawned;
    std::thread spawner([&] { spawned = spawn_process(request); });
    spawner.join();
    ASSERT_GT(spawned.pid, 0);
    // spawn_process returns once exec has happened (or failed).
    std::error_code ec;
    std::vector<std::string> held;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(spawned.pid) + "/fd", ec))
        held.push_back(entry.path().filename().string() + " -> " + target(entry.path().string()));
    ::kill(spawned.pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(spawned.pid, &status, 0), spawned.pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);  // its spawner's end did not kill it
    ASSERT_FALSE(held.empty()) << ec.message();
    for (const std::string& fd : held)
        for (const std::string& mine : ours) EXPECT_EQ(fd.find(mine), std::string::npos) << fd;
    // The caller's own descriptors are as they were.
    EXPECT_EQ(::fcntl(keep[0], F_GETFD) & FD_CLOEXEC, 0);
    for (int fd : {keep[0], keep[1], drop[0], drop[1]}) ::close(fd);
}

}  // namespace
}  // namespace cohort::detail
