// Elastic scaling policy: what a launcher does when a worker fails,
// straggles or hangs, or when capacity appears. An AutoScaler evaluates a
// rule pack (rules/elastic.yaml unless the user gives one) against each
// event and turns the actions that fire into a ScalingPlan, bounded by
// relaunch budgets, a host blacklist and min_nodes/max_nodes. A Scheduler
// (<cohort/scheduler.hpp>) carries the plan out. docs/elastic-policy.md
// describes the pack, the plan and the limits.
#pragma once

#include <cohort/exit_cause.hpp>
#include <cohort/rules.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

// What one worker needs: a scheduler that places workers reserves it.
struct Resources {
    int gpus = 0;
    int cpus = 0;
    bool operator==(const Resources&) const = default;
};

enum class EventKind : uint8_t {
    failed,     // a worker exited with an error or was killed
    straggler,  // a worker's steps are persistently slower than the others'
    hung,       // a worker stopped making progress (no heartbeat, no step)
    job_hung,   // the whole job stopped making progress
    capacity,   // room for more workers appeared
    exited_ok,  // a worker exited with status 0 (it finished)
};
COHORT_API std::string_view to_string(EventKind kind) noexcept;

struct ScalingEvent {
    EventKind kind = EventKind::failed;
    std::string node;    // the worker it is about; empty for job_hung and capacity
    std::string host;    // where that worker runs (else taken from the ClusterView), or where capacity appeared
    std::string detail;  // for people: "exit code 1", "no heartbeat for 60s"
    std::optional<int> exit_code;
    ExitCause cause = ExitCause::none;        // failed: what the scheduler knows beyond the exit status
    std::optional<double> straggler_score;    // the coordinator's score: its step rate over the median's, in [0, 1]
    std::optional<double> straggler_seconds;  // how long it has straggled; else the auto-scaler measures it
    std::optional<int> free_slots;            // capacity: workers that `host` (or the cluster) can take now
};

struct NodeInfo {
    std::string id;
    std::string host;
    Resources resources;
};

struct HostInfo {
    std::string name;
    int free_slots = 0;  // workers it can take now
};

// What the launcher knows when an event arrives. A failed or exited
// worker may still be listed: the auto-scaler counts the event's node as
// gone either way. With no hosts, placement is left to the scheduler (steps
// carry an empty host and the plan lists the hosts to avoid).
struct ClusterView {
    std::vector<NodeInfo> nodes;  // the job's workers
    std::vector<HostInfo> hosts;  // where workers may run
};

enum class StepKind : uint8_t {
    launch,       // start a new worker; the launcher names it
    remove,       // stop the worker (if it still runs) and drop it from the job
    relaunch,     // stop the worker if it still runs, start it again under the same id
    restart_all,  // stop every worker of the job and start each again
};
COHORT_API std::string_view to_string(StepKind kind) noexcept;

struct PlanStep {
    StepKind kind = StepKind::launch;
    std::string node;  // remove, relaunch: the worker; launch, restart_all: empty
    std::string host;  // launch, relaunch: where; empty: where the scheduler chooses
    Resources resources;
    std::string rule;    // the rule whose action asked for it; empty when a limit did
    std::string reason;  // for people: "node w3 failed (exit code 1); relaunch 1 of 3"
};

struct ScalingPlan {
    std::vector<PlanStep> steps;  // in order
    // What the plan does not do that a rule asked for, why, and whether the
    // job is now below min_nodes: for the operator's log.
    std::vector<std::string> warnings;
    // Hosts blacklisted now; a scheduler that places workers itself must not
    // use them.
    std::vector<std::string> avoid_hosts;
    int nodes_after = 0;           // workers once the plan is carried out
    bool below_min_nodes = false;  // nodes_after < min_nodes (a warning says so)
};

// One line per step, then one per warning ("no change" for an empty plan).
COHORT_API std::string describe(const PlanStep& step);
COHORT_API std::string describe(const ScalingPlan& plan);
// {"steps":[{"kind","node","host","resources":{"gpus","cpus"},"rule","reason"}],
//  "warnings":[...],"avoid_hosts":[...],"nodes_after":n,"below_min_nodes":bool}
COHORT_API std::string to_json(const ScalingPlan& plan);

// How many relaunches each worker and the whole job may still have. A
// relaunch, a replacement and a restart of all workers each count once
// against the job; a relaunch also counts against its worker.
class COHORT_API RelaunchBudget {
public:
    RelaunchBudget(int per_node, int per_job);

    int per_node() const { return per_node_; }
    int per_job() const { return per_job_; }
    int node_used(std::string_view node) const;
    int job_used() const { return job_used_; }
    // Why one more relaunch of `node` (empty: a job-wide restart or a
    // replacement) is refused, e.g. "node w3: relaunch budget 3 used up";
    // empty when it is allowed.
    std::string refusal(std::string_view node) const;
    // Counts one relaunch of `node` (empty: one against the job only).
    void charge(std::string_view node);

private:
    int per_node_;
    int per_job_;
    int job_used_ = 0;
    std::map<std::string, int, std::less<>> used_;
};

struct BlacklistOptions {
    int after_failures = 2;  // failures on one host within `window` that blacklist it; 0: never
    std::chrono::duration<double> window{300};
    // The k-th blacklisting of a host lasts base_cooldown * 2^(k-1), at most max_cooldown.
    std::chrono::duration<double> base_cooldown{30};
    std::chrono::duration<double> max_cooldown{600};
};

// Hosts whose workers keep failing, kept off for a cooldown that doubles
// each time the same host is blacklisted again. Times are seconds on the
// caller's clock, as for RuleEngine::evaluate.
class COHORT_API HostBlacklist {
public:
    explicit HostBlacklist(BlacklistOptions options = {});

    // Counts a worker failure on `host` at `now`; true when it blacklists
    // the host (its failure count then starts again from zero).
    bool record_failure(std::string_view host, double now);
    bool blacklisted(std::string_view host, double now) const;
    // When the host comes off the blacklist, if it is on it at `now`.
    std::optional<double> until(std::string_view host, double now) const;
    int times_blacklisted(std::string_view host) const;
    std::vector<std::string> hosts(double now) const;  // blacklisted at `now`, by name
    const BlacklistOptions& options() const { return options_; }

private:
    struct Entry {
        std::vector<double> failures;  // within the window
        int times = 0;
        double until = 0;
    };
    BlacklistOptions options_;
    std::map<std::string, Entry, std::less<>> hosts_;
};

struct ScalingOptions {
    int min_nodes = 1;
    int max_nodes = 1;
    int max_node_relaunches = 3;
    int max_job_relaunches = 10;
    BlacklistOptions blacklist;
    // Straggler reports of one worker further apart than this start a new
    // run; straggler_for is the length of the current run (when the event
    // does not carry straggler_seconds).
    std::chrono::duration<double> straggler_gap{60};
    Resources node_resources;  // of a new worker; a relaunched or replaced one keeps its own
};

// Turns events into plans. Not thread-safe: one thread calls on_event.
class COHORT_API AutoScaler {
public:
    // The shipped policy (default_rules_path()).
    explicit AutoScaler(ScalingOptions options);
    // A user's policy instead. Throws Error(parse) for a pack that uses an
    // unknown action type or variable, or gives an action a bad target or
    // parameter, naming the rule and where it is; Error(invalid_argument)
    // for inconsistent options.
    AutoScaler(ScalingOptions options, const std::filesystem::path& rules);
    AutoScaler(ScalingOptions options, RuleSet rules);
    AutoScaler(AutoScaler&&) noexcept;
    AutoScaler& operator=(AutoScaler&&) noexcept;
    ~AutoScaler();

    // Evaluates the policy for one event at `now` (seconds, never going
    // backwards) and returns what to do. Budgets are charged and failures
    // counted here: the caller is expected to carry the plan out.
    ScalingPlan on_event(const ScalingEvent& event, const ClusterView& cluster, double now);

    const ScalingOptions& options() const;
    const RelaunchBudget& budget() const;
    const HostBlacklist& blacklist() const;
    const RuleSet& rules() const;
    // The rule engine's answer for the last event (fired rules, errors).
    const Evaluation& last_evaluation() const;

    // The shipped elastic.yaml: $COHORT_RULES_DIR, then share/cohort/rules
    // next to the library, then the source tree. Error(not_found) saying
    // where it looked.
    static std::filesystem::path default_rules_path();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
