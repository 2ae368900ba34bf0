// Store keys and values are bytes, JSON strings are UTF-8: bytes that are
// valid UTF-8 travel as a plain string (readable in the journal), anything
// else as {"base64": "..."}, so every value round-trips exactly.
#pragma once

#include <cohort/error.hpp>

#include <string>
#include <string_view>

#include <boost/json/value.hpp>

namespace cohort::coord {

bool is_utf8(std::string_view bytes);
// The length of the UTF-8 sequence that starts at bytes[i] (i < size), or 0
// when none does there.
std::size_t utf8_sequence(std::string_view bytes, std::size_t i);

boost::json::value bytes_to_json(std::string_view bytes);
// Error(code) naming `where` for anything but the two forms above.
std::string bytes_from_json(const boost::json::value& value, std::string_view where, Errc code);

}  // namespace cohort::coord
