// A job's settings (docs/coordinator.md, "Job settings"): the one reader and
// writer of cohort::JobSettings, for the client that creates a job, the
// server that reads the request and answers GET .../settings, and the
// journal. Unset fields are left out; the coordinator fills them with its
// defaults (coord::resolve) and writes every field back.
#pragma once

#include "coordinator/protocol/fields.hpp"

#include <cohort/coordinator_protocol.hpp>

#include <string_view>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord::protocol {

boost::json::object write(const cohort::JobSettings& settings);
// Types only: Error(as.code) "<where>: <field>: ..." for unknown fields and
// wrong types; ranges are the coordinator's to check.
template <>
cohort::JobSettings read<cohort::JobSettings>(const boost::json::value& value, std::string_view where, ReadAs as);

}  // namespace cohort::coord::protocol
