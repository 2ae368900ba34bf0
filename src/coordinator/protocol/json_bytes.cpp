// UTF-8 validation and the two JSON forms of the coordinator's byte strings.
#include "coordinator/protocol/json_bytes.hpp"

#include "core/base64.hpp"
#include "core/json_fields.hpp"

#include <cstdint>
#include <optional>

#include <fmt/format.h>
#include <boost/json/object.hpp>

namespace cohort::coord {

namespace json = boost::json;

// Strict RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF.
std::size_t utf8_sequence(std::string_view bytes, std::size_t i) {
    const std::size_t n = bytes.size();
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b < 0x80) return 1;
    std::size_t len = 0;
    uint8_t lo = 0x80;
    uint8_t hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF)
        len = 2;
    else if (b == 0xE0)
        len = 3, lo = 0xA0;
    else if (b >= 0xE1 && b <= 0xEC)
        len = 3;
    else if (b == 0xED)
        len = 3, hi = 0x9F;
    else if (b >= 0xEE && b <= 0xEF)
        len = 3;
    else if (b == 0xF0)
        len = 4, lo = 0x90;
    else if (b >= 0xF1 && b <= 0xF3)
        len = 4;
    else if (b == 0xF4)
        len = 4, hi = 0x8F;
    else
        return 0;
    if (i + len > n) return 0;
    const auto second = static_cast<uint8_t>(bytes[i + 1]);
    if (second < lo || second > hi) return 0;
    for (std::size_t k = 2; k < len; ++k) {
        const auto c = static_cast<uint8_t>(bytes[i + k]);
        if (c < 0x80 || c > 0xBF) return 0;
    }
    return len;
}

bool is_utf8(std::string_view bytes) {
    for (std::size_t i = 0; i < bytes.size();) {
        const std::size_t len = utf8_sequence(bytes, i);
        if (len == 0) return false;
        i += len;
    }
    return true;
}

json::value bytes_to_json(std::string_view bytes) {
    if (is_utf8(bytes)) return json::string(bytes);
    json::object wrapped;
    wrapped["base64"] = detail::base64_encode(bytes);
    return wrapped;
}

std::string bytes_from_json(const json::value& value, std::string_view where, Errc code) {
    if (value.is_string()) return std::string(value.get_string());
    if (value.is_object()) {
        detail::FieldReader reader(value, std::string(where), code);
        reader.allow({"base64"});
        if (auto decoded = detail::base64_decode(reader.string("base64"))) return std::move(*decoded);
        reader.fail("base64", "is not valid base64");
    }
    throw Error(
        code, fmt::format("{}: must be a string or {{\"base64\": ...}}, not {}", where, detail::json_kind_name(value)));
}

}  // namespace cohort::coord
