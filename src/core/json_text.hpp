// Boost.JSON values as text with numbers as people write them: 0.5, 30.0,
// 1700000000.25 rather than Boost's 5E-1, 3E1, 1.70000000025E9.
#pragma once

#include <string>

#include <boost/json/value.hpp>

namespace cohort::detail {

std::string to_text(const boost::json::value& value);

}  // namespace cohort::detail
