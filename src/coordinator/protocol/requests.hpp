// The bodies a member sends besides its descriptor (descriptor.hpp) and the
// store's (store.hpp): the one reader and writer of each, for the client
// that sends it and the route that reads it.
#pragma once

#include "coordinator/protocol/read_as.hpp"

#include <cohort/coordinator_protocol.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord::protocol {

// POST .../round and .../shards/next: {"member"}.
struct MemberRequest {
    std::string member;
};

// POST .../leave: {"member", "failed"?: why}; failed: the member failed
// (its launcher saw its process die), not a goodbye.
struct LeaveRequest {
    std::string member;
    std::string failed;
};

// POST .../shards/done: {"member", "lease"}.
struct DoneRequest {
    std::string member;
    uint64_t lease = 0;
};

// POST .../heartbeat: {"member", "generation", "metrics"?}.
struct HeartbeatRequest {
    std::string member;
    uint64_t generation = 0;
    std::optional<HeartbeatMetrics> metrics;
};

boost::json::object to_json(const MemberRequest& request);
MemberRequest member_request_from_json(const boost::json::value& value, std::string_view where, ReadAs as);
boost::json::object to_json(const LeaveRequest& request);
LeaveRequest leave_request_from_json(const boost::json::value& value, std::string_view where, ReadAs as);
boost::json::object to_json(const DoneRequest& request);
DoneRequest done_request_from_json(const boost::json::value& value, std::string_view where, ReadAs as);
boost::json::object to_json(const HeartbeatRequest& request);
// The metrics are parsed here, once (metrics.hpp).
HeartbeatRequest heartbeat_request_from_json(const boost::json::value& value, std::string_view where, ReadAs as);

}  // namespace cohort::coord::protocol
