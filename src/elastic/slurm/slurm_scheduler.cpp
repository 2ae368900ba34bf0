// The Slurm scheduler: one srun child per worker, each a job step of one
// task on one node of the allocation.
//
// srun stays in the foreground for as long as its step runs and exits when
// the task does, so a step's end is a child's exit, seen by the next poll()
// (waitid with WNOWAIT, as LocalScheduler): no slurmctld round trip, no
// polling of squeue. What srun wrote on stderr says why, beyond its status
// (step_outcome.hpp).
#include "elastic/reap.hpp"
#include "elastic/slurm/srun_relay.hpp"
#include "elastic/slurm/step_outcome.hpp"
#include "elastic/spawn.hpp"

#include "core/subprocess.hpp"

#include <cohort/error.hpp>
#include <cohort/slurm_scheduler.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;

// After SIGKILL or a step abort: how long before giving up on a step
// (Slurm's KillWait plus the time to tell srun), leaving it to a later poll.
constexpr auto kill_wait = std::chrono::seconds(5);
// srun has exited: its stderr ends at once unless something else holds it.
constexpr auto relay_wait = std::chrono::milliseconds(500);
// scontrol/squeue/scancel, asked while a plan or a poll waits.
constexpr double query_deadline_s = 3;

struct Step {
    pid_t pid = -1;  // srun's
    std::string node;
    bool stopping = false;
    std::unique_ptr<detail::SrunRelay> relay;
};

std::string join(const std::vector<std::string>& items, std::string_view sep = ",") {
    std::string out;
    for (const std::string& item : items) out += (out.empty() ? "" : std::string(sep)) + item;
    return out;
}

}  // namespace

struct SlurmScheduler::Impl {
    WorkerFactory factory;
    SlurmOptions options;
    std::map<std::string, Step, std::less<>> steps;
    std::vector<WorkerExit> exits;
    std::set<std::string, std::less<>> lost;                    // nodes seen lost
    std::set<std::string, std::less<>> avoid;                   // the last plan's avoid_hosts
    std::map<std::string, std::string, std::less<>> last_node;  // where each worker ran last

    bool in_allocation(std::string_view node) const {
        return std::find(options.nodes.begin(), options.nodes.end(), node) != options.nodes.end();
    }

    bool usable(std::string_view node) const { return !lost.contains(node) && !avoid.contains(node); }

    int load(std::string_view node) const {
        int n = 0;
        for (const auto& [id, step] : steps) n += step.node == node ? 1 : 0;
        return n;
    }

    // The node for a new step: `wanted` when it is usable and has room,
    // else the least loaded usable node with room; empty when none has.
    std::string place(std::string_view wanted) const {
        if (!wanted.empty() && usable(wanted) && load(wanted) < options.workers_per_node) return std::string(wanted);
        const std::string* best = nullptr;
        int best_load = 0;
        for (const std::string& node : options.nodes) {
            const int l = load(node);
            if (!usable(node) || l >= options.workers_per_node) continue;
            if (best == nullptr || l < best_load) {
                best = &node;
                best_load = l;
            }
        }
        return best == nullptr ? std::string() : *best;
    }

    std::string no_room() const {
        std::vector<std::string> gone(lost.begin(), lost.end()), avoided(avoid.begin(), avoid.end());
        return fmt::format(
            "no node of Slurm job {} has room for another worker: {} nodes ({}), {} workers per node, "
            "{} running; lost: {}; avoided by the policy: {}. Give the job more nodes (sbatch -N) or "
            "more workers per node",
            options.job_id, options.nodes.size(), join(options.nodes), options.workers_per_node, steps.size(),
            gone.empty() ? "none" : join(gone), avoided.empty() ? "none" : join(avoided));
    }

    std::vector<std::string> srun_argv(const WorkerSpec& spec, const std::string& node) const {
        std::vector<std::string> argv{
            options.srun, "--jobid=" + options.job_id, "--nodelist=" + node, "--nodes=1", "--ntasks=1",
            "--overlap",  "--job-name=" + spec.id};
        std::vector<std::string> excluded;
        for (const std::string& n : options.nodes)
            if (n != node && !usable(n)) excluded.push_back(n);
        if (!excluded.empty()) argv.push_back("--exclude=" + join(excluded));
        argv.insert(argv.end(), options.srun_args.begin(), options.srun_args.end());
        argv.push_back("--");
        argv.insert(argv.end(), spec.argv.begin(), spec.argv.end());
        return argv;
    }

    void not_started(const std::string& id, std::string message) {
        WorkerExit exit;
        exit.id = id;
        exit.kind = ExitKind::not_started;
        exit.exit_code = -1;
        exit.message = std::move(message);
        exits.push_back(std::move(exit));
    }

    // A step that ended without srun saying how its task did: was its node lost?
    bool node_down(const std::string& node) const {
        try {
            const detail::RunResult r =
                detail::run_with_deadline({options.scontrol, "show", "node", node, "--oneliner"}, query_deadline_s);
            return r.succeeded() && detail::node_state_lost(r.stdout_text);
        } catch (const Error&) {
            return false;  // no scontrol: srun's word stands
        }
    }

    // A step cancelled without a reason: is the job being preempted?
    bool job_preempted() const {
        try {
            const detail::RunResult r = detail::run_with_deadline(
                {options.scontrol, "show", "job", options.job_id, "--oneliner"}, query_deadline_s);
            return r.succeeded() && detail::job_preempted(r.stdout_text);
        } catch (const Error&) {
            return false;
        }
    }

    void reap(const std::string& id, Step& step) {
        // srun is its group's leader; nothing of it may linger.
        const std::optional<int> status = detail::kill_group_and_reap(step.pid);
        const std::vector<std::string> lines = step.relay ? step.relay->finish(relay_wait) : std::vector<std::string>{};
        WorkerExit exit;
        exit.id = id;
        exit.stopped = step.stopping;
        if (!status) {
            exit.exit_code = -1;
            exit.message = "exit status unknown: srun was reaped elsewhere (is SIGCHLD ignored?)";
        } else {
            detail::describe_step(*status, lines, step.node, exit);
        }
        if (!exit.stopped && !exit.succeeded() && exit.cause == ExitCause::none &&
            !detail::task_status_reported(lines) && node_down(step.node)) {
            exit.cause = ExitCause::node_lost;
            exit.message =
                fmt::format("node {} lost (scontrol shows it down or not responding): {}", step.node, exit.message);
        }
        if (!exit.stopped && !exit.succeeded() && exit.cause == ExitCause::none && detail::step_cancelled(lines) &&
            job_preempted()) {
            exit.cause = ExitCause::preempted;
            exit.message = fmt::format("preempted (Slurm job {} has a PreemptTime): {}", options.job_id, exit.message);
        }
        if (exit.cause == ExitCause::node_lost) lost.insert(step.node);
        last_node[id] = step.node;
        if (exit.stopped) exit.message = "stopped by the scheduler: " + exit.message;
        exits.push_back(std::move(exit));
    }

    void reap_exited() {
        detail::reap_exited(steps, [this](const std::string& id, Step& step) { reap(id, step); });
    }

    bool any_left(const std::vector<std::string>& ids) const {
        return std::any_of(ids.begin(), ids.end(), [&](const std::string& id) { return steps.contains(id); });
    }

    void wait_for(const std::vector<std::string>& ids, Clock::time_point until) {
        detail::wait_for_exits(steps, ids, until, [this] { reap_exited(); });
    }

    void signal(const std::vector<std::string>& ids, int sig) {
        for (const std::string& id : ids)
            if (auto it = steps.find(id); it != steps.end()) ::kill(it->second.pid, sig);
    }

    // The last resort for steps whose srun would not end: find them by
    // name (--job-name is the worker's id) and scancel them.
    void cancel_by_name(const std::vector<std::string>& ids) {
        std::vector<std::string> left;
        for (const std::string& id : ids)
            if (steps.contains(id)) left.push_back(id);
        if (left.empty()) return;
        try {
            const detail::RunResult r = detail::run_with_deadline(
                {options.squeue, "--noheader", "--steps", "--jobs=" + options.job_id, "--format=%i %j"},
                query_deadline_s);
            std::istringstream in(r.stdout_text);
            std::string step_id, name;
            std::vector<std::string> cancel{options.scancel};
            while (in >> step_id >> name)
                if (std::find(left.begin(), left.end(), name) != left.end()) cancel.push_back(step_id);
            if (cancel.size() > 1) detail::run_with_deadline(cancel, query_deadline_s);
        } catch (const Error&) {
            // SIGKILL to srun below; Slurm ends the step with the job.
        }
    }

    void stop_many(const std::vector<std::string>& ids, std::chrono::milliseconds grace) {
        reap_exited();  // those that ended by themselves are not "stopped"
        for (const std::string& id : ids)
            if (auto it = steps.find(id); it != steps.end()) it->second.stopping = true;
        signal(ids, SIGTERM);  // srun passes it to the task
        wait_for(ids, Clock::now() + grace);
        if (!any_left(ids)) return;
        // Two SIGINTs within a second: srun aborts the step (SIGKILL to its tasks).
        signal(ids, SIGINT);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        signal(ids, SIGINT);
        wait_for(ids, Clock::now() + kill_wait);
        if (!any_left(ids)) return;
        cancel_by_name(ids);
        signal(ids, SIGKILL);
        wait_for(ids, Clock::now() + kill_wait);
    }

    std::vector<std::string> ids() const {
        std::vector<std::string> out;
        for (const auto& [id, step] : steps) out.push_back(id);
        return out;
    }

    WorkerSpec make(const PlanStep& step) {
        WorkerSpec spec = factory(step);
        if (spec.id.empty()) {
            if (step.node.empty())
                throw Error(Errc::invalid_argument,
                            "SlurmScheduler: the worker factory returned a WorkerSpec with no id for a launch step; "
                            "a new worker's id is the factory's to choose");
            spec.id = step.node;
        }
        return spec;
    }
};

SlurmScheduler::SlurmScheduler(WorkerFactory factory, SlurmOptions options) : impl_(std::make_unique<Impl>()) {
    if (!factory) throw Error(Errc::invalid_argument, "SlurmScheduler: the worker factory is empty");
    if (options.job_id.empty())
        throw Error(Errc::invalid_argument, "SlurmScheduler: no job id (SLURM_JOB_ID): run inside an allocation");
    if (options.nodes.empty())
        throw Error(Errc::invalid_argument,
                    fmt::format("SlurmScheduler: Slurm job {} has no nodes (SLURM_JOB_NODELIST)", options.job_id));
    if (options.workers_per_node < 1)
        throw Error(Errc::invalid_argument, fmt::format("SlurmScheduler: workers_per_node must be at least 1, not {}",
                                                        options.workers_per_node));
    if (options.grace.count() < 0)
        throw Error(
            Errc::invalid_argument,
            fmt::format("SlurmScheduler: the grace period must not be negative, not {}ms", options.grace.count()));
    impl_->factory = std::move(factory);
    impl_->options = std::move(options);
}

SlurmScheduler::~SlurmScheduler() {
    try {
        stop_all(impl_->options.grace);
    } catch (...) {
        // Nothing to report to in a destructor; Slurm ends the steps with the job.
    }
}

std::string SlurmScheduler::name() const {
    return "slurm";
}

void SlurmScheduler::launch(const WorkerSpec& spec, std::string_view node) {
    if (spec.id.empty()) throw Error(Errc::invalid_argument, "SlurmScheduler::launch: the worker has no id");
    if (spec.argv.empty() || spec.argv[0].empty())
        throw Error(Errc::invalid_argument,
                    fmt::format("SlurmScheduler::launch: worker '{}' has no program to run (argv is empty)", spec.id));
    Impl& impl = *impl_;
    if (!node.empty() && !impl.in_allocation(node))
        throw Error(Errc::invalid_argument, fmt::format("SlurmScheduler::launch: node '{}' is not in Slurm job {} ({})",
                                                        node, impl.options.job_id, join(impl.options.nodes)));
    impl.reap_exited();
    if (auto it = impl.steps.find(spec.id); it != impl.steps.end())
        throw Error(Errc::invalid_argument,
                    fmt::format("SlurmScheduler::launch: worker '{}' is already running (srun pid {} on {}); stop it "
                                "first or give the new worker another id",
                                spec.id, it->second.pid, it->second.node));
    const std::string where = impl.place(node);
    if (where.empty()) return impl.not_started(spec.id, impl.no_room());
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
        return impl.not_started(
            spec.id, fmt::format("cannot start srun for worker '{}': pipe: {}", spec.id, std::strerror(errno)));
    detail::SpawnRequest request;
    request.argv = impl.srun_argv(spec, where);
    request.env = detail::worker_environment(spec);
    request.cwd = spec.cwd;
    request.stderr_fd = pipe_fds[1];
    // SIGTERM, not SIGKILL: srun passes it on and the step ends with its
    // task; a SIGKILLed srun would leave the step running.
    request.parent_death_signal = SIGTERM;
    const detail::Spawned spawned = detail::spawn_process(request);
    ::close(pipe_fds[1]);
    if (spawned.error != 0) {
        ::close(pipe_fds[0]);
        WorkerSpec shown = spec;
        shown.argv = {impl.options.srun};
        return impl.not_started(spec.id, detail::start_failure(shown, spawned.error));
    }
    Step step;
    step.pid = spawned.pid;
    step.node = where;
    step.relay = std::make_unique<detail::SrunRelay>(pipe_fds[0]);
    impl.steps.emplace(spec.id, std::move(step));
}

void SlurmScheduler::stop(std::string_view id, std::chrono::milliseconds grace) {
    impl_->stop_many({std::string(id)}, grace);
}

void SlurmScheduler::execute(const ScalingPlan& plan) {
    Impl& impl = *impl_;
    impl.avoid = {plan.avoid_hosts.begin(), plan.avoid_hosts.end()};
    for (const PlanStep& step : plan.steps) {
        switch (step.kind) {
            case StepKind::launch: {
                // Placed before the factory runs, so the worker's spec can name its node (step.host).
                PlanStep placed = step;
                placed.host = impl.place(impl.in_allocation(step.host) ? step.host : std::string());
                launch(impl.make(placed), placed.host);
                break;
            }
            case StepKind::remove:
                stop(step.node, impl.options.grace);
                break;
            case StepKind::relaunch: {
                // The step's host, else where it ran, when still usable.
                impl.reap_exited();
                std::string was = node_of(step.node);
                if (was.empty())
                    if (auto it = impl.last_node.find(step.node); it != impl.last_node.end()) was = it->second;
                stop(step.node, impl.options.grace);
                PlanStep placed = step;
                placed.host = impl.place(impl.in_allocation(step.host) ? step.host : was);
                launch(impl.make(placed), placed.host);
                break;
            }
            case StepKind::restart_all: {
                impl.reap_exited();
                std::map<std::string, std::string> where;
                for (const auto& [id, s] : impl.steps) where[id] = s.node;
                const std::vector<std::string> ids = impl.ids();
                impl.stop_many(ids, impl.options.grace);
                for (const std::string& id : ids) {
                    PlanStep one = step;
                    one.kind = StepKind::relaunch;
                    one.node = id;
                    one.host = impl.place(where[id]);
                    launch(impl.make(one), one.host);
                }
                break;
            }
        }
    }
}

std::vector<WorkerExit> SlurmScheduler::poll() {
    impl_->reap_exited();
    return std::exchange(impl_->exits, {});
}

std::vector<std::string> SlurmScheduler::running() const {
    return impl_->ids();
}

void SlurmScheduler::signal_all(int signal) {
    // srun answers a lone SIGINT with a status report, not by passing it on.
    impl_->signal(impl_->ids(), signal == SIGINT ? SIGTERM : signal);
}

void SlurmScheduler::stop_all(std::chrono::milliseconds grace) {
    impl_->stop_many(impl_->ids(), grace);
}

int64_t SlurmScheduler::pid(std::string_view id) const {
    auto it = impl_->steps.find(id);
    return it == impl_->steps.end() ? -1 : it->second.pid;
}

std::string SlurmScheduler::node_of(std::string_view id) const {
    auto it = impl_->steps.find(id);
    return it == impl_->steps.end() ? std::string() : it->second.node;
}

std::vector<std::string> SlurmScheduler::lost_nodes() const {
    return {impl_->lost.begin(), impl_->lost.end()};
}

const SlurmOptions& SlurmScheduler::options() const {
    return impl_->options;
}

}  // namespace cohort
