// A member's request bodies as JSON, both ways.
#include "coordinator/protocol/requests.hpp"

#include "coordinator/protocol/fields.hpp"
#include "coordinator/protocol/metrics.hpp"

#include <fmt/format.h>

namespace cohort::coord::protocol {

namespace json = boost::json;

namespace {

constexpr auto kMember = std::tuple{field("member", &MemberRequest::member)};
constexpr auto kLeave =
    std::tuple{field("member", &LeaveRequest::member), field("failed", &LeaveRequest::failed, Presence::defaulted)};
constexpr auto kDone = std::tuple{field("member", &DoneRequest::member), field("lease", &DoneRequest::lease)};
// "metrics" is read and written by hand (metrics.hpp).
constexpr auto kHeartbeat =
    std::tuple{field("member", &HeartbeatRequest::member), field("generation", &HeartbeatRequest::generation)};

}  // namespace

json::object to_json(const MemberRequest& r) {
    return write_message(r, kMember);
}

MemberRequest member_request_from_json(const json::value& value, std::string_view where, ReadAs as) {
    return read_message<MemberRequest>(value, where, as, kMember);
}

json::object to_json(const LeaveRequest& r) {
    json::object o = write_message(r, kLeave);
    if (r.failed.empty()) o.erase("failed");  // a goodbye
    return o;
}

LeaveRequest leave_request_from_json(const json::value& value, std::string_view where, ReadAs as) {
    return read_message<LeaveRequest>(value, where, as, kLeave);
}

json::object to_json(const DoneRequest& r) {
    return write_message(r, kDone);
}

DoneRequest done_request_from_json(const json::value& value, std::string_view where, ReadAs as) {
    return read_message<DoneRequest>(value, where, as, kDone);
}

json::object to_json(const HeartbeatRequest& r) {
    json::object o = write_message(r, kHeartbeat);
    if (r.metrics) o["metrics"] = to_json(*r.metrics);
    return o;
}

HeartbeatRequest heartbeat_request_from_json(const json::value& value, std::string_view where, ReadAs as) {
    const auto reader = reader_for(value, where, as, kHeartbeat, {"metrics"});
    HeartbeatRequest r;
    read_fields(reader, r, kHeartbeat);
    if (const json::value* m = reader.find("metrics")) {
        r.metrics = metrics_from_json(*m, fmt::format("{}: metrics", where), as);
    }
    return r;
}

}  // namespace cohort::coord::protocol
