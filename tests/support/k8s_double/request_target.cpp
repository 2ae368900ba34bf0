// Percent-decoding ('+' is a space, as in a form's query) and splitting.
#include "request_target.hpp"

namespace cohort::k8s_double {

namespace {

int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string decode(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '+') {
            out += ' ';
        } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
            out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

}  // namespace

Target parse_target(std::string_view target) {
    Target t;
    const auto q = target.find('?');
    std::string_view path = target.substr(0, q);
    while (!path.empty()) {
        const auto slash = path.find('/');
        if (slash != 0) t.parts.push_back(decode(path.substr(0, slash)));
        if (slash == std::string_view::npos) break;
        path.remove_prefix(slash + 1);
    }
    if (q != std::string_view::npos) {
        std::string_view query = target.substr(q + 1);
        while (!query.empty()) {
            const auto amp = query.find('&');
            const std::string_view kv = query.substr(0, amp);
            const auto eq = kv.find('=');
            t.query[decode(kv.substr(0, eq))] = eq == std::string_view::npos ? "" : decode(kv.substr(eq + 1));
            if (amp == std::string_view::npos) break;
            query.remove_prefix(amp + 1);
        }
    }
    return t;
}

std::string param(const Target& t, const char* key) {
    const auto it = t.query.find(key);
    return it == t.query.end() ? std::string() : it->second;
}

bool flag(const Target& t, const char* key) {
    const std::string v = param(t, key);
    return v == "true" || v == "1";
}

}  // namespace cohort::k8s_double
