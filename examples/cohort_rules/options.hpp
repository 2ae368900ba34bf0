// cohort-rules's command line.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cohort_rules {

enum class Command { check, eval, explain };

struct Options {
    Command command = Command::check;
    std::vector<std::string> files;                         // check: one or more; eval, explain: one
    std::string rule;                                       // explain
    std::vector<std::pair<std::string, std::string>> sets;  // --set NAME=VALUE, in order
    std::vector<double> times;                              // --at, in order; {0} if none given
    bool json = false;
    bool strict = false;  // check: warnings fail too
};

// Parses argv. Returns nullopt after printing help or the version (exit 0);
// throws cohort::Error(invalid_argument) naming the flag on bad usage.
std::optional<Options> parse_options(int argc, char** argv);

}  // namespace cohort_rules
