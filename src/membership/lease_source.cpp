// The lease sources of a ShardReader: a member's leases through its
// Membership (which also takes the reader's data wait), or a client's.
// Here rather than in data/: the data path knows nothing of membership.
#include <cohort/coordinator_client.hpp>
#include <cohort/membership.hpp>
#include <cohort/shard_reader.hpp>

#include <fmt/format.h>

namespace cohort {

ShardLeaseSource lease_source(Membership& membership) {
    ShardLeaseSource s;
    s.next_shard = [&membership] { return membership.next_shard(); };
    s.shard_done = [&membership](uint64_t lease) { return membership.shard_done(lease); };
    s.shard_release = [&membership](uint64_t lease) { return membership.shard_release(lease); };
    s.data_wait = [&membership](double seconds) { membership.add_data_wait(seconds); };
    s.name = fmt::format("member '{}' of job '{}'", membership.member(), membership.job());
    return s;
}

ShardLeaseSource lease_source(CoordinatorClient& client, std::string job, std::string member) {
    if (job.empty() || member.empty()) {
        throw Error(Errc::invalid_argument,
                    fmt::format("lease_source: a job and a member are needed (job '{}', member '{}')", job, member));
    }
    ShardLeaseSource s;
    s.name = fmt::format("member '{}' of job '{}'", member, job);
    s.next_shard = [&client, job, member] { return client.next_shard(job, member); };
    s.shard_done = [&client, job, member](uint64_t lease) { return client.shard_done(job, member, lease); };
    s.shard_release = [&client, job = std::move(job), member = std::move(member)](uint64_t lease) {
        return client.shard_release(job, member, lease);
    };
    return s;
}

}  // namespace cohort
