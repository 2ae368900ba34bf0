// The elastic loop (elastic_loop.hpp): worlds, steps, state sync, leases.
#include "elastic_loop.hpp"

#include "checkpoint.hpp"
#include "report.hpp"
#include "train_state.hpp"

#include <cohort/error.hpp>
#include <cohort/membership.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace cohort_train {

namespace {

using Clock = std::chrono::steady_clock;
using cohort::Errc;
using cohort::Error;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

std::optional<uint64_t> env_uint(const char* name) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || *text == '-') {
        throw Error(Errc::invalid_argument, fmt::format("${}: expected a non-negative integer, got '{}'", name, text));
    }
    return value;
}

// An error's first clause, short enough for a line among the others'.
std::string brief(std::string_view error) {
    std::string text(error.substr(0, error.find("; ")));
    if (text.size() > 160) text = text.substr(0, 157) + "...";
    return text;
}

// Workers that disagree on the data or the model cannot train together.
uint64_t fingerprint(const ModelConfig& c) {
    uint64_t h = 0;
    auto add = [&](uint64_t v) { h = mix64(h ^ v) + 0x9E3779B97F4A7C15ULL; };
    add(c.data.seed);
    add(c.data.features);
    add(c.data.rows_per_shard);
    add(c.data.shards);
    add(c.epochs);
    add(std::bit_cast<uint64_t>(c.lr));
    add(std::bit_cast<uint64_t>(c.data.noise));
    return h >> 12;  // exact as a double too
}

std::string plan_json(const ModelConfig& c) {
    std::string shards;
    const uint64_t bytes = uint64_t{c.data.rows_per_shard} * (c.data.features + 1) * sizeof(double);
    for (uint32_t i = 0; i < c.data.shards; ++i) {
        if (i > 0) shards += ", ";
        shards += fmt::format("{{\"id\": \"shard-{:05}\", \"bytes\": {}}}", i, bytes);
    }
    return fmt::format("{{\"shards\": [{}], \"epochs\": {}}}", shards, c.epochs);
}

struct Lease {
    uint64_t id = 0;
    uint64_t shard = 0;
    uint32_t epoch = 0;
};

// After a step: go on, meet in the next world, or stop: the job's shards
// are all done, without this world (a worker that came too late).
enum class After { next_step, new_world, job_done };

// Blocks for good: a hung worker, as --stall-at-step and --skip-collective
// make one. The heartbeat thread goes on; SIGTERM still ends the process.
[[noreturn]] void hang() {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

class ElasticTrainer {
public:
    ElasticTrainer(const Options& options, cohort::Membership& membership)
        : o_(options),
          m_(membership),
          prefix_(fmt::format("[{}] ", membership.member())),
          state_(options.model),
          truth_(make_truth(options.model.data)) {
        const uint64_t restarts = env_uint("COHORT_RESTART_COUNT").value_or(0);
        faults_armed_ = restarts == 0;
        if (auto lr = env_uint("LOCAL_RANK")) local_rank_ = static_cast<uint32_t>(*lr);
    }

    int run() {
        prepare_job();
        open_checkpoint();
        for (;;) {
            if (!comm_ && !enter_world()) continue;
            if (state_.finished()) {
                if (auto status = finish()) return *status;
                leave_world();
                continue;
            }
            const After next = step();
            if (next == After::new_world) leave_world();
            if (next == After::job_done) {
                say("the job's shards are all done without this world (at epoch {}); nothing to train",
                    state_.epoch() + 1);
                leave_world();
                m_.leave();
                return 0;
            }
        }
    }

private:
    template <typename... A>
    void say(fmt::format_string<A...> format, A&&... args) {
        fmt::print("{}{}\n", prefix_, fmt::format(format, std::forward<A>(args)...));
        std::fflush(stdout);
    }

    bool rank0() const { return world_.rank == 0; }

    // The fault this worker injects, if one targets it.
    const Fault* fault(const std::optional<Fault>& f) const {
        if (!faults_armed_ || !f || !local_rank_ || *local_rank_ != f->local_rank) return nullptr;
        return &*f;
    }

    void prepare_job() {
        cohort::CoordinatorClient& client = m_.client();
        if (o_.min_nodes > 0) {
            cohort::JobSettings settings;
            settings.min_nodes = o_.min_nodes;
            settings.max_nodes = o_.max_nodes;
            try {
                client.job_state(m_.job());
            } catch (const Error& e) {
                if (e.code() != Errc::not_found) throw;
                client.create_job(m_.job(), settings);
                say("created job '{}' ({}..{} nodes)", m_.job(), o_.min_nodes, o_.max_nodes);
            }
        }
        if (!o_.register_plan) return;
        try {
            client.register_dataset(m_.job(), plan_json(o_.model));
        } catch (const Error& e) {
            if (e.code() == Errc::mismatch) {
                throw Error(Errc::mismatch, fmt::format("job '{}' has another dataset plan than {} shards x {} "
                                                        "epochs (run every worker with the same --shards and "
                                                        "--epochs): {}",
                                                        m_.job(), o_.model.data.shards, o_.model.epochs, e.what()));
            }
            if (e.code() == Errc::not_found) {
                throw Error(Errc::not_found, fmt::format("job '{}' does not exist on {}: create it first, or pass "
                                                         "--nodes MIN[:MAX]: {}",
                                                         m_.job(), m_.client().url(), e.what()));
            }
            throw;
        }
    }

    // Reads this worker's checkpoint, if it has one for this job instance.
    void open_checkpoint() {
        const std::filesystem::path file = checkpoint_file(o_.checkpoint, m_.member());
        if (file.empty()) return;
        CheckpointOwner owner{m_.job(), job_created_at(), fingerprint(o_.model)};
        checkpoint_.emplace(file, std::move(owner));
        std::string note;
        if (auto values = checkpoint_->load(state_.serialized_size(), note)) {
            state_.deserialize(*values);
            say("resumed from checkpoint {}: epoch {}, step {}, {}/{} shards in", file.string(), state_.epoch() + 1,
                state_.applied_steps(), state_.included_count(), o_.model.data.shards);
        } else if (!note.empty()) {
            say("{}", note);
        }
    }

    // The job's creation time: with the name, what tells this job from an
    // earlier one of the same name whose checkpoints are still on disk.
    double job_created_at() {
        const std::string text = m_.client().job_state(m_.job());
        boost::system::error_code ec;
        const boost::json::value v = boost::json::parse(text, ec);
        const boost::json::value* at = ec || !v.is_object() ? nullptr : v.as_object().if_contains("created_at");
        if (at == nullptr || !at->is_number()) {
            throw Error(Errc::parse, fmt::format("job '{}' on {}: the job's state has no created_at number",
                                                 m_.job(), m_.client().url()));
        }
        return at->to_number<double>();
    }

    void save_checkpoint() {
        if (!checkpoint_) return;
        try {
            checkpoint_->save(state_.serialize());
            checkpoint_failing_ = false;
        } catch (const Error& e) {
            if (!checkpoint_failing_) say("{} (training goes on; a restart would begin again)", e.what());
            checkpoint_failing_ = true;
        }
    }

    // Joins the next world, connects and syncs the state; false (after a
    // pause) when the world broke on the way: the caller tries the next one.
    bool enter_world() {
        if (!world_.active) {
            world_ = m_.next_world(o_.world_timeout);
        } else {
            const uint64_t broken = world_.generation;
            do {
                await_new_round();
                world_ = m_.next_world(o_.world_timeout);
            } while (world_.generation == broken);
        }
        if (!local_rank_) local_rank_ = world_.local_rank;
        say("world {}: rank {} of {}", world_.generation, world_.rank, world_.world_size);
        try {
            comm_.emplace(m_.communicator());
            sync_state();
        } catch (const Error& e) {
            if (e.code() == Errc::invalid_argument) throw;  // flags differ: no world will do better
            say("world {}: {}; next round", world_.generation, brief(e.what()));
            leave_world();
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            return false;
        }
        // Reported after the next step: only leases whose shard the synced
        // state includes; the others are trained again (the state that won
        // may be behind the one this rank had).
        std::vector<Lease> keep;
        for (const Lease& l : pending_) {
            if (l.epoch > state_.epoch() || (l.epoch == state_.epoch() && !state_.included(l.shard)))
                held_.push_front(l);
            else
                keep.push_back(l);
        }
        pending_ = std::move(keep);
        everyone_idle_ = true;
        return true;
    }

    // A world that broke may not be over for the coordinator yet (a killed
    // peer counts as alive until its failure timeout; a hung one forever):
    // ask for a new round rather than meet in the broken world again.
    void await_new_round() {
        const auto deadline = Clock::now() + o_.world_timeout;
        auto ask_at = Clock::now();
        while (!m_.round_pending()) {
            if (Clock::now() >= ask_at) {
                try {
                    m_.request_round();
                } catch (const Error&) {
                    // No longer a member: the next heartbeat says so.
                }
                ask_at = Clock::now() + std::chrono::seconds(2);
            }
            if (Clock::now() > deadline) {
                throw Error(Errc::timeout, fmt::format("world {} broke and no new round opened within {} s",
                                                       world_.generation, o_.world_timeout.count() / 1000));
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }

    // A peer whose connection closed without a goodbye died (with its host,
    // maybe, and its launcher): nobody else tells the coordinator, which
    // would wait last_call for it in the next round. The survivors say so.
    void report_dead() {
        if (!o_.report_dead || !comm_ || comm_->dead_ranks().empty()) return;
        try {
            const std::vector<std::string> ids = m_.report_dead(*comm_);
            if (!ids.empty()) say("world {}: reported dead: {}", world_.generation, fmt::join(ids, ", "));
        } catch (const Error& e) {
            say("world {}: could not report the dead peers: {}", world_.generation, brief(e.what()));
        }
    }

    void leave_world() {
        if (comm_) comm_->close();
        comm_.reset();
    }

    // Runs one collective (or a few under one sequence number), telling the
    // membership for hang diagnosis; false when it failed.
    template <typename F>
    bool collective(F&& run, std::string& error) {
        const uint64_t seq = ++seq_;
        if (const Fault* f = fault(o_.faults.skip_collective); f && seq == static_cast<uint64_t>(f->value)) {
            m_.set_collective(seq - 1, false);
            say("fault: never entering collective {} (--skip-collective)", seq);
            hang();
        }
        m_.set_collective(seq, true);
        try {
            run();
        } catch (const Error& e) {
            m_.set_collective(seq, false);
            error = brief(e.what());
            report_dead();
            return false;
        }
        m_.set_collective(seq, false);
        return true;
    }

    // The rank that applied the most steps (the lowest such) gives every
    // rank its state; a new worker starts with nothing and gets it here.
    void sync_state() {
        const int size = comm_->size();
        const uint64_t mine[3] = {state_.applied_steps(), seq_ + 1, fingerprint(o_.model)};
        std::vector<uint64_t> all(3 * static_cast<std::size_t>(size));
        std::string error;
        if (!collective([&] { comm_->allgather(mine, all.data(), sizeof mine); }, error))
            throw Error(Errc::peer_failed, fmt::format("state sync failed: {}", error));
        uint64_t best = 0, seq = 0;
        int root = 0;
        for (int r = 0; r < size; ++r) {
            if (all[3 * r + 2] != mine[2]) {
                throw Error(Errc::invalid_argument,
                            fmt::format("state sync: rank {} runs with other model or data flags than rank {} "
                                        "(--seed, --features, --rows-per-shard, --shards, --epochs, --lr, "
                                        "--noise must match)",
                                        r, world_.rank));
            }
            if (all[3 * r] > best) best = all[3 * r], root = r;
            seq = std::max(seq, all[3 * r + 1]);
        }
        seq_ = seq;  // from here on every rank numbers collectives alike
        std::vector<double> data = state_.serialize();
        if (!collective([&] { comm_->broadcast(data.data(), data.size() * sizeof(double), root); }, error))
            throw Error(Errc::peer_failed, fmt::format("state sync failed: {}", error));
        state_.deserialize(data);
        save_checkpoint();
        say("state from rank {}: epoch {}, step {}, {}/{} shards in", root, state_.epoch() + 1, state_.applied_steps(),
            state_.included_count(), o_.model.data.shards);
    }

    // Sorts a lease: to train now, to keep for a later epoch, or (its shard
    // is in the state already) to report after the next step.
    std::optional<Lease> sort(const Lease& l, bool fresh) {
        if (l.epoch < state_.epoch() || (l.epoch == state_.epoch() && state_.included(l.shard))) {
            if (fresh)
                say("shard {} of epoch {}: in the state already (its holder died); reported", l.shard, l.epoch + 1);
            pending_.push_back(l);
            return std::nullopt;
        }
        if (l.epoch > state_.epoch()) {
            held_.push_back(l);
            return std::nullopt;
        }
        return l;
    }

    // The lease to train this step, if any; time spent asking in `wait`.
    std::optional<Lease> pick_lease(double& wait, bool& want_round, bool& job_done) {
        std::deque<Lease> held;
        held.swap(held_);
        std::optional<Lease> pick;
        for (const Lease& l : held) {
            if (pick)
                held_.push_back(l);
            else
                pick = sort(l, false);
        }
        if (pick) return pick;
        // With a lease of a later epoch in hand, ask for more only while
        // nobody trains: else one rank could lease a whole epoch ahead.
        if (!held_.empty() && !everyone_idle_) return std::nullopt;
        const auto start = Clock::now();
        cohort::ShardLease got;
        try {
            got = m_.next_shard();
        } catch (const Error& e) {
            wait = seconds_since(start);
            if (e.code() == Errc::not_found && !warned_no_plan_) {
                warned_no_plan_ = true;
                say("no shards yet: {}", brief(e.what()));
            } else if (e.code() != Errc::not_found) {
                say("next_shard: {}", brief(e.what()));
                want_round = true;  // most likely no longer in the running world
            }
            return std::nullopt;
        }
        wait = seconds_since(start);
        if (!got.granted) {
            job_done = got.finished;
            return std::nullopt;
        }
        if (got.shard >= o_.model.data.shards) {
            throw Error(Errc::mismatch, fmt::format("the job leased shard {} ('{}') but --shards is {}: the job's "
                                                    "dataset plan is not this program's",
                                                    got.shard, got.shard_id, o_.model.data.shards));
        }
        return sort(Lease{got.lease, got.shard, got.epoch}, true);
    }

    void report_pending() {
        for (const Lease& l : pending_) {
            try {
                m_.shard_done(l.id);
            } catch (const Error& e) {
                say("shard_done(lease {}, shard {}): {}", l.id, l.shard, brief(e.what()));
            }
        }
        pending_.clear();
    }

    After step() {
        const auto start = Clock::now();
        if (const Fault* f = fault(o_.faults.stall_at_step); f && state_.applied_steps() + 1 >= f->value) {
            say("fault: stalling before step {} (--stall-at-step)", state_.applied_steps() + 1);
            hang();
        }
        bool want_round = m_.round_pending();
        double data_wait = 0;
        bool job_done = false;
        const std::optional<Lease> lease = pick_lease(data_wait, want_round, job_done);

        const std::size_t d = o_.model.data.features;
        std::vector<double> sums(d + 5, 0.0);  // grad, loss_sum, rows, round wanted, job done
        int64_t shard = -1;
        if (lease) {
            auto delay = o_.step_delay;
            if (const Fault* f = fault(o_.faults.slow)) {
                if (!announced_slow_) say("fault: computing {}x slower (--slow)", f->value);
                announced_slow_ = true;
                delay = std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(delay.count()) * f->value));
            }
            std::this_thread::sleep_for(delay);
            const ShardGradient g = shard_gradient(state_.model(), make_shard(o_.model.data, truth_, lease->shard));
            std::copy(g.grad.begin(), g.grad.end(), sums.begin());
            sums[d + 1] = g.loss_sum;
            sums[d + 2] = g.rows;
            shard = static_cast<int64_t>(lease->shard);
        }
        sums[d + 3] = want_round ? 1 : 0;
        sums[d + 4] = job_done ? 1 : 0;

        std::vector<int64_t> shards(static_cast<std::size_t>(comm_->size()), -1);
        std::string error;
        const auto in_collective = Clock::now();
        const bool ok = collective(
            [&] {
                comm_->allreduce(std::span<double>(sums));
                comm_->allgather(&shard, shards.data(), sizeof shard);
            },
            error);
        const double collective_wait = seconds_since(in_collective);
        if (!ok) {
            if (lease) held_.push_front(*lease);
            say("step {}: collective failed, contribution dropped: {}", state_.applied_steps() + 1, error);
            return After::new_world;
        }

        // Two ranks with one shard (a lease that expired while held):
        // every rank drops the whole step; the lowest of them keeps it.
        bool twice = false;
        for (std::size_t r = 0; r < shards.size(); ++r) {
            for (std::size_t q = 0; q < r; ++q) twice = twice || (shards[r] >= 0 && shards[r] == shards[q]);
        }
        report_pending();  // every rank now has the state that includes them
        if (twice) {
            const auto me = static_cast<std::size_t>(world_.rank);
            bool lowest = true;
            for (std::size_t q = 0; q < me; ++q) lowest = lowest && shards[q] != shard;
            if (lease && lowest) held_.push_front(*lease);
            say("step {}: a shard came from two ranks; step dropped", state_.applied_steps() + 1);
        } else {
            const StepSum sum{std::span<const double>(sums.data(), d + 1), sums[d + 1], sums[d + 2]};
            const uint32_t epoch = state_.epoch();
            if (lease) pending_.push_back(*lease);
            if (state_.apply_step(sum, shards) && rank0()) {
                const EpochRecord& r = state_.history().back();
                say("epoch {}/{}: loss {:.6g} ({} shards, {} steps)", epoch + 1, o_.model.epochs, r.loss,
                    o_.model.data.shards, r.steps);
            }
        }
        everyone_idle_ = sums[d + 2] == 0;
        // Before the next collective, after which the shards of this step
        // are reported done (checkpoint.hpp says why).
        save_checkpoint();

        cohort::StepMetrics metrics;
        metrics.step = state_.applied_steps();
        metrics.step_time = seconds_since(start);
        metrics.samples_per_sec = lease ? static_cast<double>(o_.model.data.rows_per_shard) / metrics.step_time : 0;
        metrics.data_wait = data_wait;
        metrics.collective_wait = collective_wait;
        m_.record_step(metrics);

        if (everyone_idle_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (sums[d + 4] > 0 && !state_.finished()) return After::job_done;
        return sums[d + 3] > 0 ? After::new_world : After::next_step;
    }

    // Every epoch is in: reports what is left, and rank 0 prints the table
    // and checks. Empty when the world broke first.
    std::optional<int> finish() {
        std::string error;
        double one = 1;
        if (!collective([&] { comm_->allreduce(std::span<double>(&one, 1)); }, error)) {
            say("finishing: collective failed: {}", error);
            return std::nullopt;
        }
        report_pending();
        for (const Lease& l : held_) pending_.push_back(l);  // every epoch is in: nothing left to train
        held_.clear();
        report_pending();
        // Leave together: nobody closes while another still waits on it.
        collective([&] { comm_->barrier(); }, error);
        int status = 0;
        if (rank0()) {
            say("done: {} epochs, {} steps", state_.history().size(), state_.applied_steps());
            print_summary(prefix_, state_.history(), o_.model.data.shards);
            if (o_.check && !check_against_reference(prefix_, state_.model(), o_.model)) status = 3;
            if (!o_.weights_out.empty()) {
                std::vector<double> loss;
                for (const EpochRecord& r : state_.history()) loss.push_back(r.loss);
                write_weights(o_.weights_out, state_.model(), loss, o_.model);
            }
        }
        leave_world();
        m_.leave();
        return status;
    }

    const Options& o_;
    cohort::Membership& m_;
    std::string prefix_;
    TrainState state_;
    Truth truth_;
    std::optional<cohort::Communicator> comm_;
    cohort::MemberWorld world_;
    uint64_t seq_ = 0;            // the last collective's sequence number
    std::deque<Lease> held_;      // leased, not trained yet
    std::vector<Lease> pending_;  // in the state, to report after the next collective
    bool everyone_idle_ = true;   // the last step trained nothing anywhere
    bool faults_armed_ = false;
    std::optional<uint32_t> local_rank_;
    bool announced_slow_ = false;
    bool warned_no_plan_ = false;
    std::optional<Checkpoint> checkpoint_;
    bool checkpoint_failing_ = false;
};

}  // namespace

int run_elastic(const Options& options) {
    cohort::MembershipOptions mo = cohort::Membership::options_from_env();
    mo.comm.timeout = options.collective_timeout;
    cohort::Membership membership(std::move(mo));
    ElasticTrainer trainer(options, membership);
    return trainer.run();
}

}  // namespace cohort_train
