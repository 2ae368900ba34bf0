// JSON text to boost::json::value with every double exact. Boost 1.81's own
// parser can be one ulp off (about 8% of doubles: "60.8" parses to
// 60.799999999999997), which would make a replayed journal or a reloaded
// snapshot differ from the state that wrote it. Read the coordinator's
// journal lines and snapshots with this, not boost::json::parse.
#pragma once

#include <string_view>

#include <boost/json/value.hpp>

namespace cohort::coord {

// Error(parse) "malformed JSON at byte N: ..." for anything but exactly
// one JSON value (whitespace around it allowed).
boost::json::value parse_json(std::string_view text);

}  // namespace cohort::coord
