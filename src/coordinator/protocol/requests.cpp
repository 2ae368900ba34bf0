// The heartbeat's body: its member and generation, and the metrics object
// read by metrics.cpp.
#include "coordinator/protocol/requests.hpp"

#include "coordinator/protocol/metrics.hpp"

#include <fmt/format.h>

namespace cohort::coord::protocol {

namespace json = boost::json;

namespace {

// "metrics" is read and written by hand.
constexpr auto kHeartbeat =
    std::tuple{field("member", &HeartbeatRequest::member), field("generation", &HeartbeatRequest::generation)};

}  // namespace

json::object write(const HeartbeatRequest& r) {
    json::object o = write_message(r, kHeartbeat);
    if (r.metrics) o["metrics"] = write(*r.metrics);
    return o;
}

template <>
HeartbeatRequest read<HeartbeatRequest>(const json::value& value, std::string_view where, ReadAs as) {
    const auto reader = reader_for(value, where, as, kHeartbeat, {"metrics"});
    HeartbeatRequest r;
    read_fields(reader, r, kHeartbeat);
    if (const json::value* m = reader.find("metrics")) {
        r.metrics = read<HeartbeatMetrics>(*m, fmt::format("{}: metrics", where), as);
    }
    return r;
}

}  // namespace cohort::coord::protocol
