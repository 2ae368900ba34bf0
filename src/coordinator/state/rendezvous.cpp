// CoordinatorState's rendezvous commands: join, heartbeat, leave, request a
// round, a member's world; and settle(), which opens and closes rounds as
// the rules say after every change.
#include "coordinator/protocol/descriptor.hpp"
#include "coordinator/state/state.hpp"
#include "core/text.hpp"

#include <fmt/format.h>

namespace cohort::coord {

namespace {

const Member& member_of(const Job& job, std::string_view id) {
    if (const Member* m = job.find_member(id)) return *m;
    throw Error(Errc::not_found, fmt::format("job '{}' has no member {} (join first)", job.name(), detail::quote(id)));
}

// A member that is no longer part of the job: it must join again.
[[noreturn]] void gone(const Job& job, const Member& m) {
    const std::string& id = m.node.id;
    switch (m.state) {
        case MemberState::timed_out:
            throw Error(Errc::timeout, fmt::format("job '{}': node '{}' was not admitted within join_timeout ({} s); "
                                                   "join again",
                                                   job.name(), id, job.settings().join_timeout));
        case MemberState::failed:
            throw Error(Errc::mismatch, fmt::format("job '{}': node '{}' was declared failed ({}); join again",
                                                    job.name(), id, m.reason));
        case MemberState::left:
            throw Error(Errc::mismatch, fmt::format("job '{}': node '{}' left the job; join again", job.name(), id));
        case MemberState::stale:
            throw Error(Errc::mismatch,
                        fmt::format("job '{}': node '{}' was in generation {}, but generation {} formed "
                                    "without it; join again",
                                    job.name(), id, m.generation, job.generation()));
        case MemberState::waiting:
        case MemberState::active:
            break;
    }
    throw Error(Errc::internal, fmt::format("job '{}': node '{}' is {}", job.name(), id, to_string(m.state)));
}

JoinReply reply_for(const Job& job, const Member& m) {
    JoinReply reply{std::string(to_string(m.state)), job.generation(), std::nullopt};
    if (m.state == MemberState::active) reply.rank = m.rank;
    return reply;
}

}  // namespace

void CoordinatorState::settle(Job& j, double now) {
    if (j.settings().rejoin == RejoinPolicy::automatic && j.can_grow()) {
        emit(event::RoundOpened{j.name(), now,
                                fmt::format("{} node(s) waiting to join the world of {}", j.count(MemberState::waiting),
                                            j.count(MemberState::active))});
    }
    if (auto ranks = j.closing_round(now)) {
        emit(event::RoundClosed{j.name(), now, j.generation() + 1, std::move(*ranks)});
    }
}

std::size_t CoordinatorState::member_count() const {
    std::size_t n = 0;
    for (const auto& [name, job] : jobs_) n += job.members().size();
    return n;
}

JoinReply CoordinatorState::join(std::string_view job_name, Node node, double now) {
    const double t = time_of(now);
    Job& j = job_for(job_name);
    validate_descriptor(node, fmt::format("join job '{}'", job_name));
    const Member* existing = j.find_member(node.id);
    if (existing != nullptr && existing->state == MemberState::waiting && same_descriptor(existing->node, node)) {
        settle(j, t);
        return reply_for(j, *existing);
    }
    // A node that was in the current world keeps its place; any other counts
    // against the waiting room.
    const bool known =
        existing != nullptr && (existing->state == MemberState::waiting || existing->state == MemberState::active ||
                                (j.generation() > 0 && existing->generation == j.generation()));
    if (!known) {
        const uint32_t newcomers = j.newcomers_waiting();
        if (newcomers >= j.settings().largest_world()) {
            throw Error(
                Errc::unavailable,
                fmt::format("job '{}' is full: {} nodes already wait for a place (at most {}, the largest world); "
                            "try again later",
                            job_name, newcomers, j.settings().largest_world()));
        }
    }
    if (existing == nullptr && max_members_ > 0) {
        const std::size_t held = member_count();
        if (held >= max_members_) {
            throw Error(Errc::unavailable,
                        fmt::format("join job '{}': the coordinator holds {} members across its jobs, its cap "
                                    "(max_members, cohort-coordinator --max-members); delete finished jobs "
                                    "(DELETE /v1/jobs/NAME) or raise the cap",
                                    job_name, held));
        }
    }
    const bool restarted = existing != nullptr && existing->state == MemberState::active && !j.round_open();
    const std::string id = node.id;
    emit(event::MemberJoined{j.name(), t, std::move(node)});
    if (restarted) {
        emit(event::RoundOpened{j.name(), t,
                                fmt::format("node '{}' joined again while in generation {}", id, j.generation())});
    }
    settle(j, t);
    return reply_for(j, *j.find_member(id));
}

HeartbeatReply CoordinatorState::heartbeat(std::string_view job_name, std::string_view member, uint64_t generation,
                                           std::optional<HeartbeatMetrics> metrics, double now) {
    const double t = time_of(now);
    Job& j = job_for(job_name);
    const Member& m = member_of(j, member);
    if (!is_live(m.state) || m.state == MemberState::stale) gone(j, m);
    // Generation 0 is "I have not read my world yet": accepted from an
    // active member, whose answer then carries its rank; any other
    // generation must be the member's own.
    if (m.state == MemberState::active && generation != 0 && generation != m.generation) {
        throw Error(Errc::mismatch,
                    fmt::format("job '{}': heartbeat from node '{}' carries generation {}, but the node "
                                "is in generation {}",
                                j.name(), member, generation, m.generation));
    }
    if (m.state == MemberState::waiting && generation != 0 && generation != m.generation) {
        throw Error(
            Errc::mismatch,
            fmt::format("job '{}': heartbeat from node '{}' carries generation {}, but the node waits for a "
                        "round{}; send 0",
                        j.name(), member, generation,
                        m.generation > 0 ? fmt::format(" (its last world was generation {})", m.generation) : ""));
    }
    emit(event::Heartbeat{j.name(), t, std::string(member), std::move(metrics)});
    HeartbeatReply reply{
        j.generation(), std::string(to_string(m.state)), m.state == MemberState::active && j.round_open(), {}, {}};
    if (m.state == MemberState::active) {
        reply.rank = m.rank;
        reply.world_size = j.world().size();
    }
    return reply;
}

void CoordinatorState::leave(std::string_view job_name, std::string_view member, double now, std::string_view failure) {
    const double t = time_of(now);
    Job& j = job_for(job_name);
    const Member& m = member_of(j, member);
    if (!is_live(m.state)) return;
    const bool was_active = m.state == MemberState::active;
    if (failure.empty()) {
        emit(event::MemberRemoved{j.name(), t, std::string(member), MemberState::left, "left the job"});
    } else {
        emit(event::MemberRemoved{j.name(), t, std::string(member), MemberState::failed, std::string(failure)});
    }
    if (was_active && !j.round_open()) {
        emit(event::RoundOpened{j.name(), t,
                                failure.empty() ? fmt::format("node '{}' left", member)
                                                : fmt::format("node '{}' failed: {}", member, failure)});
    }
    settle(j, t);
}

ReportReply CoordinatorState::report_dead(std::string_view job_name, std::string_view reporter, uint64_t generation,
                                          std::string_view dead, std::string_view why, double now) {
    const double t = time_of(now);
    Job& j = job_for(job_name);
    const std::string where = fmt::format("job '{}': node '{}' reports node '{}' dead in generation {}", j.name(),
                                          reporter, dead, generation);
    if (reporter == dead) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: a member cannot report itself (a member that stops says leave)", where));
    }
    const Member& r = member_of(j, reporter);
    const Member& d = member_of(j, dead);
    if (generation > j.generation() || generation == 0) {
        throw Error(Errc::mismatch,
                    fmt::format("{}: the job has no generation {} (it is at {})", where, generation, j.generation()));
    }
    // A late report about a world already replaced changes nothing: its
    // members are failed, stale or in the new world by now.
    if (generation < j.generation()) return {std::string(dead), "ignored"};
    // Active in that world, or a survivor of it already back in the round
    // that replaces it.
    if ((r.state != MemberState::active && !j.is_survivor(r)) || r.generation != generation) {
        throw Error(Errc::mismatch,
                    fmt::format("{}: the reporter is {} (generation {}), not an active member of generation {}; "
                                "only a member of that world may report one of its peers",
                                where, to_string(r.state), r.generation, generation));
    }
    if (d.generation != generation) {
        throw Error(Errc::mismatch, fmt::format("{}: node '{}' is not in generation {} (it is {}, generation {})",
                                                where, dead, generation, to_string(d.state), d.generation));
    }
    // Waiting: it joined again since (a restarted process), so whatever
    // died is not what is there now.
    if (d.state == MemberState::waiting) return {std::string(dead), "rejoined"};
    if (d.state != MemberState::active) return {std::string(dead), "already_gone"};
    const std::string reason = fmt::format("reported dead by node '{}' (generation {}){}{}", reporter, generation,
                                           why.empty() ? "" : ": ", why);
    emit(event::MemberRemoved{j.name(), t, std::string(dead), MemberState::failed, reason});
    if (!j.round_open()) {
        emit(event::RoundOpened{j.name(), t, fmt::format("node '{}' failed: {}", dead, reason)});
    }
    settle(j, t);
    return {std::string(dead), "failed"};
}

void CoordinatorState::request_round(std::string_view job_name, std::string_view member, double now) {
    const double t = time_of(now);
    Job& j = job_for(job_name);
    const Member& m = member_of(j, member);
    if (m.state == MemberState::waiting) {
        throw Error(Errc::unavailable,
                    fmt::format("job '{}': node '{}' waits for a round already; only a member of the "
                                "running world can ask for one",
                                j.name(), member));
    }
    if (m.state != MemberState::active) gone(j, m);
    if (!j.round_open()) emit(event::RoundOpened{j.name(), t, fmt::format("requested by node '{}'", member)});
    settle(j, t);
}

std::optional<MemberWorld> CoordinatorState::world(std::string_view job_name, std::string_view member,
                                                   bool with_peers) const {
    const Job& j = job(job_name);
    const Member& m = member_of(j, member);
    if (m.state == MemberState::waiting) return std::nullopt;
    if (m.state != MemberState::active) gone(j, m);
    const World& w = j.world();
    const WorldSlot& mine = w.slots[m.rank];
    MemberWorld view{true, w.generation, m.rank, w.size(), mine.local_rank, mine.local_world_size, mine.node_rank, {}};
    if (with_peers) view.peers = w.peers();
    return view;
}

}  // namespace cohort::coord
