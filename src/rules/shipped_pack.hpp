// Where the rule packs cohort ships are found at run time: $COHORT_RULES_DIR,
// then <prefix>/share/cohort/rules next to the library (an install), then
// the source tree the library was built from (a build directory).
#pragma once

#include <filesystem>
#include <string_view>

namespace cohort::detail {

// The path of shipped pack `file` ("gpu_io.yaml"). Error(not_found)
// "<what> <file> was not found; looked in: ...; <advice>", listing every
// place tried.
std::filesystem::path find_shipped_pack(std::string_view file, std::string_view what, std::string_view advice);

}  // namespace cohort::detail
