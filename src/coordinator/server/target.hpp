// A request target split for routing: percent-decoded path segments and
// query parameters.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::coord::server {

struct Target {
    std::vector<std::string> path;  // "/v1/jobs/a%2Fb" -> {"v1", "jobs", "a/b"}
    std::map<std::string, std::string, std::less<>> query;
};

// Error(invalid_argument) for a target that is not an absolute path or
// has a malformed %-escape.
Target parse_target(std::string_view target);
std::string percent_decode(std::string_view text, std::string_view where);

}  // namespace cohort::coord::server
