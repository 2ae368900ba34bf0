// Membership: joining, the wait for a world, rejoining a new round, the
// communicator of a world, metrics, shards and leaving.
#include "membership/membership_impl.hpp"

#include <cohort/node.hpp>
#include <cohort/role_group.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include <fmt/format.h>

namespace cohort {

namespace json = boost::json;
using membership::Clock;
using membership::Phase;

namespace {

MembershipOptions checked(MembershipOptions o) {
    if (o.coordinator.empty()) {
        throw Error(Errc::invalid_argument, "Membership: no coordinator URL (expected http://HOST:PORT, a list of replicas "
                                                   "http://HOST:PORT,http://HOST:PORT, or etcd://HOST:PORT/PREFIX)");
    }
    // HOST:PORT alone (each entry of a list of replicas) means http://.
    o.coordinator = normalize_coordinator_url(o.coordinator);
    if (o.job.empty()) throw Error(Errc::invalid_argument, "Membership: no job name");
    // Each role is a world of its own: the coordinator job JOB.ROLE.
    if (!o.role.empty()) check_role_name(o.role, "Membership: role");
    o.job = role_job(o.job, o.role);
    o.role = role_name(o.role);
    if (const auto known = parse_role(o.role); known && o.node.role.empty() && o.role != "worker")
        o.node.role = std::string(to_string(*known));
    if (o.node.host.empty()) o.node.host = membership::machine_name();
    if (o.node.id.empty()) o.node.id = membership::default_member_id(o.node.host);
    if (o.heartbeat_interval.count() < 0) {
        throw Error(Errc::invalid_argument,
                    fmt::format("Membership: heartbeat_interval must not be negative (0: the job's), got {} ms",
                                o.heartbeat_interval.count()));
    }
    if (!o.token.empty()) o.client.token = o.token;
    return o;
}

CoordinatorClientOptions single_attempt(CoordinatorClientOptions o) {
    o.retry_deadline = std::chrono::milliseconds::zero();
    return o;
}

std::string duration_text(std::chrono::milliseconds d) {
    if (d.count() < 1000) return fmt::format("{} ms", d.count());
    return fmt::format("{:.1f} s", static_cast<double>(d.count()) / 1000.0);
}

}  // namespace

Membership::Impl::Impl(MembershipOptions o)
    : options(checked(std::move(o))),
      client(std::make_shared<CoordinatorClient>(options.coordinator, options.client)),
      heartbeats(options.coordinator, single_attempt(options.client)),
      metrics(options.max_batch) {}

Membership::Impl::~Impl() {
    stop_heartbeats();
}

std::chrono::milliseconds Membership::Impl::heartbeat_interval() {
    {
        std::lock_guard lock(mutex);
        if (interval.count() > 0) return interval;
    }
    std::chrono::milliseconds found = options.heartbeat_interval;
    // The coordinator's defaults, for a job whose settings leave them out.
    std::chrono::milliseconds failure_timeout = std::chrono::seconds(5);
    const auto from_seconds = [](std::optional<double> seconds, std::chrono::milliseconds& out) {
        if (!seconds) return;
        const double ms = *seconds * 1000.0;
        if (std::isfinite(ms) && ms >= 1.0 && ms < 1e12) out = std::chrono::milliseconds(static_cast<int64_t>(ms));
    };
    if (found.count() == 0) {
        found = std::chrono::seconds(1);
        // The settings alone: the job's state grows with its members.
        const auto settings = client->job_settings(options.job);
        from_seconds(settings.heartbeat_interval, found);
        from_seconds(settings.failure_timeout, failure_timeout);
    } else {
        // The interval is the program's; the failure timeout is still the
        // job's. Unreadable now, the default fences no later than it would.
        try {
            from_seconds(client->job_settings(options.job).failure_timeout, failure_timeout);
        } catch (const Error&) {
        }
    }
    // A heartbeat that waits out the whole request timeout (10 s by
    // default) behind a dead link would keep the member from fencing itself
    // until long after the coordinator failed it: half the failure timeout
    // is ample for an answer that takes milliseconds. The thread that uses
    // this client starts only after the first call here.
    CoordinatorClientOptions beat = single_attempt(options.client);
    beat.request_timeout =
        std::min(beat.request_timeout, std::max(failure_timeout / 2, std::chrono::milliseconds(250)));
    CoordinatorClient beats(options.coordinator, beat);
    std::lock_guard lock(mutex);
    if (interval.count() > 0) return interval;  // another caller was first
    interval = found;
    fence_after = failure_timeout;
    heartbeats = std::move(beats);
    return interval;
}

void Membership::Impl::enter(Phase next, MemberWorld next_world) {
    phase = next;
    world = std::move(next_world);
    round_pending = false;
    ++epoch;
    first_step_pending = phase == Phase::active;
    last_answered = Clock::now();
}

void Membership::Impl::join() {
    {
        std::lock_guard lock(mutex);
        enter(Phase::waiting, MemberWorld{});
        left = false;
    }
    client->join(options.job, options.node);
}

Membership::Membership(MembershipOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Membership::Membership(Membership&&) noexcept = default;
Membership& Membership::operator=(Membership&&) noexcept = default;
Membership::~Membership() = default;

namespace {

Membership::Impl& checked_impl(const std::unique_ptr<Membership::Impl>& impl) {
    if (!impl) throw Error(Errc::invalid_argument, "Membership: used after it was moved from");
    return *impl;
}

}  // namespace

const std::string& Membership::member() const {
    return checked_impl(impl_).options.node.id;
}

const std::string& Membership::job() const {
    return checked_impl(impl_).options.job;
}

const std::string& Membership::role() const {
    return checked_impl(impl_).options.role;
}

CoordinatorClient& Membership::client() {
    return *checked_impl(impl_).client;
}

MemberWorld Membership::next_world(std::chrono::milliseconds timeout) {
    Impl& m = checked_impl(impl_);
    const auto start = Clock::now();
    // A year is longer than anyone means to wait, and keeps the deadline from overflowing.
    const auto deadline = start + std::clamp(timeout, std::chrono::milliseconds::zero(),
                                             std::chrono::milliseconds(int64_t(365) * 24 * 3600 * 1000));
    const auto interval = m.heartbeat_interval();
    // The world is read more often than the heartbeat is sent, so that a
    // closing round is seen soon, but not so often that thousands of
    // waiting members load the coordinator.
    const auto poll = std::clamp(interval / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(250));

    bool must_join = false;
    {
        std::lock_guard lock(m.mutex);
        if (m.phase == Phase::active && !m.round_pending) return m.world;
        // A launcher that joined for the program ($COHORT_GENERATION) is
        // taken at its word; the world read below tells whether it still holds.
        must_join = m.phase == Phase::active || (m.phase == Phase::idle && m.options.joined_generation == 0);
        m.start_heartbeats();
    }
    if (must_join) m.join();

    for (;;) {
        MemberWorld w;
        bool gone = false;
        try {
            // The communicator meets its peers through the store: the peer
            // list (one entry per member) is not needed.
            w = m.client->world(m.options.job, m.options.node.id, false);
        } catch (const Error& e) {
            // Failed, stale, left, timed out or forgotten (a coordinator
            // restarted without its data): join again. Anything else, and a
            // join that fails, is the caller's to see.
            if (e.code() != Errc::mismatch && e.code() != Errc::not_found && e.code() != Errc::timeout) throw;
            gone = true;
        }
        if (gone) {
            m.join();
        } else {
            std::lock_guard lock(m.mutex);
            if (w.active) {
                m.enter(Phase::active, w);
                return w;
            }
            if (m.phase == Phase::idle) m.enter(Phase::waiting, MemberWorld{});
        }
        if (Clock::now() + poll > deadline) {
            std::string last_error;
            {
                std::lock_guard lock(m.mutex);
                last_error = m.last_heartbeat_error;
            }
            throw Error(
                Errc::timeout,
                fmt::format("coordinator {}: job '{}': member '{}' has no world after {}; the round has not "
                            "closed (too few nodes? see GET /v1/jobs/{}){}",
                            m.options.coordinator, m.options.job, m.options.node.id, duration_text(timeout),
                            m.options.job, last_error.empty() ? "" : "; the last heartbeat failed: " + last_error));
        }
        std::this_thread::sleep_for(poll);
    }
}

MemberWorld Membership::world() const {
    const Impl& m = checked_impl(impl_);
    std::lock_guard lock(m.mutex);
    return m.world;
}

Communicator Membership::communicator() const {
    Impl& m = checked_impl(impl_);
    const MemberWorld w = world();
    if (!w.active) {
        throw Error(Errc::invalid_argument,
                    fmt::format("Membership::communicator: member '{}' of job '{}' has no world yet; call "
                                "next_world() first",
                                m.options.node.id, m.options.job));
    }
    CommOptions o = m.options.comm;
    o.rank = static_cast<int>(w.rank);
    o.size = static_cast<int>(w.world_size);
    o.store = coordinator_store(m.client, m.options.job, w.generation);
    o.store_url.clear();
    o.job_id = m.options.job;
    o.generation = w.generation;
    // Ranks on one host, as the coordinator counts them (local ranks), are
    // the ranks the hierarchical all-reduce groups.
    if (o.host_label.empty()) o.host_label = m.options.node.host;
    Communicator comm(o);
    {
        std::lock_guard lock(m.mutex);
        if (m.world.generation == w.generation) {
            m.comm_abort = comm.abort_handle();
            m.comm_generation = w.generation;
        }
    }
    return comm;
}

bool Membership::round_pending() const {
    const Impl& m = checked_impl(impl_);
    std::lock_guard lock(m.mutex);
    return m.round_pending;
}

bool Membership::request_round() {
    Impl& m = checked_impl(impl_);
    uint64_t asked_in = 0;
    {
        std::lock_guard lock(m.mutex);
        if (m.round_pending) return true;
        asked_in = m.epoch;
    }
    bool open = false;
    try {
        open = m.client->request_round(m.options.job, m.options.node.id).round_open;
    } catch (const Error& e) {
        // No longer a member (failed, stale): it must join again anyway.
        open = e.code() == Errc::mismatch || e.code() == Errc::not_found || e.code() == Errc::timeout;
        if (!open) throw;
    }
    std::lock_guard lock(m.mutex);
    if (open && m.epoch == asked_in) m.mark_round_pending();
    return m.round_pending;
}

std::vector<std::string> Membership::report_dead(const Communicator& comm) {
    Impl& m = checked_impl(impl_);
    const std::vector<int> dead = comm.dead_ranks();
    MemberWorld mine;
    {
        std::lock_guard lock(m.mutex);
        mine = m.world;
    }
    std::vector<std::string> reported;
    // A communicator of another world (or none yet) maps its ranks to
    // nobody this member can vouch for.
    if (!dead.empty() && mine.active && comm.size() == static_cast<int>(mine.world_size) &&
        comm.rank() == static_cast<int>(mine.rank)) {
        try {
            // The peer list of the world as it is now: if a round has
            // closed since, the generation differs and the ranks name
            // other members, so nothing is reported.
            const MemberWorld now = m.client->world(m.options.job, m.options.node.id, true);
            if (now.active && now.generation == mine.generation) {
                for (const int rank : dead) {
                    const auto peer = std::find_if(now.peers.begin(), now.peers.end(), [&](const WorldPeer& p) {
                        return static_cast<int>(p.rank) == rank;
                    });
                    if (peer == now.peers.end()) continue;
                    const ReportReply reply = m.client->report_dead(
                        m.options.job, m.options.node.id, mine.generation, peer->id,
                        fmt::format("its connection to rank {} closed without a goodbye (it exited or died)",
                                    mine.rank));
                    if (reply.outcome == "failed" || reply.outcome == "already_gone") reported.push_back(peer->id);
                }
            }
        } catch (const Error& e) {
            // This member is no longer in that world (failed, stale, a new
            // round formed): its word about the world counts for nothing,
            // and the round below sends it to join again.
            if (e.code() != Errc::mismatch && e.code() != Errc::not_found && e.code() != Errc::timeout) throw;
        }
    }
    request_round();
    return reported;
}

void Membership::record_step(const StepMetrics& step) {
    Impl& m = checked_impl(impl_);
    for (const double v : {step.step_time, step.samples_per_sec, step.data_wait, step.collective_wait}) {
        if (!std::isfinite(v)) {
            throw Error(Errc::invalid_argument,
                        fmt::format("Membership::record_step: step {}: a metric is {} (a negative value means "
                                    "not measured)",
                                    step.step, v));
        }
    }
    std::lock_guard lock(m.mutex);
    StepMetrics recorded = step;
    // What a reader measured fills a data wait the program left unset (0)
    // or unmeasured (negative); one the program measured itself wins.
    if (recorded.data_wait <= 0 && m.pending_data_wait > 0) recorded.data_wait = m.pending_data_wait;
    m.pending_data_wait = 0;
    m.metrics.record(recorded, Clock::now());
    if (m.first_step_pending) {
        // The first step in a new world goes out at once: it tells the
        // coordinator (and a launcher watching) that training resumed.
        m.first_step_pending = false;
        m.report_now = true;
        m.wake.notify_all();
    }
}

void Membership::add_data_wait(double seconds) {
    Impl& m = checked_impl(impl_);
    if (!std::isfinite(seconds) || seconds < 0) {
        throw Error(Errc::invalid_argument,
                    fmt::format("Membership::add_data_wait: seconds must be finite and at least 0, got {}", seconds));
    }
    std::lock_guard lock(m.mutex);
    m.pending_data_wait += seconds;
}

void Membership::set_collective(uint64_t sequence, bool inside) {
    Impl& m = checked_impl(impl_);
    std::lock_guard lock(m.mutex);
    if (inside && (!m.metrics.in_collective() || !m.metrics.reports_collectives() || sequence != m.last_sequence))
        m.collective_since = membership::Clock::now();
    m.last_sequence = sequence;
    m.metrics.set_collective(sequence, inside);
}

void Membership::set_gpu_json(std::string text) {
    Impl& m = checked_impl(impl_);
    if (!text.empty()) {
        // Checked here: a heartbeat thread has nobody to tell.
        boost::system::error_code ec;
        json::parse(text, ec);
        if (ec) {
            throw Error(Errc::invalid_argument,
                        fmt::format("Membership::set_gpu_json: not JSON ({}): {}", ec.message(), text.substr(0, 80)));
        }
    }
    std::lock_guard lock(m.mutex);
    m.metrics.set_gpu_json(std::move(text));
}

ShardLease Membership::next_shard() {
    Impl& m = checked_impl(impl_);
    return m.client->next_shard(m.options.job, m.options.node.id);
}

ShardDone Membership::shard_done(uint64_t lease) {
    Impl& m = checked_impl(impl_);
    return m.client->shard_done(m.options.job, m.options.node.id, lease);
}

ShardRelease Membership::shard_release(uint64_t lease) {
    Impl& m = checked_impl(impl_);
    return m.client->shard_release(m.options.job, m.options.node.id, lease);
}

void Membership::leave() {
    Impl& m = checked_impl(impl_);
    m.stop_heartbeats();
    {
        std::lock_guard lock(m.mutex);
        // Never joined (by itself or by a launcher): nothing to say goodbye to.
        if (m.left || (m.phase == Phase::idle && m.options.joined_generation == 0)) return;
    }
    try {
        m.client->leave(m.options.job, m.options.node.id);
    } catch (const Error& e) {
        // A job or member the coordinator does not know has nothing to leave.
        if (e.code() != Errc::not_found) throw;
    }
    std::lock_guard lock(m.mutex);
    m.left = true;
    m.options.joined_generation = 0;  // a later next_world() joins afresh
    m.enter(Phase::idle, MemberWorld{});
}

}  // namespace cohort
