// cohort-run --role: a role of the job and, for a group of several, its
// workers and its program: "NAME", "NAME:NPROC" or "NAME:NPROC:COMMAND".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cohort_run {

struct RoleSpec {
    std::string name;
    int nproc = 0;                     // 0: not given (--nproc-per-node then)
    std::vector<std::string> command;  // empty: the program after "--"
};

// Throws cohort::Error(invalid_argument) starting "--role 'TEXT': " for a
// bad name (role_group.hpp's rule), a count that is not 1 to 1024, or an
// empty or badly quoted command.
RoleSpec parse_role_spec(std::string_view text);

// A command line split into words as a POSIX shell splits it, without
// expansions: blanks separate words; 'single quotes' keep everything,
// "double quotes" keep all but \" and \\, a backslash outside quotes keeps
// the next character. Throws Error(invalid_argument) naming `where` for an
// unclosed quote or a trailing backslash.
std::vector<std::string> split_command(std::string_view text, std::string_view where);

// A worker place's name, the stem of its member ids: NODE-R for the
// default role, NODE-ROLE-R for another, so that the roles' ids (and pod
// and step names) never meet.
std::string place_name(std::string_view node, std::string_view role, int local_rank);

}  // namespace cohort_run
