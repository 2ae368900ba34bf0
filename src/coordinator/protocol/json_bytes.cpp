// UTF-8 validation and base64 for the coordinator's byte strings in JSON.
#include "coordinator/protocol/json_bytes.hpp"

#include "core/json_fields.hpp"

#include <array>
#include <cstdint>
#include <optional>

#include <fmt/format.h>
#include <boost/json/object.hpp>

namespace cohort::coord {

namespace json = boost::json;

namespace {

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

}  // namespace

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

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const uint32_t v = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16 |
                           static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8 |
                           static_cast<uint8_t>(bytes[i + 2]);
        for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(v >> shift) & 63];
    }
    const std::size_t rest = bytes.size() - i;
    if (rest > 0) {
        uint32_t v = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16;
        if (rest == 2) v |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) return std::nullopt;
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (std::size_t i = 0; i < text.size(); i += 4) {
        const bool last = i + 4 == text.size();
        std::array<int, 4> s{};
        int pad = 0;
        for (int k = 0; k < 4; ++k) {
            const char c = text[i + static_cast<std::size_t>(k)];
            if (c == '=' && last && k >= 2) {
                ++pad;
                s[static_cast<std::size_t>(k)] = 0;
                continue;
            }
            if (pad > 0) return std::nullopt;  // data after padding
            s[static_cast<std::size_t>(k)] = sextet(c);
            if (s[static_cast<std::size_t>(k)] < 0) return std::nullopt;
        }
        const uint32_t v = static_cast<uint32_t>(s[0]) << 18 | static_cast<uint32_t>(s[1]) << 12 |
                           static_cast<uint32_t>(s[2]) << 6 | static_cast<uint32_t>(s[3]);
        // Canonical form only: the bits padding drops must be zero.
        if ((pad == 1 && (v & 0xFF) != 0) || (pad == 2 && (v & 0xFFFF) != 0)) return std::nullopt;
        out += static_cast<char>((v >> 16) & 0xFF);
        if (pad < 2) out += static_cast<char>((v >> 8) & 0xFF);
        if (pad < 1) out += static_cast<char>(v & 0xFF);
    }
    return out;
}

json::value bytes_to_json(std::string_view bytes) {
    if (is_utf8(bytes)) return json::string(bytes);
    json::object wrapped;
    wrapped["base64"] = base64_encode(bytes);
    return wrapped;
}

std::string bytes_from_json(const json::value& value, std::string_view where, Errc code) {
    if (value.is_string()) return std::string(value.get_string());
    if (value.is_object()) {
        detail::FieldReader reader(value, std::string(where), code);
        reader.allow({"base64"});
        if (auto decoded = base64_decode(reader.string("base64"))) return std::move(*decoded);
        reader.fail("base64", "is not valid base64");
    }
    throw Error(
        code, fmt::format("{}: must be a string or {{\"base64\": ...}}, not {}", where, detail::json_kind_name(value)));
}

}  // namespace cohort::coord
