// Splitting and decoding request targets.
#include "coordinator/server/target.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

namespace cohort::coord::server {

namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::string percent_decode(std::string_view text, std::string_view where) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out += text[i];
            continue;
        }
        const int hi = i + 1 < text.size() ? hex_value(text[i + 1]) : -1;
        const int lo = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: '%' at {} must be followed by two hex digits", where, i));
        }
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    return out;
}

Target parse_target(std::string_view target) {
    if (target.empty() || target.front() != '/') {
        throw Error(Errc::invalid_argument,
                    fmt::format("request target {} is not a path starting with '/'", detail::quote(target)));
    }
    Target out;
    std::string_view path = target;
    if (const auto q = target.find('?'); q != std::string_view::npos) {
        path = target.substr(0, q);
        std::string_view query = target.substr(q + 1);
        while (!query.empty()) {
            const auto amp = query.find('&');
            const std::string_view part = query.substr(0, amp);
            query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
            if (part.empty()) continue;
            const auto eq = part.find('=');
            std::string name = percent_decode(part.substr(0, eq), "query parameter");
            std::string value =
                eq == std::string_view::npos ? std::string() : percent_decode(part.substr(eq + 1), "query parameter");
            out.query[std::move(name)] = std::move(value);
        }
    }
    path.remove_prefix(1);
    while (!path.empty()) {
        const auto slash = path.find('/');
        out.path.push_back(percent_decode(path.substr(0, slash), "request path"));
        if (slash == std::string_view::npos) break;
        path.remove_prefix(slash + 1);
        if (path.empty()) break;  // a trailing '/' is the same path
    }
    return out;
}

}  // namespace cohort::coord::server
