// The JSON the coordinator's C functions give back, and the heartbeat
// metrics they take: the protocol's own text forms
// (<cohort/coordinator_protocol.hpp>), so C callers see what the wire says.
#include "coordinator_json.hpp"

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

}  // namespace cohort::capi
