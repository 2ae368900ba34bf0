// The heartbeat's `metrics` object (docs/coordinator.md, "Heartbeats"): the
// one reader and writer of cohort::HeartbeatMetrics, used by the client that
// sends it, the route that receives it, the journal that records it and the
// C layer that takes it as text.
#pragma once

#include "coordinator/protocol/fields.hpp"

#include <cohort/coordinator_client.hpp>

#include <string_view>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord::protocol {

// Error(as.code) "<where>: <field>: ..." for unknown fields, wrong types and
// negative numbers; "<where>: samples[2]: ..." inside the batch, where each
// sample needs a `step` and its `age` defaults to 0. `gpu` may be any JSON
// value; it is kept as compact text.
template <>
HeartbeatMetrics read<HeartbeatMetrics>(const boost::json::value& value, std::string_view where, ReadAs as);
// The wire form: read<HeartbeatMetrics>(write(m)) == m.
boost::json::object write(const HeartbeatMetrics& metrics);
// The `gpu` value as JSON (null when none, or when the text is not JSON).
boost::json::value gpu_value(const HeartbeatMetrics& metrics);

}  // namespace cohort::coord::protocol
