// Glob patterns over dataset paths (the DataAdvisor's file patterns): `*`
// and `?` within a path component, `**` across `/`, `[a-z]`/`[!x]` classes,
// `\` escaping the next character. Matching is on the path text alone: no
// file system is read.
#pragma once

#include <string_view>

namespace cohort::detail {

// Throws Error(invalid_argument) naming the pattern when it is empty or a
// class is not closed.
void check_glob(std::string_view pattern);
bool glob_match(std::string_view pattern, std::string_view path);

}  // namespace cohort::detail
