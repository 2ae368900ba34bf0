// Starting a world of this launcher's workers: join every local worker
// place, wait for the round that admits them, agree on MASTER_ADDR and
// MASTER_PORT through the coordinator's store, start the processes. The
// first start does this; under --restart all, so does every restart of the
// group, after stopping the workers of the old world, whether a local
// worker failed or the job's state shows the world broken elsewhere.
#include "launcher.hpp"
#include "master_address.hpp"
#include "signals.hpp"

#include <cohort/error.hpp>
#include <cohort/node.hpp>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <boost/json/object.hpp>

namespace cohort_run {
namespace {

namespace json = boost::json;
using cohort::Errc;
using cohort::Error;

void short_pause() {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace

// A round that needs other launchers may take a while, but not forever.
double Launcher::world_wait() const {
    return std::max(60.0, 3 * o_.last_call + 10);
}

// With one launcher and survivors, MASTER_PORT is fixed for the run; else
// it comes from the store, fresh for each generation. Pods always take it
// from the store: rank 0's address is its pod's IP (pod_master.cpp).
bool Launcher::master_from_store() const {
    return o_.restart == RestartMode::all || o_.nnodes_max > 1 || o_.scheduler == SchedulerKind::kubernetes;
}

Launcher::Beat Launcher::beat(Slot& slot, uint64_t generation, cohort::HeartbeatReply* reply, std::string* refusal) {
    try {
        cohort::HeartbeatReply r = beats_->heartbeat(o_.job, slot.worker, generation);
        ++slot.beats_sent;
        if (reply != nullptr) *reply = std::move(r);
        return Beat::answered;
    } catch (const Error& e) {
        // The coordinator's answers for an id it no longer counts: failed,
        // left or stale (mismatch; also a generation not the member's own,
        // which with generation 0 cannot be), timed out, or never joined
        // (not_found). Anything else (no answer, a 5xx): ask again later.
        const bool gone = e.code() == Errc::mismatch || e.code() == Errc::not_found || e.code() == Errc::timeout;
        if (gone && refusal != nullptr) *refusal = e.what();
        return gone ? Beat::gone : Beat::unanswered;
    }
}

void Launcher::join_slots() {
    for (Slot& s : slots_) {
        cohort::MemberDescriptor d;
        d.id = s.worker;
        d.host = host_of(s);
        // A role the coordinator knows is the member's descriptor role too,
        // as Membership gives it (an evaluator shows as one).
        if (const auto known = cohort::parse_role(o_.role); known && *known != cohort::Role::worker)
            d.role = std::string(cohort::to_string(*known));
        client_->join(o_.job, d);
        s.rank.reset();
        s.world_size.reset();
        s.node_rank.reset();
        s.generation = 0;
        s.beat_for = true;
    }
}

// Heartbeats for the joined places (generation 0 asks for the rank) until
// each is active in one generation after `after`, or `deadline` passes.
// moved_on when the coordinator stopped counting a place (the caller joins
// them all again): a place failed while it waited (no heartbeat within the
// failure timeout: this launcher stopped, or a coordinator restart that
// outlasted the client's back-off) is never admitted to any round, and
// waiting on would only run out the deadline (chaos soak, finding 6). So,
// under --restart all, when a round took some places and closed without
// the others (a round with no live member of the old world left closes at
// once, between two of this launcher's joins): this launcher starts all
// its workers or none, so that world could never train, and the places
// left waiting would wait until it broke. (With survivors the workers
// start anyway once the wait is over, and follow the rounds themselves.)
Launcher::Round Launcher::await_round(uint64_t after, double deadline) {
    double next_beat = 0;
    const auto rejoin = [&](const std::string& worker, const std::string& reason, const std::string& text) {
        json::object f;
        f["worker"] = worker;
        f["reason"] = reason;
        log_.emit("rejoining", std::move(f), text + "; joining every worker of this launcher again");
        return Round::moved_on;
    };
    while (log_.now() < deadline) {
        if (const int sig = signals::take()) throw signals::Stop{sig};
        if (log_.now() >= next_beat) {
            const Slot* left_out = nullptr;  // waiting while the job is at `left_out_in`
            uint64_t left_out_in = 0;
            for (Slot& s : slots_) {
                cohort::HeartbeatReply r;
                std::string refusal;
                const Beat b = beat(s, 0, &r, &refusal);
                if (b == Beat::gone) {
                    return rejoin(s.worker, refusal,
                                  fmt::format("worker {} is no longer in the job's waiting room ({})", s.worker,
                                              refusal));
                }
                if (b != Beat::answered) continue;
                if (r.rank && r.generation > after) {
                    s.rank = r.rank;
                    s.world_size = r.world_size;
                    s.generation = r.generation;
                } else if (!r.rank && !s.rank && o_.restart == RestartMode::all) {
                    left_out = &s;
                    left_out_in = r.generation;
                }
            }
            for (const Slot& s : slots_) {
                if (left_out == nullptr || !s.rank || s.generation != left_out_in) continue;
                const std::string reason =
                    fmt::format("round {} admitted worker {} but closed without worker {}", s.generation, s.worker,
                                left_out->worker);
                return rejoin(left_out->worker, reason, reason);
            }
            next_beat = log_.now() + std::min(0.25, o_.heartbeat_interval / 2);
        }
        if (std::all_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.world_size.has_value(); })) break;
        short_pause();
    }
    bool formed = true;
    std::vector<std::string> members;
    for (Slot& s : slots_) {
        if (!s.rank) {
            formed = false;
            continue;
        }
        cohort::MemberWorld w;
        try {
            w = client_->world(o_.job, s.worker, members.empty());
        } catch (const Error& e) {
            if (e.code() == Errc::mismatch) return Round::moved_on;  // a newer round formed without it
            throw;
        }
        if (!w.active || w.generation != slots_.front().generation) return Round::moved_on;
        s.rank = w.rank;
        s.world_size = w.world_size;
        s.node_rank = w.node_rank;
        s.generation = w.generation;
        if (members.empty()) {
            members.resize(w.world_size);
            std::set<std::string> hosts;  // GROUP_WORLD_SIZE: the hosts of the world, as GROUP_RANK counts them
            for (const cohort::WorldPeer& p : w.peers) {
                if (p.rank < members.size()) members[p.rank] = p.id;
                hosts.insert(p.host);
            }
            group_world_size_ = static_cast<uint32_t>(hosts.size());
        }
    }
    if (!formed) return Round::not_formed;
    world_.generation = slots_.front().generation;
    world_.members = std::move(members);
    world_.local.clear();
    for (const Slot& s : slots_) world_.local.insert(s.worker);
    world_.max_workers = std::max(o_.min_workers, o_.nnodes_max * o_.nproc_per_node);
    return Round::formed;
}

// Rank 0's launcher publishes; every launcher, that one too, reads the
// address back, heartbeating for its places meanwhile. nullopt when the
// generation is over before that (join again).
std::optional<MasterAddress> Launcher::agree_master(double deadline) {
    const uint64_t generation = world_.generation;
    const auto rank0 = std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.rank == 0u; });
    if (rank0 != slots_.end()) {
        // Under Slurm rank 0 runs on its node, by name (the port is free here, not checked there).
        std::optional<MasterAddress> mine;
        if (pods() != nullptr) {
            mine = start_rank0_pod(*rank0, generation, deadline);
            if (!mine) return std::nullopt;
        } else {
            mine = MasterAddress{rank0->node.empty() ? advertised_ : rank0->node, free_port()};
        }
        try {
            publish_master(*client_, o_.job, generation, *mine);
        } catch (const Error& e) {
            if (e.code() == Errc::mismatch) return std::nullopt;
            throw;
        }
    }
    double next_beat = 0;
    while (log_.now() < deadline) {
        if (const int sig = signals::take()) throw signals::Stop{sig};
        if (log_.now() >= next_beat) {
            for (Slot& s : slots_) {
                // Stale (a newer world formed), or a round open: rank 0 of
                // this generation may be dead and will never publish (a
                // host lost with its launcher), so join the round instead.
                cohort::HeartbeatReply r;
                const Beat b = beat(s, generation, &r);
                if (b == Beat::unanswered) continue;  // the coordinator away for a moment: ask again
                if (b == Beat::gone || r.rendezvous || r.generation != generation) return std::nullopt;
            }
            next_beat = log_.now() + std::min(0.25, o_.heartbeat_interval / 2);
        }
        try {
            if (std::optional<MasterAddress> m = read_master(*client_, o_.job, generation)) return m;
        } catch (const Error& e) {
            if (e.code() == Errc::mismatch) return std::nullopt;
            if (e.code() == Errc::parse) throw;
            // The coordinator away for a moment: ask again.
        }
        short_pause();
    }
    throw Error(Errc::timeout,
                fmt::format("job '{}' generation {}: no launcher published rank 0's address (store key '{}') within "
                            "{:g} s. The cohort-run whose worker has rank 0 publishes it: is it still running, and "
                            "were all launchers of the job started with the same flags (--nnodes, --restart)?",
                            o_.job, generation, kMasterKey, world_wait()));
}

void Launcher::start_world(double not_before, const std::vector<std::string>& retired) {
    const uint64_t before = world_.generation;
    const double deadline = log_.now() + world_wait();
    master_.reset();
    // An old worker that already joined the round (it saw its peer die,
    // reported it and asked for a round before this launcher stopped it)
    // would fill the new world with the first new id, which could then
    // never form with all of this launcher's: fail those first.
    if (!retired.empty()) {
        try {
            const JobView job = parse_job(client_->job_state(o_.job), log_.now());
            for (const std::string& id : retired) {
                const auto it = job.members.find(id);
                if (it != job.members.end() && it->second.state == "waiting") {
                    report_failed(id, "stopped for a restart of the group (--restart all)");
                }
            }
        } catch (const Error&) {
            // The job's state unread: the reports below still go out.
        }
    }
    for (int attempt = 0;; ++attempt) {
        join_slots();
        // Only now, with the new ids waiting: a world with no live member
        // left closes at once, on whichever id came first. Reported failed,
        // the old ids give back their shard leases, and the other
        // launchers see the world break.
        for (const std::string& id : attempt == 0 ? retired : std::vector<std::string>{}) {
            report_failed(id, "stopped for a restart of the group (--restart all)");
        }
        const Round round = await_round(before, deadline);
        const bool formed = round == Round::formed;
        if (round == Round::not_formed && o_.restart == RestartMode::all) {
            throw Error(Errc::timeout,
                        fmt::format("job '{}': no round admitted this launcher's {} workers within {:g} s (the job "
                                    "waits for --min-workers {}; are the other launchers running?)",
                                    o_.job, slots_.size(), world_wait(), o_.min_workers));
        }
        if (round == Round::not_formed || (formed && !master_from_store())) break;  // survivors: it joins by itself
        if (formed) master_ = agree_master(deadline);
        if (master_) break;
        if (log_.now() >= deadline) {
            throw Error(Errc::timeout, fmt::format("job '{}': the world kept changing for {:g} s while this launcher "
                                                   "started its workers",
                                                   o_.job, world_wait()));
        }
    }
    if (master_) {
        json::object f;
        f["generation"] = world_.generation;
        f["master_addr"] = master_->addr;
        f["master_port"] = master_->port;
        const bool here = std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.rank == 0u; });
        f["published"] = here;
        log_.emit("master", std::move(f),
                  fmt::format("generation {}: MASTER_ADDR={} MASTER_PORT={} ({})", world_.generation, master_->addr,
                              master_->port, here ? "rank 0 is here; published" : "from rank 0's launcher"));
    }
    while (log_.now() < not_before) {  // --relaunch-delay, heartbeating so that the places stay in the world
        if (const int sig = signals::take()) throw signals::Stop{sig};
        for (Slot& s : slots_) beat(s, world_.generation, nullptr);
        std::this_thread::sleep_for(std::chrono::milliseconds(
            static_cast<int64_t>(1000 * std::min({0.25, o_.heartbeat_interval / 2, not_before - log_.now()}))));
    }
    for (Slot& s : slots_) {
        // Rank 0's pod started already, to learn its IP (pod_master.cpp).
        if (pods() != nullptr && s.running && s.rank == 0u) continue;
        launch_slot(s);
    }
}

void Launcher::launch_slot(Slot& s) {
    if (slurm_ != nullptr) move_off_lost_node(s);
    const cohort::WorkerSpec spec = spec_for(s, true);
    json::object f;
    f["worker"] = s.worker;
    f["local_rank"] = s.local_rank;
    std::string where;
    if (local_ != nullptr || slurm_ != nullptr) {
        if (slurm_ != nullptr) {
            slurm_->launch(spec, s.node);
        } else {
            local_->launch(spec);
        }
        const int64_t pid = worker_pid(s.worker);
        f["pid"] = pid;
        where = fmt::format("on {} (pid {}", host_of(s), pid);
    } else {
        auto& pods = dynamic_cast<cohort::KubernetesScheduler&>(*scheduler_);
        pods.launch(spec);
        f["pod"] = pods.pod_name(s.worker);
        where = "(pod " + pods.pod_name(s.worker);
    }
    f["host"] = host_of(s);
    f["restart"] = s.restarts;
    if (s.rank) f["rank"] = *s.rank;
    if (s.world_size) f["world_size"] = *s.world_size;
    if (s.rank) f["generation"] = s.generation;
    log_.emit("worker_started", std::move(f),
              s.rank ? fmt::format("worker {} started {}, rank {} of {})", s.worker, where, *s.rank, *s.world_size)
                     : fmt::format("worker {} started {}; its round has not closed yet)", s.worker, where));
}

void Launcher::restart_world(const std::string& why, double delay) {
    const double not_before = log_.now() + delay;
    ++group_restarts_;
    ++relaunches_;
    json::object f;
    f["restart"] = group_restarts_;
    f["reason"] = why;
    log_.emit("restarting", std::move(f),
              fmt::format("restarting every worker (TORCHELASTIC_RESTART_COUNT {}): {}", group_restarts_, why));
    // The old world's processes, stopped ones and those that died by
    // themselves alike, are done with: none of their exits is news now.
    scheduler_->stop_all(std::chrono::milliseconds(static_cast<int64_t>(o_.grace * 1000)));
    scheduler_->poll();
    deferred_.clear();
    // Each process of the new world joins under a new id (NODE-R.K): one
    // that rejoined under its old id would keep the shard leases the
    // stopped process held, and nothing would ever give them back.
    std::vector<std::string> retired;
    for (Slot& s : slots_) {
        retired.push_back(s.worker);
        s.worker = fmt::format("{}.{}", s.place, group_restarts_);
        s.running = false;
        s.finished = false;
        s.restarts = group_restarts_;
        s.ended = "stopped for a group restart";
    }
    start_world(not_before, retired);
}

void Launcher::check_world(const JobView& job) {
    if (o_.restart != RestartMode::all || finished() || !gave_up_.empty()) return;
    const std::optional<WorldChange> change = world_change(job, world_);
    if (!change) return;
    json::object f;
    f["generation"] = world_.generation;
    f["member"] = change->member;
    f["failure"] = change->failure;
    f["reason"] = change->why;
    log_.emit("world_changed", std::move(f), "the workers' world changed elsewhere: " + change->why);
    if (!change->failure) {
        // The job grew: torchrun restarts for that too, without charging it.
        restart_world(change->why, 0);
        return;
    }
    cohort::ScalingEvent event;
    event.kind = cohort::EventKind::failed;
    event.node = change->member.empty() ? world_.members.front() : change->member;
    event.detail = change->why;
    act(event, o_.relaunch_delay);
}

// --restart all past its budget: the job cannot go on as one world here.
// The workers are stopped and reported failed, so that the other
// launchers see it too.
void Launcher::give_up(const std::string& why) {
    gave_up_ = "gave up: " + why;
    failed_for_good_ = true;
    log_.say(fmt::format("{}; stopping every worker", gave_up_));
    scheduler_->stop_all(std::chrono::milliseconds(static_cast<int64_t>(o_.grace * 1000)));
    scheduler_->poll();
    deferred_.clear();
    for (Slot& s : slots_) {
        if (s.running || s.beat_for) report_failed(s.worker, gave_up_);
        if (s.running) s.ended = "stopped: " + gave_up_;
        s.running = false;
        s.beat_for = false;
        s.removed = true;
    }
}

}  // namespace cohort_run
