// The JSON the coordinator's C functions give back, and the heartbeat
// metrics they take: the protocol's own text forms
// (<cohort/coordinator_protocol.hpp>), so C callers see what the wire says.
#include "coordinator_json.hpp"

#include "cohort.h"

#include <cohort/error.hpp>

#include <fmt/format.h>

namespace cohort::capi {

std::string world_json(const cohort::MemberWorld& w, bool with_peers) {
    return cohort::to_json_text(w, with_peers);
}

std::string lease_json(const cohort::ShardLease& l) {
    return cohort::to_json_text(l);
}

cohort::HeartbeatMetrics metrics_from_text(const char* text, const char* fn) {
    return cohort::heartbeat_metrics_from_json_text(text, fmt::format("{}: metrics_json", fn));
}

int32_t shard_outcome(const ShardDone& done) {
    if (done.outcome == "counted") return COHORT_SHARD_COUNTED;
    if (done.outcome == "counted_late") return COHORT_SHARD_COUNTED_LATE;
    if (done.outcome == "already_done") return COHORT_SHARD_ALREADY_DONE;
    throw Error(Errc::internal, fmt::format("unknown shard outcome '{}' from the coordinator", done.outcome));
}

int32_t release_outcome(const ShardRelease& release) {
    if (release.outcome == "released") return COHORT_SHARD_RELEASED;
    if (release.outcome == "requeued") return COHORT_SHARD_REQUEUED;
    if (release.outcome == "reported") return COHORT_SHARD_REPORTED;
    throw Error(Errc::internal, fmt::format("unknown release outcome '{}' from the coordinator", release.outcome));
}

}  // namespace cohort::capi
