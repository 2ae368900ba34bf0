// The bodies a member sends besides its descriptor (descriptor.hpp) and the
// store's (store.hpp): each one's reader and writer (protocol::write,
// protocol::read<T>), for the client that sends it and the route that
// reads it.
#pragma once

#include "coordinator/protocol/fields.hpp"

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

template <>
struct Schema<MemberRequest> {
    static constexpr auto fields = std::tuple{field("member", &MemberRequest::member)};
};

// POST .../leave: {"member", "failed"?: why}. With "failed" the member
// failed (its launcher saw its process die); without, it said goodbye.
struct LeaveRequest {
    std::string member;
    std::optional<std::string> failed;
};

template <>
struct Schema<LeaveRequest> {
    static constexpr auto fields =
        std::tuple{field("member", &LeaveRequest::member), field("failed", &LeaveRequest::failed)};
};

// POST .../report: {"member", "generation", "dead", "why"?}. Member
// `member`, active in world `generation`, saw member `dead` of that world
// die (its connection closed without a goodbye), and says so.
struct ReportRequest {
    std::string member;
    uint64_t generation = 0;
    std::string dead;
    std::optional<std::string> why;
};

template <>
struct Schema<ReportRequest> {
    static constexpr auto fields =
        std::tuple{field("member", &ReportRequest::member), field("generation", &ReportRequest::generation),
                   field("dead", &ReportRequest::dead), field("why", &ReportRequest::why)};
};

// POST .../shards/done: {"member", "lease"}.
// POST .../shards/done and .../shards/release: {"member", "lease"}.
struct DoneRequest {
    std::string member;
    uint64_t lease = 0;
};

template <>
struct Schema<DoneRequest> {
    static constexpr auto fields =
        std::tuple{field("member", &DoneRequest::member), field("lease", &DoneRequest::lease)};
};

// POST .../heartbeat: {"member", "generation", "metrics"?}; the metrics are
// read here, once (metrics.hpp).
struct HeartbeatRequest {
    std::string member;
    uint64_t generation = 0;
    std::optional<HeartbeatMetrics> metrics;
};

boost::json::object write(const HeartbeatRequest& request);
template <>
HeartbeatRequest read<HeartbeatRequest>(const boost::json::value& value, std::string_view where, ReadAs as);

}  // namespace cohort::coord::protocol
