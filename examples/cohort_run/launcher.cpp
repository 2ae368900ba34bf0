#include "launcher.hpp"

#include "signals.hpp"

#include <cohort/error.hpp>
#include <cohort/role_group.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <unistd.h>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

namespace cohort_run {
namespace {

namespace json = boost::json;
using cohort::Errc;
using cohort::Error;

std::string host_name() {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
    return name;
}

std::string list(const std::vector<std::string>& ids, std::size_t most = 8) {
    std::string out;
    for (std::size_t i = 0; i < ids.size() && i < most; ++i) out += (i == 0 ? "" : ", ") + ids[i];
    if (ids.size() > most) out += fmt::format(", and {} more", ids.size() - most);
    return out;
}

json::array to_array(const std::vector<std::string>& items) {
    json::array a;
    for (const auto& s : items) a.emplace_back(s);
    return a;
}

void sleep_ms(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// The role on each line and event, where there is one to tell apart.
std::string role_label(const Options& o) {
    return o.role_group_child || !cohort::is_default_role(o.role) ? cohort::role_name(o.role) : std::string();
}

}  // namespace

Launcher::Launcher(Options options)
    : o_(std::move(options)),
      log_(o_.events_file, o_.quiet, role_label(o_), o_.role_group_child ? EventsFile::role : EventsFile::own),
      status_(STDOUT_FILENO, !o_.quiet && !o_.role_group_child) {
    // A role other than the default is a job of its own (role_group.hpp);
    // the workers get the job's name and their role, and map it the same.
    base_job_ = o_.job;
    o_.job = cohort::role_job(o_.job, o_.role);
    if (o_.node_id.empty()) o_.node_id = host_name();
    if (o_.scheduler == SchedulerKind::slurm) {
        make_slurm_slots();
        return;
    }
    for (int r = 0; r < o_.nproc_per_node; ++r) {
        Slot slot;
        slot.local_rank = r;
        slot.place = place_name(o_.node_id, o_.role, r);
        slot.worker = slot.place;
        slots_.push_back(std::move(slot));
    }
}

Launcher::~Launcher() {
    if (own_checkpoint_dir_) {
        std::error_code ignored;
        std::filesystem::remove_all(checkpoint_dir_, ignored);
    }
}

// Workers that keep their state on disk (cohort-train) go on from it when
// a plan restarts them; this run's directory, so no other job's files.
void Launcher::make_checkpoint_dir() {
    if (!o_.checkpoint_dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(o_.checkpoint_dir, ec);
        if (ec) {
            throw Error(Errc::io,
                        fmt::format("--checkpoint-dir: cannot create '{}': {}", o_.checkpoint_dir, ec.message()));
        }
        checkpoint_dir_ = o_.checkpoint_dir;
        make_node_checkpoint_dirs();
        return;
    }
    const char* tmp = std::getenv("TMPDIR");
    // Under Slurm the workers run on other nodes: the job's working
    // directory is the one a cluster shares, /tmp is each node's own.
    const std::string base = slurm_options_                   ? std::filesystem::current_path().string()
                             : tmp != nullptr && *tmp != '\0' ? tmp
                                                              : "/tmp";
    std::string pattern = fmt::format("{}/cohort-run-XXXXXX", base);
    if (::mkdtemp(pattern.data()) == nullptr) {
        throw Error(Errc::io, fmt::format("cannot create a checkpoint directory '{}': {} (set TMPDIR, or give "
                                          "--checkpoint-dir)",
                                          pattern, std::strerror(errno)));
    }
    checkpoint_dir_ = pattern;
    own_checkpoint_dir_ = true;
    make_node_checkpoint_dirs();
}

// --scheduler slurm: one directory per node, as spec_for gives them out.
void Launcher::make_node_checkpoint_dirs() {
    if (!slurm_options_) return;
    for (const std::string& node : slurm_options_->nodes) {
        std::error_code ec;
        std::filesystem::create_directories(std::filesystem::path(checkpoint_dir_) / node, ec);
        if (ec) {
            throw Error(Errc::io, fmt::format("cannot create the checkpoint directory '{}/{}': {}", checkpoint_dir_,
                                              node, ec.message()));
        }
    }
}

void Launcher::connect() {
    if (o_.standalone) {
        cohort::CoordinatorOptions co;
        co.host = o_.host;
        co.port = o_.port;
        co.data_dir = o_.data_dir;
        co.tls_cert_file = o_.tls_cert;
        co.tls_key_file = o_.tls_key;
        co.tls_client_ca_file = o_.tls_client_ca;
        server_ = std::make_unique<cohort::Coordinator>(co);
        const char* scheme = o_.tls_cert.empty() ? "http" : "https";
        // The workers are on this machine: a wildcard address is reached
        // through loopback.
        const bool wildcard = o_.host == "0.0.0.0" || o_.host == "::" || o_.host == "[::]";
        url_ = wildcard ? fmt::format("{}://127.0.0.1:{}", scheme, server_->port()) : server_->url();
        // Under Slurm they are on other nodes: this node's address.
        if (slurm_options_ && wildcard) url_ = fmt::format("{}://{}:{}", scheme, slurm_url_host(), server_->port());
        advertised_ = advertised_address(o_.master_addr, o_.host);
    } else {
        // HOST:PORT, a list of the replicas, or etcd:// (the replicas'
        // leader found there): checked as the client takes it, and passed
        // on to the workers as it is.
        try {
            url_ = cohort::normalize_coordinator_url(o_.coordinator);
        } catch (const Error& e) {
            throw Error(Errc::invalid_argument, fmt::format("--coordinator: {}", e.what()));
        }
        // The address the others reach this node at is the one on the route
        // to the coordinator: to the first replica listed or, with etcd://,
        // to the first etcd endpoint (the replicas are where etcd is).
        std::string host = url_.substr(url_.find("://") + 3);
        host = host.substr(0, host.find_first_of(",/?"));
        host = host.substr(0, host.rfind(':'));
        if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
        advertised_ = advertised_address(o_.master_addr, host);
    }
    if (o_.nnodes_max == 1 && o_.restart == RestartMode::survivors) {
        try {
            master_port_ = free_port();
        } catch (const Error&) {
            // No MASTER_PORT then: the workers' own setup says what is missing.
        }
    }
    client_ = std::make_unique<cohort::CoordinatorClient>(url_);
    cohort::CoordinatorClientOptions once;
    once.retry_deadline = std::chrono::milliseconds(0);
    once.request_timeout = std::chrono::milliseconds(
        static_cast<int64_t>(1000 * std::clamp(o_.failure_timeout / 2, 0.25, 2.0)));
    beats_ = std::make_unique<cohort::CoordinatorClient>(url_, once);
    json::object f;
    f["url"] = url_;
    f["standalone"] = o_.standalone;
    log_.emit("coordinator", std::move(f),
              fmt::format("coordinator {} ({}), job '{}', node {} with {} workers", url_,
                          o_.standalone ? fmt::format("in this process, listening on {}", o_.host)
                                        : std::string("running elsewhere"),
                          o_.job, o_.node_id, o_.nproc_per_node));
}

void Launcher::create_job() {
    json::object s;
    s["min_nodes"] = o_.min_workers;
    s["max_nodes"] = std::max(o_.min_workers, o_.nnodes_max * o_.nproc_per_node);
    s["last_call"] = o_.last_call;
    s["heartbeat_interval"] = o_.heartbeat_interval;
    s["failure_timeout"] = o_.failure_timeout;
    json::object health;
    if (o_.straggler_threshold) health["straggler_threshold"] = *o_.straggler_threshold;
    if (o_.straggler_for) health["straggler_for"] = *o_.straggler_for;
    if (o_.hang_timeout) health["hang_timeout"] = *o_.hang_timeout;
    if (!health.empty()) s["health"] = std::move(health);
    try {
        client_->create_job_json(o_.job, json::serialize(s));
    } catch (const Error& e) {
        if (e.code() != Errc::mismatch) throw;
        throw Error(Errc::mismatch, fmt::format("job '{}' already exists on {} with other settings ({}); start "
                                                "every cohort-run of a job with the same flags, or use another --job",
                                                o_.job, url_, e.what()));
    }
}

cohort::WorkerSpec Launcher::spec_for(Slot& slot, bool joined) {
    cohort::WorkerSpec spec;
    spec.id = slot.worker;
    spec.argv = o_.program;
    auto& env = spec.env;
    env["COHORT_COORDINATOR"] = o_.worker_coordinator.empty() ? url_ : o_.worker_coordinator;
    env["COHORT_JOB"] = base_job_;
    env["COHORT_ROLE"] = cohort::role_name(o_.role);
    env["ROLE_NAME"] = cohort::role_name(o_.role);
    env["COHORT_MEMBER"] = slot.worker;
    env["COHORT_NODE_ID"] = host_of(slot);
    env["COHORT_HOST"] = host_of(slot);
    env["COHORT_RESTART_COUNT"] = std::to_string(slot.restarts);
    // Under Slurm, one directory per node: places on different nodes share LOCAL_RANKs.
    if (!checkpoint_dir_.empty())
        env["COHORT_CHECKPOINT_DIR"] = slot.node.empty() ? checkpoint_dir_ : checkpoint_dir_ + "/" + slot.node;
    env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(slot.restarts);
    env["LOCAL_RANK"] = std::to_string(slot.local_rank);
    env["LOCAL_WORLD_SIZE"] = std::to_string(o_.nproc_per_node);
    // torchrun's rendezvous: rank 0 listens on MASTER_PORT (torch's env://
    // TCPStore, cohort's communicator_from_env). A world started here has
    // its own from the store; a worker relaunched into the survivors' world
    // gets it only when every rank is on this machine and the port is fixed.
    if (joined && master_) {
        env["MASTER_ADDR"] = master_->addr;
        env["MASTER_PORT"] = std::to_string(master_->port);
    } else if (o_.nnodes_max == 1 && o_.restart == RestartMode::survivors && master_port_ != 0 && local_ != nullptr) {
        env["MASTER_ADDR"] = "127.0.0.1";
        env["MASTER_PORT"] = std::to_string(master_port_);
    }
    if (joined && slot.rank && slot.world_size) {
        env["COHORT_GENERATION"] = std::to_string(slot.generation);
        env["RANK"] = std::to_string(*slot.rank);
        env["WORLD_SIZE"] = std::to_string(*slot.world_size);
        // torchelastic's rank among the workers of the role: each role is
        // a world of its own here, so it is RANK.
        env["ROLE_RANK"] = env["RANK"];
        env["ROLE_WORLD_SIZE"] = env["WORLD_SIZE"];
        env["GROUP_RANK"] = std::to_string(slot.node_rank.value_or(0));
        if (group_world_size_ > 0) env["GROUP_WORLD_SIZE"] = std::to_string(group_world_size_);
    }
    slot.running = true;
    slot.finished = false;
    slot.removed = false;
    ++slot.starts;
    return spec;
}

Launcher::Slot* Launcher::slot_of(std::string_view worker) {
    for (Slot& s : slots_) {
        if (s.worker == worker) return &s;
    }
    return nullptr;
}

cohort::WorkerSpec Launcher::make_worker(const cohort::PlanStep& step) {
    Slot* slot = nullptr;
    if (step.kind == cohort::StepKind::relaunch) {
        slot = slot_of(step.node);
    } else {
        for (Slot& s : slots_) {
            if (s.removed && !s.running) {
                slot = &s;
                break;
            }
        }
    }
    if (slot == nullptr) throw Error(Errc::internal, fmt::format("no worker place for: {}", cohort::describe(step)));
    ++slot->restarts;
    if (slurm_ && !step.host.empty()) slot->node = step.host;  // where the scheduler places it
    if (step.kind != cohort::StepKind::relaunch) slot->worker = fmt::format("{}.{}", slot->place, slot->restarts);
    slot->beat_for = false;
    slot->rank.reset();
    ++relaunches_;
    cohort::WorkerSpec spec = spec_for(*slot, false);
    json::object f;
    f["worker"] = slot->worker;
    f["restart"] = slot->restarts;
    f["local_rank"] = slot->local_rank;
    log_.emit("relaunched", std::move(f),
              fmt::format("worker {} {} (local rank {}, restart {})", slot->worker,
                          step.kind == cohort::StepKind::relaunch ? "relaunched" : "started in its place",
                          slot->local_rank, slot->restarts));
    return spec;
}

const std::string& Launcher::host_of(const Slot& slot) const {
    return slot.node.empty() ? o_.node_id : slot.node;
}

int64_t Launcher::worker_pid(const std::string& worker) const {
    if (local_ != nullptr) return local_->pid(worker);
    return slurm_ != nullptr ? slurm_->pid(worker) : -1;  // a pod has no pid here
}

cohort::ClusterView Launcher::cluster() const {
    if (slurm_) return slurm_cluster();
    cohort::ClusterView view;
    int free = 0;
    for (const Slot& s : slots_) {
        if (s.running) view.nodes.push_back({s.worker, o_.node_id, {}});
        free += s.running ? 0 : 1;
    }
    // This launcher's node is the one host it can place workers on: a
    // blacklisted node gets no relaunches until its cooldown ends.
    view.hosts.push_back({o_.node_id, free});
    return view;
}

void Launcher::report_failed(const std::string& worker, const std::string& why) {
    try {
        client_->leave(o_.job, worker, why);
    } catch (const Error&) {
        // Not a member any more (or the coordinator is away): its silence
        // tells the coordinator the same after failure_timeout.
    }
}

void Launcher::act(const cohort::ScalingEvent& event, double delay) {
    cohort::ScalingPlan plan = scaler_->on_event(event, cluster(), log_.now());
    if (plan.steps.empty() && plan.warnings.empty()) return;
    // Free places for launches: the ones a remove in this plan frees, and
    // those already free.
    int free = 0;
    for (const Slot& s : slots_) free += (s.removed && !s.running) ? 1 : 0;
    std::vector<cohort::PlanStep> steps;
    for (cohort::PlanStep& step : plan.steps) {
        if (step.kind == cohort::StepKind::remove) {
            if (Slot* s = slot_of(step.node)) {
                if (s->running) report_failed(s->worker, "removed by the launcher: " + step.reason);
                s->removed = true;
                s->running = false;
                s->ended = "removed: " + step.reason;
                ++free;
            }
        } else if (step.kind == cohort::StepKind::restart_all) {
            // --restart all joins them again instead: a member marked failed
            // would let the round close on the first place to rejoin.
            for (Slot& s : slots_) {
                if (s.running && o_.restart == RestartMode::survivors) {
                    report_failed(s.worker, "restarted by the launcher: " + step.reason);
                }
            }
        } else if (step.kind == cohort::StepKind::relaunch) {
            if (Slot* s = slot_of(step.node); s != nullptr && s->running) {
                report_failed(s->worker, "relaunched by the launcher: " + step.reason);
            }
        } else if (step.kind == cohort::StepKind::launch) {
            if (free == 0) {
                plan.warnings.push_back("launch skipped: every local worker place is taken");
                continue;
            }
            --free;
        }
        steps.push_back(step);
    }
    plan.steps = std::move(steps);
    json::object f;
    f["text"] = cohort::describe(plan);
    json::array list_steps;
    for (const auto& step : plan.steps) {
        json::object st;
        st["kind"] = cohort::to_string(step.kind);
        st["node"] = step.node;
        st["reason"] = step.reason;
        list_steps.push_back(std::move(st));
    }
    f["steps"] = std::move(list_steps);
    f["warnings"] = to_array(plan.warnings);
    std::string text = cohort::describe(plan);
    std::replace(text.begin(), text.end(), '\n', ';');
    if (o_.restart == RestartMode::all) {
        // The scheduler's restart_all relaunches each worker alone; a torch
        // world needs every place joined, one round and a new MASTER_PORT.
        log_.emit("plan", std::move(f), "plan: " + text);
        const auto restart = std::find_if(plan.steps.begin(), plan.steps.end(), [](const cohort::PlanStep& st) {
            return st.kind == cohort::StepKind::restart_all;
        });
        if (restart != plan.steps.end()) {
            restart_world(restart->reason, delay);
        } else {
            give_up(plan.warnings.empty() ? "the policy did not restart the workers" : plan.warnings.front());
        }
        return;
    }
    if (delay > 0 && !plan.steps.empty()) {
        f["delay"] = delay;
        log_.emit("plan", std::move(f), fmt::format("plan (in {:g} s): {}", delay, text));
        deferred_.emplace_back(log_.now() + delay, std::move(plan));
        return;
    }
    log_.emit("plan", std::move(f), "plan: " + text);
    scheduler_->execute(plan);
}

void Launcher::run_due_plans() {
    const double now = log_.now();
    for (auto it = deferred_.begin(); it != deferred_.end();) {
        if (it->first > now) {
            ++it;
            continue;
        }
        const cohort::ScalingPlan plan = std::move(it->second);
        it = deferred_.erase(it);
        scheduler_->execute(plan);
    }
}

void Launcher::on_exits() {
    for (const cohort::WorkerExit& e : scheduler_->poll()) {
        Slot* slot = slot_of(e.id);
        if (slot == nullptr || e.stopped) continue;  // we stopped it: a plan step said why
        slot->running = false;
        if (e.succeeded()) {
            // A program that never heartbeats by itself (a torch script) is
            // said goodbye for, or its silence would read as a failure.
            if (slot->beat_for) {
                try {
                    client_->leave(o_.job, e.id);
                } catch (const Error&) {
                }
            }
            slot->beat_for = false;
            slot->finished = true;
            slot->ended = "finished (exit 0)";
            json::object f;
            f["worker"] = e.id;
            log_.emit("worker_exited", std::move(f), fmt::format("worker {} finished (exit 0)", e.id));
            continue;
        }
        ++failures_;
        slot->beat_for = false;
        slot->ended = e.message;
        json::object f;
        f["worker"] = e.id;
        f["detail"] = e.message;
        f["host"] = e.host.empty() ? host_of(*slot) : e.host;
        f["cause"] = cohort::to_string(e.cause);
        if (e.kind == cohort::ExitKind::exited) f["exit_code"] = e.exit_code;
        if (e.kind == cohort::ExitKind::signaled) f["signal"] = e.signal;
        log_.emit("worker_failed", std::move(f), fmt::format("worker {} failed: {}", e.id, e.message));
        report_failed(e.id, e.message);
        cohort::ScalingEvent event;
        event.kind = cohort::EventKind::failed;
        event.node = e.id;
        event.host = host_of(*slot);
        event.cause = e.cause;
        // The cause also leads the detail, for rules written against it
        // (the `cause` variable is the plainer way to tell causes apart).
        event.detail = e.cause == cohort::ExitCause::none
                           ? e.message
                           : fmt::format("{}: {}", cohort::to_string(e.cause), e.message);
        if (e.kind == cohort::ExitKind::exited) event.exit_code = e.exit_code;
        act(event, o_.relaunch_delay);
        // The rest of this batch are the old world's processes.
        if (o_.restart == RestartMode::all) return;
        const bool relaunching = std::any_of(deferred_.begin(), deferred_.end(), [&](const auto& d) {
            return std::any_of(d.second.steps.begin(), d.second.steps.end(), [&](const cohort::PlanStep& st) {
                return st.kind == cohort::StepKind::relaunch && st.node == e.id;
            });
        });
        if (!slot->running && !relaunching) {
            slot->removed = true;
            // A worker whose node is gone, with no room elsewhere, shrinks
            // the job (the policy's remove_worker_of_lost_node) without
            // failing it: the cluster, not the program, failed. So does a
            // pod the cluster had no room for: the job goes on without it
            // and may grow back on capacity.
            if (e.cause != cohort::ExitCause::node_lost && e.cause != cohort::ExitCause::pending_timeout) {
                failed_for_good_ = true;
            }
        }
    }
}

// Room for more workers (a Kubernetes pod that was Unschedulable got a
// node): the policy may grow the job back toward its maximum.
void Launcher::on_capacity() {
    for (cohort::ScalingEvent& event : scheduler_->capacity()) {
        json::object f;
        f["host"] = event.host;
        f["free_slots"] = event.free_slots.value_or(0);
        f["detail"] = event.detail;
        log_.emit("capacity", std::move(f), "capacity: " + event.detail);
        act(event);
    }
}

void Launcher::heartbeat_for_workers() {
    for (Slot& s : slots_) {
        if (!s.beat_for || !s.running) continue;
        // Refused: a new round, or the worker moved on: it is on its own (--restart all: check_world sees it).
        // Unanswered (the coordinator restarting): the next beat goes out in half an interval.
        if (beat(s, s.generation, nullptr) == Beat::gone && o_.restart == RestartMode::survivors) s.beat_for = false;
    }
}

// With survivors, a world changes without its running workers starting
// again, so rank 0's launcher never passes through start_world for it; a
// launcher (re)started into that world waits in agree_master for the
// generation's address. Rank 0's launcher publishes it here: the address
// its rank 0 already has (MASTER_PORT is fixed for the run with
// survivors), or a fresh one if its rank 0 is new.
void Launcher::republish_master(const JobView& job) {
    if (o_.restart != RestartMode::survivors || !master_from_store() || job.world.empty()) return;
    const auto here = std::find_if(slots_.begin(), slots_.end(),
                                   [&](const Slot& s) { return s.running && s.worker == job.world.front(); });
    if (here == slots_.end()) return;
    // A pod's address is its IP, learnt when it started: none to make up.
    if (pods() != nullptr && !master_) return;
    const MasterAddress address =
        master_ ? *master_ : MasterAddress{here->node.empty() ? advertised_ : here->node, free_port()};
    try {
        publish_master(*client_, o_.job, job.generation, address);
    } catch (const Error& e) {
        // mismatch: published already (by start_world, or a newer world
        // formed); anything else: the joining launcher's wait names it.
        if (e.code() != Errc::mismatch)
            log_.say(fmt::format("cannot publish rank 0's address for generation {}: {}", job.generation, e.what()));
    }
}

void Launcher::on_job(const JobView& job) {
    uint64_t top = 0;
    for (const auto& id : job.world) {
        if (const auto it = job.members.find(id); it != job.members.end() && it->second.step) {
            top = std::max(top, *it->second.step);
        }
    }
    if (job.generation != generation_ && job.generation > 0) {
        generation_ = job.generation;
        ++rounds_;
        // The steps before this round: every step seen up to this look. A
        // heartbeat reports a step up to an interval late, so a step made
        // before a kill often shows up in the look that sees the new round;
        // counting it here costs at most one look (100 ms) of a new world's
        // first step, which may be in this look too.
        uint64_t before = top;
        if (last_job_) {
            for (const auto& [id, m] : last_job_->members) before = std::max(before, m.step.value_or(0));
        }
        for (const auto& [id, m] : job.members) before = std::max(before, m.step.value_or(0));
        step_at_round_ = before;
        awaiting_training_ = true;
        job_hung_reported_ = false;
        json::object f;
        f["generation"] = job.generation;
        f["world_size"] = job.world_size;
        f["workers"] = to_array(job.world);
        log_.emit("round_formed", std::move(f),
                  fmt::format("round {} formed: {} workers ({})", job.generation, job.world_size, list(job.world)));
        republish_master(job);
    }
    if (awaiting_training_ && top > step_at_round_) {
        awaiting_training_ = false;
        json::object f;
        f["generation"] = job.generation;
        f["step"] = top;
        log_.emit("training", std::move(f), fmt::format("training in round {}: step {}", job.generation, top));
    }
    for (Slot& s : slots_) {
        const auto it = job.members.find(s.worker);
        if (it == job.members.end() || !s.running) continue;
        const MemberView& m = it->second;
        // Its own heartbeats arrive. (--restart all keeps beating: one a
        // client gave up on but the server counted must not stop it.)
        if (s.beat_for && m.heartbeats > s.beats_sent && o_.restart == RestartMode::survivors) s.beat_for = false;
        // Once per process: a relaunched worker keeps its id and may straggle again.
        if (m.straggler && acted_.insert(fmt::format("{}#straggler#{}", s.worker, s.starts)).second) {
            ++stragglers_;
            json::object f;
            f["worker"] = s.worker;
            f["score"] = m.straggler_score.value_or(0);
            f["for"] = m.slow_for;
            log_.emit("straggler", std::move(f),
                      fmt::format("worker {} is a straggler: score {:.2f} (its step rate against the job's median) "
                                  "for {:.0f} s",
                                  s.worker, m.straggler_score.value_or(0), m.slow_for));
            cohort::ScalingEvent event;
            event.kind = cohort::EventKind::straggler;
            event.node = s.worker;
            event.host = host_of(s);
            event.straggler_score = m.straggler_score;
            event.straggler_seconds = m.slow_for;
            act(event);
        }
        if (m.hung && acted_.insert(fmt::format("{}#hung#{}", s.worker, job.generation)).second) {
            ++hangs_;
            json::object f;
            f["worker"] = s.worker;
            f["cause"] = m.diagnosis ? m.diagnosis->cause : "unknown";
            f["summary"] = m.diagnosis ? m.diagnosis->summary : "";
            f["evidence"] = to_array(m.diagnosis ? m.diagnosis->evidence : std::vector<std::string>{});
            log_.emit(
                "hung", std::move(f),
                fmt::format("worker {} is hung: {} ({})", s.worker, m.diagnosis ? m.diagnosis->summary : "no diagnosis",
                            m.diagnosis ? m.diagnosis->cause : "unknown"));
        }
    }
    if (job.hung && !job_hung_reported_) {
        job_hung_reported_ = true;
        json::object f;
        f["cause"] = job.hang ? job.hang->cause : "unknown";
        f["summary"] = job.hang ? job.hang->summary : "";
        f["evidence"] = to_array(job.hang ? job.hang->evidence : std::vector<std::string>{});
        log_.emit("job_hung", std::move(f),
                  fmt::format("the job is hung: {} ({}); evidence: {}", job.hang ? job.hang->summary : "no diagnosis",
                              job.hang ? job.hang->cause : "unknown",
                              job.hang ? list(job.hang->evidence, 4) : std::string("none")));
        cohort::ScalingEvent event;
        event.kind = cohort::EventKind::job_hung;
        event.host = o_.node_id;
        event.detail = job.hang ? job.hang->summary : "";
        act(event);
    }
}

void Launcher::progress(const JobView& job) {
    uint64_t step = 0;
    double rate = 0;
    for (const auto& id : job.world) {
        if (const auto it = job.members.find(id); it != job.members.end()) {
            step = std::max(step, it->second.step.value_or(0));
            rate += it->second.samples_per_sec;
        }
    }
    json::object f;
    f["generation"] = job.generation;
    f["world_size"] = job.world_size;
    f["step"] = step;
    f["samples_per_sec"] = rate;
    std::string shards;
    if (!job.epochs.empty()) {
        const EpochView* e = &job.epochs.back();
        for (const EpochView& x : job.epochs) {
            if (x.done < x.total) {
                e = &x;
                break;
            }
        }
        f["epoch"] = e->epoch + 1;
        f["epochs"] = job.epochs.size();
        f["shards_done"] = e->done;
        f["shards_total"] = e->total;
        shards = fmt::format(", epoch {}/{}: {}/{} shards", e->epoch + 1, job.epochs.size(), e->done, e->total);
    }
    if (status_.on()) {
        log_.record("progress", std::move(f));  // the status row shows it
        return;
    }
    log_.emit("progress", std::move(f),
              fmt::format("progress: round {}, {} workers, step {}{}, {:.0f} samples/s", job.generation, job.world_size,
                          step, shards, rate));
}

void Launcher::show_status(const JobView& job) {
    StatusView v;
    v.phase = job.phase;
    v.generation = job.generation;
    v.world_size = job.world_size;
    uint64_t step = 0;
    for (const auto& id : job.world) {
        if (const auto it = job.members.find(id); it != job.members.end()) {
            step = std::max(step, it->second.step.value_or(0));
            v.samples_per_sec += it->second.samples_per_sec;
        }
    }
    v.steps_per_sec = step_rate_.update(log_.now(), step);
    if (!job.epochs.empty()) {
        const auto open =
            std::find_if(job.epochs.begin(), job.epochs.end(), [](const EpochView& e) { return e.done < e.total; });
        const EpochView& e = open == job.epochs.end() ? job.epochs.back() : *open;
        v.epoch = e.epoch + 1;
        v.epochs = static_cast<uint32_t>(job.epochs.size());
        v.shards_done = e.done;
        v.shards_total = e.total;
    }
    v.failures = failures_;
    v.elapsed = log_.now();
    status_.draw(v);
}

bool Launcher::finished() const {
    return std::none_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.running; });
}

void Launcher::summary() {
    try {
        last_job_ = parse_job(client_->job_state(o_.job), 0);
    } catch (const Error&) {
        // The summary makes do with the last look.
    }
    log_.say(fmt::format("summary: {} rounds, {} worker failures, {} relaunches, {} stragglers, {} hung workers",
                         rounds_, failures_, relaunches_, stragglers_, hangs_));
    log_.say(fmt::format("  {:<24} {:>6}  {}", "worker", "starts", "how it ended"));
    for (const Slot& s : slots_) {
        log_.say(fmt::format("  {:<24} {:>6}  {}", s.worker, s.starts, s.running ? "still running" : s.ended));
    }
    if (last_job_ && !last_job_->epochs.empty()) {
        log_.say(fmt::format("  {:<8} {:>14}", "epoch", "shards done"));
        for (const EpochView& e : last_job_->epochs) {
            log_.say(fmt::format("  {:<8} {:>6} of {:<6}{}", e.epoch + 1, e.done, e.total,
                                 e.done == e.total ? " (each once)" : ""));
        }
        if (last_job_->duplicate_reports > 0) {
            log_.say(fmt::format("  {} shard reports came after the shard was done and were not counted again",
                                 last_job_->duplicate_reports));
        }
    }
}

int Launcher::finish(int status, const std::string& reason) {
    status_.close();
    summary();
    json::object f;
    f["exit_code"] = status;
    f["reason"] = reason;
    log_.emit("done", std::move(f), fmt::format("done: {} (exit {})", reason, status));
    return status;
}

int Launcher::stop(int signal) {
    json::object f;
    f["signal"] = signal;
    log_.emit("signal", std::move(f),
              fmt::format("{}: stopping the workers ({} s before SIGKILL)", strsignal(signal), o_.grace));
    for (Slot& s : slots_) {
        if (!s.running) continue;
        try {
            client_->leave(o_.job, s.worker);
        } catch (const Error&) {
        }
    }
    scheduler_->signal_all(signal);
    const double until = log_.now() + o_.grace;
    while (!finished() && log_.now() < until) {
        if (signals::take() != 0) break;  // a second signal: no more grace
        for (const cohort::WorkerExit& e : scheduler_->poll()) {
            if (Slot* s = slot_of(e.id)) {
                s->running = false;
                s->ended = e.message;
            }
        }
        sleep_ms(20);
    }
    scheduler_->stop_all(std::chrono::milliseconds(0));
    for (const cohort::WorkerExit& e : scheduler_->poll()) {
        if (Slot* s = slot_of(e.id)) {
            s->running = false;
            s->ended = e.message;
        }
    }
    return finish(128 + signal, fmt::format("stopped by {}", strsignal(signal)));
}

// Watches the workers and the job until every worker is gone; returns the
// signal that stopped it, or 0.
int Launcher::supervise() {
    cohort::CoordinatorClientOptions quick;
    quick.retry_deadline = std::chrono::milliseconds(0);  // the loop asks again soon anyway
    quick.request_timeout = std::chrono::seconds(2);
    cohort::CoordinatorClient watcher(url_, quick);
    bool killed = false;
    double next_poll = 0, next_beat = 0, next_progress = o_.progress;
    std::string last_error;
    for (;;) {
        if (const int sig = signals::take()) return sig;
        const double now = log_.now();
        if (o_.kill_rank && !killed && now >= o_.kill_after) {
            killed = true;
            Slot& s = slots_[static_cast<std::size_t>(*o_.kill_rank)];
            const int64_t pid = worker_pid(s.worker);
            if (pid > 0 && ::kill(static_cast<pid_t>(pid), SIGKILL) == 0) {
                json::object f;
                f["worker"] = s.worker;
                f["signal"] = SIGKILL;
                log_.emit("worker_killed", std::move(f),
                          fmt::format("--kill-worker: sent SIGKILL to worker {} (pid {})", s.worker, pid));
            }
        }
        on_exits();
        on_capacity();
        run_due_plans();
        if (finished() && deferred_.empty()) return 0;
        if (now >= next_beat) {
            heartbeat_for_workers();
            next_beat = now + o_.heartbeat_interval / 2;
        }
        if (now >= next_poll) {
            std::optional<JobView> job;
            try {
                job = parse_job(watcher.job_state(o_.job), now);
                last_error.clear();
            } catch (const Error& e) {
                if (e.what() != last_error) {
                    last_error = e.what();
                    log_.say(fmt::format("cannot read the job's state (will keep asking): {}", e.what()));
                }
            }
            if (job) {
                on_job(*job);
                last_job_ = std::move(job);
                check_world(*last_job_);
                if (status_.on() && now >= next_status_) {
                    show_status(*last_job_);
                    next_status_ = now + 0.25;
                }
            }
            next_poll = log_.now() + 0.1;
        }
        if (o_.progress > 0 && now >= next_progress && last_job_) {
            progress(*last_job_);
            next_progress = now + o_.progress;
        }
        sleep_ms(20);
    }
}

int Launcher::run() {
    try {
        connect();
        create_job();
        make_checkpoint_dir();
        cohort::ScalingOptions so;
        so.min_nodes = o_.min_workers;
        so.max_nodes = std::max(o_.min_workers, o_.nnodes_max * o_.nproc_per_node);
        so.max_node_relaunches = o_.max_restarts;
        so.max_job_relaunches = o_.max_restarts;
        if (o_.restart == RestartMode::all) {
            // A group restart places nothing (no host to keep off) and brings
            // every worker back: the auto-scaler's count of the workers left
            // would warn of a world below min_nodes that never forms.
            so.blacklist.after_failures = 0;
            so.min_nodes = 0;
        }
        if (!o_.rules.empty()) {
            scaler_ = std::make_unique<cohort::AutoScaler>(so, std::filesystem::path(o_.rules));
        } else if (o_.restart == RestartMode::all) {
            scaler_ = std::make_unique<cohort::AutoScaler>(so, group_restart_rules());
        } else {
            scaler_ = std::make_unique<cohort::AutoScaler>(so);
        }
        if (slurm_options_) {
            make_slurm_scheduler();
        } else {
            scheduler_ = make_scheduler(o_, [this](const cohort::PlanStep& step) { return make_worker(step); });
            local_ = dynamic_cast<cohort::LocalScheduler*>(scheduler_.get());
        }
        // This launcher may be started again with the same --node-id (it
        // was SIGKILLed and its workers died with it, or its host
        // rebooted): the job may still count those workers' ids as live,
        // holding shard leases no process knows of, which would stall an
        // epoch until they expire. Reported failed, the leases go back to
        // the queue now. Ids the job does not know are refused (404), which
        // report_failed ignores.
        for (const Slot& s : slots_) report_failed(s.worker, "its launcher started again (" + o_.node_id + ")");
        start_world(0);
    } catch (const signals::Stop& s) {
        if (scheduler_) return stop(s.signal);
        return 128 + s.signal;
    }
    try {
        if (const int sig = supervise()) return stop(sig);
    } catch (const signals::Stop& s) {
        return stop(s.signal);
    } catch (const Error& e) {
        if (o_.restart == RestartMode::survivors) throw;
        give_up(e.what());  // a group restart that could not form its world
    }
    if (!gave_up_.empty()) return finish(1, gave_up_);
    const bool any_finished = std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.finished; });
    if (failed_for_good_ || !any_finished) {
        return finish(1, any_finished ? "the job finished, but a worker failed past its relaunch budget"
                                      : "every worker is gone and none finished");
    }
    return finish(0, "every worker finished");
}

}  // namespace cohort_run
