// What a node says about itself when it joins a job: a cohort::Node (id,
// host, data-plane address, role, locality labels, GPUs), in the JSON of
// the cluster file's node entries (docs/formats.md) without `status`.
#pragma once

#include <cohort/error.hpp>
#include <cohort/node.hpp>

#include <string_view>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord {

// Job names and node ids appear in URL paths and metric labels: 1..256
// printable ASCII characters, no space and no '/'. Error(invalid_argument)
// "`what` 'x y': ..." otherwise.
void validate_name(std::string_view what, std::string_view name);

// The id is a valid name, the address (if any) is HOST:PORT, the status is
// ready. Error(invalid_argument) prefixed with `where`.
void validate_descriptor(const Node& node, std::string_view where);

boost::json::object descriptor_to_json(const Node& node);
// Error(code) prefixed with `where` for unknown fields, wrong types and
// anything validate_descriptor rejects.
Node descriptor_from_json(const boost::json::value& value, std::string_view where, Errc code = Errc::invalid_argument);

// Same id, host, address, role, labels and hardware.
bool same_descriptor(const Node& a, const Node& b);

}  // namespace cohort::coord
