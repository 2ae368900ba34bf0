// Responses and the mapping of cohort::Error onto HTTP statuses.
#include "coordinator/server/http_reply.hpp"

#include "coordinator/protocol/json_bytes.hpp"
#include "core/json_text.hpp"

#include <cstdint>

#include <fmt/format.h>
#include <boost/json/object.hpp>

namespace cohort::coord::server {

namespace json = boost::json;

namespace {

// Boost.JSON copies a string's bytes as they are, so a string that holds a
// byte that is not UTF-8 makes a body that is not UTF-8 either. Such a byte
// can only sit inside a string (all else is ASCII); there it becomes "\\xNN",
// which reads back as the text \xNN. Messages escape what they echo
// (detail::quote); this is the net under the ones that forget.
std::string utf8_body(std::string body) {
    if (coord::is_utf8(body)) return body;
    std::string out;
    out.reserve(body.size() + 16);
    for (std::size_t i = 0; i < body.size();) {
        const std::size_t len = coord::utf8_sequence(body, i);
        if (len == 0) {
            out += fmt::format("\\\\x{:02x}", static_cast<uint8_t>(body[i]));
            ++i;
        } else {
            out.append(body, i, len);
            i += len;
        }
    }
    return out;
}

}  // namespace

Response json_response(const json::value& value, unsigned status) {
    Response r;
    r.status = status;
    r.body = utf8_body(detail::to_text(value));
    return r;
}

Response error_response(unsigned status, std::string_view error, std::string_view detail) {
    json::object o;
    o["error"] = error;
    o["detail"] = detail;
    return json_response(o, status);
}

unsigned http_status(Errc code) {
    switch (code) {
        case Errc::invalid_argument:
        case Errc::parse:
        case Errc::out_of_range:
            return 400;
        case Errc::permission_denied:
            return 401;
        case Errc::not_found:
            return 404;
        case Errc::timeout:
            return 408;
        case Errc::mismatch:
            return 409;
        case Errc::unavailable:
            return 503;
        default:
            return 500;
    }
}

std::string_view error_name(Errc code) {
    switch (code) {
        case Errc::invalid_argument:
        case Errc::out_of_range:
            return "invalid_argument";
        case Errc::parse:
            return "malformed_json";  // the server's only parse errors are request bodies
        case Errc::permission_denied:
            return "unauthorized";
        case Errc::not_found:
            return "not_found";
        case Errc::timeout:
            return "timeout";
        case Errc::mismatch:
            return "conflict";
        case Errc::unavailable:
            return "unavailable";
        default:
            return "internal";
    }
}

Response error_response(const Error& error) {
    return error_response(http_status(error.code()), error_name(error.code()), error.what());
}

bool equal_in_constant_time(std::string_view a, std::string_view b) {
    // Every byte of the longer one is looked at, whatever the contents.
    const std::size_t n = a.size() > b.size() ? a.size() : b.size();
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (std::size_t i = 0; i < n; ++i) {
        const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
        diff |= static_cast<unsigned char>(x ^ y);
    }
    return diff == 0;
}

}  // namespace cohort::coord::server
