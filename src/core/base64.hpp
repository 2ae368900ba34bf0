// Base64 (RFC 4648) for the two wire formats that carry bytes in JSON: the
// coordinator's {"base64": ...} values and etcd's gateway keys and values.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cohort::detail {

// Standard alphabet, padded with '='.
std::string base64_encode(std::string_view bytes);

enum class Base64Form {
    // Exactly what base64_encode writes: a multiple of four characters, at
    // most two '=' at the end, zero bits under the padding. The coordinator
    // asks this so that one value has one spelling.
    canonical,
    // Also the URL-safe alphabet ('-', '_'), missing or extra trailing '=',
    // and stray bits under the padding: what another producer (etcd's
    // gateway) may write. Still refuses any other character and a length
    // that cannot be base64 (one character past a group of four).
    lenient,
};

// Empty when `text` is not base64 in the form asked for.
std::optional<std::string> base64_decode(std::string_view text, Base64Form form = Base64Form::canonical);

}  // namespace cohort::detail
