// Forms shared by the coordinator client's and the membership's C
// functions: a member's world, a shard lease, and the heartbeat metrics a
// caller passes as text, and a shard report's outcome.
#pragma once

#include <cohort/coordinator_client.hpp>

#include <cstdint>
#include <string>

namespace cohort::capi {

// {"state": "active" or "waiting", "generation", and while active "rank",
// "world_size", "local_rank", "local_world_size", "node_rank" and, with_peers,
// "peers"}: the coordinator's world message.
std::string world_json(const MemberWorld& world, bool with_peers);
// {"granted", "finished", and when granted "lease", "shard_id", "shard",
// "epoch", "bytes", "expiry"}.
std::string lease_json(const ShardLease& lease);
// The heartbeat route's metrics object (docs/coordinator.md, "Heartbeat
// metrics") as the client's struct. Error(invalid_argument) "FN:
// metrics_json: ..." naming the field.
HeartbeatMetrics metrics_from_text(const char* text, const char* fn);
// The COHORT_SHARD_* constant of a lease reported done.
int32_t shard_outcome(const ShardDone& done);
// The COHORT_SHARD_RELEASED, _REQUEUED or _REPORTED constant of a lease given back.
int32_t release_outcome(const ShardRelease& release);

}  // namespace cohort::capi
