// Autotuner: tunes a job's collective parameters (the fusion threshold, the
// pipeline chunk, `automatic`'s thresholds: CommTuning) and any other value
// a program hands it (a TransferScheduler's prefetch depth) online, from the
// throughput each training step measured. Rank 0 decides; every rank reads
// the decision from the store under a key naming the step and applies it at
// that same step. The search is bounded in steps and time, then freezes on
// the best values seen and saves them per job, so a restarted job starts
// tuned. docs/collectives.md#autotuning describes the search and its cost.
#pragma once

#include <cohort/export.hpp>
#include <cohort/store.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cohort {

class Communicator;

// One value the Autotuner may change.
struct TunableParameter {
    std::string name;  // unique; letters, digits and '_' ("prefetch_depth")
    // What the search tries, ascending and distinct (1 to 64 values),
    // usually log-spaced: the search moves along this list.
    std::vector<double> candidates;
    // The value in force when tuning starts; one of the candidates unless
    // the parameter is fixed.
    double initial = 0;
    // Puts a value in force on this rank; called on every rank at the same
    // step, on the thread that calls Autotuner::step (or constructs it). A
    // throw fails that step() (or the constructor) with its message.
    std::function<void(double)> apply;
    // Never tuned: `initial` is applied once and stays.
    bool fixed = false;
};

enum class AutotuneSearch : int32_t {
    // Coordinate descent (default): one parameter at a time, every candidate
    // of its grid with the others held, the best kept if it beats the
    // incumbent by min_gain; up to `passes` sweeps.
    coordinate = 0,
    // Horovod's anchor: a Gaussian process over the joint grid, proposing
    // the point of highest expected improvement, at most bayes_samples points.
    bayesian = 1,
};
COHORT_API const char* autotune_search_name(AutotuneSearch search) noexcept;  // "coordinate", "bayesian"

struct AutotuneOptions {
    // Names the job in the store keys (autotune/JOB/STEP) and in the state
    // file, which refuses another job's values.
    std::string job_id = "cohort";
    AutotuneSearch search = AutotuneSearch::coordinate;
    int warmup_steps = 3;  // steps not measured at the start (caches, first allocations)
    int settle_steps = 1;  // steps not measured after each change
    int samples = 5;       // steps measured per candidate; their median is its score
    // Tuning freezes at the last decision step that fits in max_steps, or
    // at the first decision step after max_time, whichever comes first.
    int max_steps = 500;
    std::chrono::milliseconds max_time{std::chrono::minutes(10)};
    int passes = 2;          // coordinate: sweeps at most (one more only if the last changed something)
    int bayes_samples = 20;  // bayesian: points measured at most (Horovod's BAYES_OPT_MAX_SAMPLES)
    // A candidate replaces the incumbent only when its median is higher by
    // this fraction: noise does not move the search.
    double min_gain = 0.02;
    // Values the user fixes by name (never tuned), over TunableParameter's
    // own; $COHORT_AUTOTUNE_<NAME> fixes one too (with_env_defaults).
    std::map<std::string, double> fixed;
    // Where rank 0 keeps the best values of the job. Empty: the file
    // JOB.json in $COHORT_AUTOTUNE_DIR when that is set, else none.
    std::filesystem::path state_file;
    // A state file of this job with frozen values is applied and the tuner
    // starts frozen; with `retune` the search starts from those values.
    bool retune = false;
    // How long a rank waits for rank 0's decision of a step.
    std::chrono::milliseconds timeout{std::chrono::seconds(60)};
    // Rank 0's notes (a state file refused, tuning frozen); empty: one line
    // "cohort autotune: ..." on stderr each.
    std::function<void(const std::string&)> log;
};

// `options` with the environment's say: state_file from
// $COHORT_AUTOTUNE_DIR when empty, and `fixed[name]` from
// $COHORT_AUTOTUNE_<NAME> (the name in capitals: COHORT_AUTOTUNE_FUSION_THRESHOLD=16M)
// for each name in `names` not fixed already; sizes take a K, M or G
// suffix. The only place the autotuner reads the environment.
// Error(invalid_argument) naming a variable whose value is not a number.
COHORT_API AutotuneOptions with_env_defaults(AutotuneOptions options, const std::vector<std::string>& names);

// The CommTuning fields worth tuning on this communicator, with their
// grids and current values: fusion_threshold always; doubling_max unless
// every rank shares memory; hierarchical_min where ranks share hosts and
// there are several hosts; pipeline_chunk with more than one rank;
// shm_single_round_max where some ranks share memory. Each applies through
// comm.set_tuning. `comm` must outlive the parameters.
COHORT_API std::vector<TunableParameter> comm_parameters(Communicator& comm);

// What one step() did.
struct AutotuneStep {
    int64_t step = 0;      // this step's number, from 1
    bool decided = false;  // this was a decision step
    bool changed = false;  // values changed: the next step runs with new ones
    bool frozen = false;   // tuning is over (at this step or before)
};

class COHORT_API Autotuner {
public:
    // Tunes comm_parameters(comm) and `extra` among the communicator's
    // ranks, agreeing through comm.store(). Collective: every rank
    // constructs it; rank 0 loads the state file and publishes the
    // starting values (step 0), which every rank applies before the
    // constructor returns. Error(invalid_argument) for bad options or
    // parameters, Error(timeout) when rank 0's decision never came.
    Autotuner(Communicator& comm, AutotuneOptions options = {}, std::vector<TunableParameter> extra = {});
    // The same for any parameters among `size` ranks meeting in `store`
    // (which only this run may use: a stale key of an earlier run would be
    // read as this run's; null when size is 1).
    Autotuner(int rank, int size, std::shared_ptr<Store> store, std::vector<TunableParameter> parameters,
              AutotuneOptions options = {});
    Autotuner(Autotuner&&) noexcept;
    Autotuner& operator=(Autotuner&&) noexcept;
    ~Autotuner();

    // One training step ended; `throughput` is what it achieved (bytes
    // reduced per second, samples per second: higher is better, finite,
    // not negative). Every rank calls it once per step; rank 0's figures
    // decide. At a decision step rank 0 publishes the next values and every
    // rank applies them before returning.
    AutotuneStep step(double throughput);
    AutotuneStep step(double bytes, std::chrono::duration<double> seconds);

    bool frozen() const;
    int64_t steps() const;  // step() calls so far
    // The values in force, by name.
    std::map<std::string, double> values() const;
    // Rank 0: the best values measured and their median throughput (the
    // starting values and 0 before any measurement, or a loaded state's).
    // Other ranks: the values in force once frozen.
    std::map<std::string, double> best() const;
    double best_throughput() const;
    // The most steps tuning can take with these options and parameters
    // (warm-up included), before max_time cuts it shorter.
    int64_t step_bound() const;
    // Rank 0's notes so far (also given to AutotuneOptions::log).
    std::vector<std::string> notes() const;
    // {"job", "search", "rank", "step", "frozen", "values", "best":
    // {"values", "throughput"}, "measured" (points scored), "history"
    // (rank 0: [{"step", "values", "median"}]), "state_file", "notes"}.
    std::string report() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
