// CoordinatorState's dataset commands: register a plan, lease the next
// shard, report one done, give one back.
#include "coordinator/state/state.hpp"
#include "core/text.hpp"

#include <fmt/format.h>

namespace cohort::coord {

namespace {

const ShardQueue& queue_of(const Job& job) {
    if (const ShardQueue* shards = job.shards()) return *shards;
    throw Error(Errc::not_found, fmt::format("job '{}' has no dataset plan (register one first)", job.name()));
}

}  // namespace

void CoordinatorState::register_dataset(std::string_view job_name, DatasetPlan plan, double now) {
    const double t = time_of(now);
    Job& j = job_for(job_name);
    validate(plan);
    if (const ShardQueue* existing = j.shards()) {
        if (existing->plan() == plan) return;
        throw Error(Errc::mismatch, fmt::format("job '{}' already has a dataset plan ({} shards, {} epochs); a job's "
                                                "plan cannot change",
                                                job_name, existing->plan().shards.size(), existing->plan().epochs));
    }
    emit(event::DatasetRegistered{j.name(), t, std::move(plan)});
}

ShardLease CoordinatorState::next_shard(std::string_view job_name, std::string_view member, double now) {
    const double t = time_of(now);
    Job& j = job_for(job_name);
    const ShardQueue& queue = queue_of(j);
    const Member* m = j.find_member(member);
    if (m == nullptr)
        throw Error(Errc::not_found,
                    fmt::format("job '{}' has no member {} (join first)", job_name, detail::quote(member)));
    if (m->state != MemberState::active) {
        throw Error(m->state == MemberState::waiting ? Errc::unavailable : Errc::mismatch,
                    fmt::format("job '{}': node '{}' is {}; shards go to members of the running world", job_name,
                                member, to_string(m->state)));
    }
    if (queue.finished()) {
        ShardLease none;
        none.finished = true;
        return none;
    }
    const auto pick = queue.pick(m->node.host_name());
    if (!pick) return ShardLease{};
    Lease lease{queue.next_lease_id(),          std::string(member), pick->epoch, pick->shard, t,
                t + queue.plan().lease_duration};
    const ShardSpec& spec = queue.plan().shards[pick->shard];
    ShardLease grant{true, false, lease.id, spec.id, pick->shard, pick->epoch, spec.bytes, lease.expiry};
    emit(event::LeaseGranted{j.name(), t, std::move(lease)});
    return grant;
}

namespace {

// The checks shards/done and shards/release share: the member is one of the
// job's, the lease was granted, and to this member. The lease when it is
// outstanding or revoked, else nullptr (reported done).
const Lease* member_lease(const Job& j, const ShardQueue& queue, std::string_view job_name, std::string_view member,
                          uint64_t lease) {
    if (j.find_member(member) == nullptr) {
        throw Error(Errc::not_found,
                    fmt::format("job '{}' has no member {} (join first)", job_name, detail::quote(member)));
    }
    if (lease == 0 || lease >= queue.next_lease_id()) {
        throw Error(Errc::not_found, fmt::format("job '{}' never granted lease {}", job_name, lease));
    }
    const Lease* held = nullptr;
    if (const auto it = queue.leases().find(lease); it != queue.leases().end()) held = &it->second;
    if (held == nullptr) held = queue.find_revoked(lease);
    if (held != nullptr && held->member != member) {
        throw Error(
            Errc::invalid_argument,
            fmt::format("job '{}': lease {} (shard '{}', epoch {}) was granted to '{}', "
                        "not '{}'",
                        job_name, lease, queue.plan().shards[held->shard].id, held->epoch, held->member, member));
    }
    return held;
}

}  // namespace

ShardRelease CoordinatorState::shard_release(std::string_view job_name, std::string_view member, uint64_t lease,
                                             double now) {
    const double t = time_of(now);
    Job& j = job_for(job_name);
    const ShardQueue& queue = queue_of(j);
    member_lease(j, queue, job_name, member, lease);
    if (!queue.leases().contains(lease))
        return ShardRelease{queue.find_revoked(lease) != nullptr ? "requeued" : "reported", false};
    emit(event::LeaseReleased{j.name(), t, std::string(member), lease});
    return ShardRelease{"released", true};
}

ShardDone CoordinatorState::shard_done(std::string_view job_name, std::string_view member, uint64_t lease, double now) {
    const double t = time_of(now);
    Job& j = job_for(job_name);
    const ShardQueue& queue = queue_of(j);
    member_lease(j, queue, job_name, member, lease);
    const DoneOutcome outcome = queue.outcome_of(lease);
    emit(event::LeaseCompleted{j.name(), t, std::string(member), lease});
    return ShardDone{std::string(to_string(outcome)), outcome != DoneOutcome::already_done};
}

}  // namespace cohort::coord
