// The discovery documents kubectl reads before it touches a resource:
// /version, /api, /apis and each group version's APIResourceList. Only the
// legacy (unaggregated) form: a client that asks for aggregated discovery
// gets plain application/json and falls back, as it does with older servers.
#pragma once

#include <boost/json/object.hpp>

#include <optional>
#include <string>

namespace cohort::k8s_double {

// The document for `path`, or nullopt when it is not a discovery route.
std::optional<boost::json::object> discovery(const std::string& path, const std::string& server_address);

// The kind of a namespaced resource the double knows (for a NotFound's
// details), or empty: "services" -> "Service".
std::string kind_of(const std::string& resource);

}  // namespace cohort::k8s_double
