// A request's target (path and query), percent-decoded, as the double's
// routes read it.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::k8s_double {

struct Target {
    std::vector<std::string> parts;  // the path's segments
    std::map<std::string, std::string> query;
};

Target parse_target(std::string_view target);
// A query parameter's value; empty when absent.
std::string param(const Target& t, const char* key);
// A query parameter that is "true" or "1".
bool flag(const Target& t, const char* key);

}  // namespace cohort::k8s_double
