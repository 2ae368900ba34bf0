// The heartbeat thread: tells the coordinator every interval that the member
// lives, with the metrics recorded since, and turns its answers into
// round_pending(). A heartbeat that fails (a coordinator restarting, a
// network blip) is simply sent again at the next interval: the coordinator
// does not count the time it was down as anyone's silence.
#include "membership/membership_impl.hpp"

#include <algorithm>
#include <exception>

#include <fmt/format.h>
#include <optional>

namespace cohort {

using membership::Clock;
using membership::Phase;

namespace {

// The coordinator no longer counts the member in its world: 409 for a
// member failed, stale or left (or a wrong generation), 404 for one it does
// not know, 408 for one that timed out waiting. It must join again.
bool member_gone(Errc code) {
    return code == Errc::mismatch || code == Errc::not_found || code == Errc::timeout;
}

// Whether a heartbeat answer says the member's world is being replaced.
bool world_replaced(const HeartbeatReply& reply, const MemberWorld& world) {
    return reply.rendezvous || reply.state != "active" || reply.generation != world.generation ||
           (reply.rank && *reply.rank != world.rank) || (reply.world_size && *reply.world_size != world.world_size);
}

}  // namespace

void Membership::Impl::start_heartbeats() {
    if (thread.joinable()) return;
    stopping = false;
    thread = std::thread([this] { heartbeat_loop(); });
}

void Membership::Impl::stop_heartbeats() {
    std::thread t;
    {
        std::lock_guard lock(mutex);
        stopping = true;
        t = std::move(thread);
    }
    wake.notify_all();
    if (t.joinable()) t.join();
}

void Membership::Impl::heartbeat_loop() {
    std::unique_lock lock(mutex);
    auto next = Clock::now() + interval;
    for (;;) {
        wake.wait_until(lock, next, [this] { return stopping || report_now; });
        if (stopping) return;
        report_now = false;
        const bool again = beat(lock);
        next = Clock::now() + (again ? std::chrono::milliseconds::zero() : interval);
    }
}

bool Membership::Impl::beat(std::unique_lock<std::mutex>& lock) {
    if (phase == Phase::idle) return false;
    const uint64_t sent_epoch = epoch;
    const Phase sent_phase = phase;
    const uint64_t generation = phase == Phase::active ? world.generation : 0;
    const bool basic = basic_metrics;
    const std::optional<HeartbeatMetrics> report = metrics.take(Clock::now(), basic);

    // The coordinator saw this heartbeat no earlier than now: silence
    // counted from here never fences a member the coordinator still counts.
    const auto sent_at = Clock::now();
    lock.unlock();
    std::optional<HeartbeatReply> reply;
    Errc code = Errc::internal;
    std::string error;
    try {
        reply = heartbeats.heartbeat(options.job, options.node.id, generation, report);
    } catch (const Error& e) {
        code = e.code();
        error = e.what();
    } catch (const std::exception& e) {
        error = e.what();
    }
    lock.lock();

    const bool current = epoch == sent_epoch && phase == sent_phase;
    if (reply) {
        metrics.delivered();
        last_heartbeat_error.clear();
        if (current) last_answered = std::max(last_answered, sent_at);
        if (current && phase == Phase::active && world_replaced(*reply, world)) mark_round_pending();
        abort_stale_collective();
        return false;
    }
    last_heartbeat_error = error;
    if (code == Errc::invalid_argument && report) {
        if (!basic) {
            // A coordinator older than the batched metrics: say it again at
            // once with the fields it knows, and from now on only those.
            basic_metrics = true;
            metrics.returned();
            return true;
        }
        metrics.delivered();  // refused for good: sending it again would not help
        return false;
    }
    // While waiting, a 409 only means the round closed a moment ago (the
    // member is active now and must send its new generation): next_world()
    // reads the world and deals with a member that is really gone.
    if (current && phase == Phase::active && member_gone(code)) {
        // Steps of a world that is over: sent later they would read as
        // progress of the next one.
        metrics.delivered();
        mark_round_pending();
    } else if (current && phase == Phase::active && fence_after.count() > 0 &&
               Clock::now() - last_answered >= fence_after) {
        metrics.delivered();  // steps of a world this member is no longer part of
        fence(error);
    } else {
        metrics.returned();
    }
    abort_stale_collective();
    return false;
}

void Membership::Impl::mark_round_pending() {
    if (round_pending) return;
    round_pending = true;
    round_pending_at = Clock::now();
}

void Membership::Impl::fence(const std::string& error) {
    const bool first = !round_pending;
    mark_round_pending();
    if (!first || !comm_abort || comm_generation != world.generation) return;
    // At once, not after the stuck-for-an-interval wait of a stale round:
    // the peers across the partition are gone for this world, and a
    // collective that still completes (all of them on this side) would
    // train in a world the coordinator has already replaced.
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_answered);
    comm_abort.abort(
        fmt::format("fenced: no heartbeat of member '{}' reached the coordinator for {:.1f} s "
                    "(job '{}', failure_timeout {:.1f} s), so it counts the member as failed and world "
                    "{} goes on without it; the member joins again once the coordinator answers{}",
                    options.node.id, silent.count() / 1000.0, options.job, fence_after.count() / 1000.0,
                    world.generation, error.empty() ? "" : "; the last heartbeat failed: " + error));
    comm_abort = {};
}

void Membership::Impl::abort_stale_collective() {
    if (!options.abort_stale_collectives || !round_pending || !comm_abort || phase != Phase::active ||
        comm_generation != world.generation)
        return;
    const auto now = Clock::now();
    const bool stuck = metrics.reports_collectives() ? metrics.in_collective() && now - collective_since >= interval
                                                     : now - round_pending_at >= interval;
    if (!stuck) return;
    comm_abort.abort(
        fmt::format("world {} of job '{}' is over: the coordinator opened a new round while this rank "
                    "waited in a collective (a peer stopped or died)",
                    world.generation, options.job));
    comm_abort = {};  // once
}

}  // namespace cohort
