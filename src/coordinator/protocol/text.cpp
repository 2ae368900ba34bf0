// The protocol's JSON text forms in the public API (coordinator_protocol.hpp),
// for callers such as the C layer that hand messages on as text.
#include "coordinator/protocol/metrics.hpp"
#include "coordinator/protocol/replies.hpp"

#include <cohort/coordinator_protocol.hpp>
#include <cohort/error.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fmt/format.h>

namespace cohort {

namespace json = boost::json;

std::string to_json_text(const MemberWorld& world, bool with_peers) {
    return json::serialize(coord::protocol::write(world, with_peers));
}

std::string to_json_text(const HeartbeatReply& reply) {
    return json::serialize(coord::protocol::write(reply));
}

std::string to_json_text(const ShardLease& lease) {
    return json::serialize(coord::protocol::write(lease));
}

std::string to_json_text(const ShardDone& done) {
    return json::serialize(coord::protocol::write(done));
}

std::string to_json_text(const ShardRelease& release) {
    return json::serialize(coord::protocol::write(release));
}

std::string to_json_text(const HeartbeatMetrics& metrics) {
    return json::serialize(coord::protocol::write(metrics));
}

HeartbeatMetrics heartbeat_metrics_from_json_text(std::string_view text, std::string_view where) {
    boost::system::error_code ec;
    const json::value value = json::parse(text, ec);
    if (ec) throw Error(Errc::invalid_argument, fmt::format("{}: not JSON ({})", where, ec.message()));
    return coord::protocol::read<HeartbeatMetrics>(value, where, coord::protocol::kArgument);
}

}  // namespace cohort
