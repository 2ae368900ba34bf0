// Carrying out scaling plans. A Scheduler starts and stops a job's workers
// as a ScalingPlan says and reports how they ended; the interface names
// workers by id only, so a Kubernetes scheduler (pods) can implement it as
// well as LocalScheduler (processes on this machine) does.
#pragma once

#include <cohort/scaling.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

// How to start one worker; the launcher builds it for each plan step.
struct WorkerSpec {
    std::string id;                          // unique among the running workers
    std::vector<std::string> argv;           // argv[0] is looked up on the launcher's PATH unless it holds a '/'
    std::map<std::string, std::string> env;  // set on top of the launcher's environment
    std::filesystem::path cwd;               // empty: the launcher's working directory
};

enum class ExitKind : uint8_t {
    exited,       // it exited: exit_code
    signaled,     // a signal ended it: signal
    not_started,  // it could not be started: message says why
};

struct WorkerExit {
    std::string id;
    ExitKind kind = ExitKind::exited;
    int exit_code = 0;
    int signal = 0;
    bool stopped = false;  // the scheduler stopped it (remove, relaunch, restart, stop_all)
    ExitCause cause = ExitCause::none;  // a cluster scheduler's reason (node lost, OOM, preemption, ...)
    std::string host;  // where it ran, when the scheduler placed it (a Kubernetes node)
    // "exit code 3", "killed by signal 15 (Terminated)",
    // "cannot start 'trainer': No such file or directory"
    std::string message;

    bool succeeded() const { return kind == ExitKind::exited && exit_code == 0; }
};

// Not thread-safe: one thread (the launcher's loop) calls it.
class COHORT_API Scheduler {
public:
    virtual ~Scheduler();
    virtual std::string name() const = 0;
    // Carries out the steps in order. A worker that cannot be started is
    // reported by the next poll(), not thrown.
    virtual void execute(const ScalingPlan& plan) = 0;
    // Workers that ended since the last poll, stopped ones included. Never blocks.
    virtual std::vector<WorkerExit> poll() = 0;
    // Ids of the workers the scheduler has not yet seen end, sorted.
    virtual std::vector<std::string> running() const = 0;
    virtual void signal_all(int signal) = 0;
    // Asks every worker to stop, and ends the ones still running after `grace`.
    virtual void stop_all(std::chrono::milliseconds grace) = 0;
    // Room for more workers that appeared since the last call, as capacity
    // events for the policy. Never blocks; a scheduler that cannot tell
    // (LocalScheduler) returns none.
    virtual std::vector<ScalingEvent> capacity();
};

// Builds the worker for a launch step (a new id), a relaunch step (the
// step's node) or each worker of a restart_all (a relaunch step per worker).
using WorkerFactory = std::function<WorkerSpec(const PlanStep& step)>;

// Workers as processes on this machine, each in a process group of its own
// (so stopping one reaches what it started), stdin on /dev/null, stdout and
// stderr inherited. Stopping sends SIGTERM to the group, then SIGKILL after
// the grace period; when a worker exits, what is left of its group is
// killed. Steps' hosts are ignored. The destructor stops every worker.
// A worker gets SIGKILL when the thread that launched it ends, however it
// ends (a launcher killed with SIGKILL included), so no worker outlives its
// launcher: call execute/launch from a thread that lives as long as the
// workers should, such as the main thread.
class COHORT_API LocalScheduler final : public Scheduler {
public:
    explicit LocalScheduler(WorkerFactory factory, std::chrono::milliseconds grace = std::chrono::milliseconds(10000));
    ~LocalScheduler() override;
    LocalScheduler(const LocalScheduler&) = delete;
    LocalScheduler& operator=(const LocalScheduler&) = delete;

    std::string name() const override;
    void execute(const ScalingPlan& plan) override;
    std::vector<WorkerExit> poll() override;
    std::vector<std::string> running() const override;
    void signal_all(int signal) override;
    void stop_all(std::chrono::milliseconds grace) override;

    // Starts one worker (the job's first ones). Throws Error(invalid_argument)
    // for an empty id or argv, or an id already running; a program that
    // cannot be started comes back from poll() as ExitKind::not_started.
    void launch(const WorkerSpec& spec);
    // Stops one worker, waiting up to `grace` before SIGKILL; nothing if it
    // is not running.
    void stop(std::string_view id, std::chrono::milliseconds grace);
    // The worker's process id, or -1 when it is not running.
    int64_t pid(std::string_view id) const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
