// One encoder and one decoder, shared by etcd/wire and coordinator/protocol.
#include "core/base64.hpp"

#include <cstdint>

namespace cohort::detail {

namespace {

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c, bool url_safe_too) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || (url_safe_too && c == '-')) return 62;
    if (c == '/' || (url_safe_too && c == '_')) return 63;
    return -1;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const uint32_t n = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8) |
                           uint32_t(uint8_t(bytes[i + 2]));
        for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(n >> shift) & 63];
    }
    const std::size_t rest = bytes.size() - i;
    if (rest > 0) {
        uint32_t n = uint32_t(uint8_t(bytes[i])) << 16;
        if (rest == 2) n |= uint32_t(uint8_t(bytes[i + 1])) << 8;
        out += kAlphabet[(n >> 18) & 63];
        out += kAlphabet[(n >> 12) & 63];
        out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::optional<std::string> base64_decode(std::string_view text, Base64Form form) {
    const bool canonical = form == Base64Form::canonical;
    if (canonical && text.size() % 4 != 0) return std::nullopt;
    std::size_t pad = 0;
    while (pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
    if (canonical && pad > 2) return std::nullopt;
    text.remove_suffix(pad);
    // One character past a group of four holds only 6 bits: not a byte.
    if (text.size() % 4 == 1) return std::nullopt;
    std::string out;
    out.reserve(text.size() * 3 / 4);
    uint32_t bits = 0;
    int count = 0;
    for (const char c : text) {
        const int s = sextet(c, !canonical);
        if (s < 0) return std::nullopt;  // includes a '=' before the end
        bits = (bits << 6) | uint32_t(s);
        count += 6;
        if (count >= 8) {
            count -= 8;
            out += static_cast<char>((bits >> count) & 0xff);
        }
    }
    // The bits left over under the padding: zero in the one canonical spelling.
    if (canonical && (bits & ((1u << count) - 1)) != 0) return std::nullopt;
    return out;
}

}  // namespace cohort::detail
