// The local scheduler: workers as process groups on this machine.
//
// Each worker is the leader of its own process group, reaped as
// elastic/reap.hpp says.
#include "elastic/reap.hpp"
#include "elastic/spawn.hpp"

#include <cohort/error.hpp>
#include <cohort/scheduler.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include <signal.h>

namespace cohort {

Scheduler::~Scheduler() = default;

std::vector<ScalingEvent> Scheduler::capacity() {
    return {};
}

namespace {

using Clock = std::chrono::steady_clock;

// How long to wait for a SIGKILLed worker before leaving it to a later
// poll(): a process in uninterruptible sleep (a stuck driver call) dies
// only when the kernel lets go, and stop must not hang with it.
constexpr auto kill_wait = std::chrono::seconds(2);

struct Worker {
    pid_t pid = -1;
    bool stopping = false;  // we asked it to stop
};

}  // namespace

struct LocalScheduler::Impl {
    WorkerFactory factory;
    std::chrono::milliseconds grace;
    std::map<std::string, Worker, std::less<>> workers;
    std::vector<WorkerExit> exits;

    // Kills what is left of the exited worker's group, reaps it and records
    // how it ended.
    void reap(const std::string& id, const Worker& worker) {
        WorkerExit exit;
        exit.id = id;
        exit.stopped = worker.stopping;
        if (const auto status = detail::kill_group_and_reap(worker.pid)) {
            detail::describe_status(*status, exit);
        } else {
            exit.exit_code = -1;
            exit.message = "exit status unknown: the process was reaped elsewhere (is SIGCHLD ignored?)";
        }
        if (exit.stopped) exit.message = "stopped by the scheduler: " + exit.message;
        exits.push_back(std::move(exit));
    }

    void reap_exited() {
        detail::reap_exited(workers, [this](const std::string& id, const Worker& worker) { reap(id, worker); });
    }

    // Waits until none of `ids` runs or `until` passes, reaping as they end.
    void wait_for(const std::vector<std::string>& ids, Clock::time_point until) {
        detail::wait_for_exits(workers, ids, until, [this] { reap_exited(); });
    }

    void stop_many(const std::vector<std::string>& ids, std::chrono::milliseconds wait) {
        reap_exited();  // those that ended by themselves are not "stopped"
        for (const std::string& id : ids) {
            auto it = workers.find(id);
            if (it == workers.end()) continue;
            it->second.stopping = true;
            ::killpg(it->second.pid, SIGTERM);
        }
        wait_for(ids, Clock::now() + wait);
        for (const std::string& id : ids)
            if (auto it = workers.find(id); it != workers.end()) ::killpg(it->second.pid, SIGKILL);
        wait_for(ids, Clock::now() + kill_wait);
    }

    std::vector<std::string> ids() const {
        std::vector<std::string> out;
        for (const auto& [id, worker] : workers) out.push_back(id);
        return out;
    }

    WorkerSpec make(const PlanStep& step) {
        WorkerSpec spec = factory(step);
        if (spec.id.empty()) {
            if (step.node.empty())
                throw Error(Errc::invalid_argument,
                            "LocalScheduler: the worker factory returned a WorkerSpec with no id for a launch step; "
                            "a new worker's id is the factory's to choose");
            spec.id = step.node;
        }
        return spec;
    }
};

LocalScheduler::LocalScheduler(WorkerFactory factory, std::chrono::milliseconds grace)
    : impl_(std::make_unique<Impl>()) {
    if (!factory) throw Error(Errc::invalid_argument, "LocalScheduler: the worker factory is empty");
    if (grace.count() < 0)
        throw Error(Errc::invalid_argument,
                    fmt::format("LocalScheduler: the grace period must not be negative, not {}ms", grace.count()));
    impl_->factory = std::move(factory);
    impl_->grace = grace;
}

LocalScheduler::~LocalScheduler() {
    try {
        stop_all(impl_->grace);
    } catch (...) {
        // Nothing to report to in a destructor; the kernel cleans up the rest.
    }
}

std::string LocalScheduler::name() const {
    return "local";
}

void LocalScheduler::launch(const WorkerSpec& spec) {
    if (spec.id.empty()) throw Error(Errc::invalid_argument, "LocalScheduler::launch: the worker has no id");
    Impl& impl = *impl_;
    impl.reap_exited();  // an id whose worker has ended may be used again
    if (auto it = impl.workers.find(spec.id); it != impl.workers.end())
        throw Error(Errc::invalid_argument,
                    fmt::format("LocalScheduler::launch: worker '{}' is already running (pid {}); stop it first or "
                                "give the new worker another id",
                                spec.id, it->second.pid));
    const detail::Spawned spawned = detail::spawn_worker(spec);
    if (spawned.error != 0) {
        WorkerExit exit;
        exit.id = spec.id;
        exit.kind = ExitKind::not_started;
        exit.exit_code = -1;
        exit.message = detail::start_failure(spec, spawned.error);
        impl.exits.push_back(std::move(exit));
        return;
    }
    impl.workers.emplace(spec.id, Worker{spawned.pid, false});
}

void LocalScheduler::stop(std::string_view id, std::chrono::milliseconds grace) {
    impl_->stop_many({std::string(id)}, grace);
}

void LocalScheduler::execute(const ScalingPlan& plan) {
    Impl& impl = *impl_;
    for (const PlanStep& step : plan.steps) {
        switch (step.kind) {
            case StepKind::launch:
                launch(impl.make(step));
                break;
            case StepKind::remove:
                stop(step.node, impl.grace);
                break;
            case StepKind::relaunch:
                stop(step.node, impl.grace);
                launch(impl.make(step));
                break;
            case StepKind::restart_all: {
                impl.reap_exited();
                const std::vector<std::string> ids = impl.ids();
                impl.stop_many(ids, impl.grace);
                for (const std::string& id : ids) {
                    PlanStep one = step;
                    one.kind = StepKind::relaunch;
                    one.node = id;
                    launch(impl.make(one));
                }
                break;
            }
        }
    }
}

std::vector<WorkerExit> LocalScheduler::poll() {
    impl_->reap_exited();
    return std::exchange(impl_->exits, {});
}

std::vector<std::string> LocalScheduler::running() const {
    return impl_->ids();
}

void LocalScheduler::signal_all(int signal) {
    for (const auto& [id, worker] : impl_->workers) ::killpg(worker.pid, signal);
}

void LocalScheduler::stop_all(std::chrono::milliseconds grace) {
    impl_->stop_many(impl_->ids(), grace);
}

int64_t LocalScheduler::pid(std::string_view id) const {
    auto it = impl_->workers.find(id);
    return it == impl_->workers.end() ? -1 : it->second.pid;
}

}  // namespace cohort
