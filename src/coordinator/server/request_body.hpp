// Request bodies as JSON, for routes.cpp and store_routes.cpp.
#pragma once

#include "coordinator/server/server.hpp"

#include <boost/json/value.hpp>

namespace cohort::coord::server {

// Error(parse) "<what>: malformed JSON at byte N: ..." for anything but
// one JSON value; Error(invalid_argument) for an empty body.
boost::json::value body_json(const Request& request, std::string_view what);

// The request target as a message shows it: escaped, since it is raw bytes
// from the client.
std::string target_text(const Request& request);

// "405 Method Not Allowed" naming the methods `path` takes.
Response method_not_allowed(const Request& request, std::string_view allow);

}  // namespace cohort::coord::server
