// Endpoint lists and the checks an EtcdConfig gets before first use.
#include "etcd/config.hpp"

#include <cohort/error.hpp>

#include <charconv>
#include <filesystem>

#include <fmt/format.h>

#include <unistd.h>

namespace cohort::etcd {

namespace {

[[noreturn]] void bad(std::string_view where, std::string_view what) {
    throw Error(Errc::invalid_argument, fmt::format("{}: {}", where, what));
}

std::string one_endpoint(std::string_view entry, std::string_view default_scheme, std::string_view where) {
    std::string_view scheme = default_scheme;
    std::string_view authority = entry;
    if (const auto sep = entry.find("://"); sep != std::string_view::npos) {
        scheme = entry.substr(0, sep);
        authority = entry.substr(sep + 3);
        if (scheme != "http" && scheme != "https") {
            bad(where, fmt::format("etcd endpoint '{}': the scheme must be http or https", entry));
        }
    }
    if (authority.ends_with('/')) authority.remove_suffix(1);
    if (authority.empty()) bad(where, "an empty etcd endpoint (expected HOST:PORT)");
    if (authority.find_first_of("/?#@") != std::string_view::npos) {
        bad(where, fmt::format("etcd endpoint '{}' is not HOST:PORT", entry));
    }
    const auto colon = authority.rfind(':');
    const auto bracket = authority.rfind(']');
    if (colon == std::string_view::npos || (bracket != std::string_view::npos && colon < bracket)) {
        bad(where, fmt::format("etcd endpoint '{}' has no port (etcd's is usually 2379)", entry));
    }
    const std::string_view digits = authority.substr(colon + 1);
    unsigned port = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || port == 0 || port > 65535) {
        bad(where, fmt::format("etcd endpoint '{}': port '{}' is not a number from 1 to 65535", entry, digits));
    }
    if (colon == 0) bad(where, fmt::format("etcd endpoint '{}' has no host", entry));
    return fmt::format("{}://{}", scheme, authority);
}

void check_readable(const std::string& path, std::string_view what, std::string_view where) {
    if (path.empty()) return;
    if (::access(path.c_str(), R_OK) != 0) {
        bad(where, fmt::format("cannot read the {} '{}'", what, path));
    }
}

}  // namespace

std::vector<std::string> parse_endpoints(std::string_view list, std::string_view default_scheme,
                                         std::string_view where) {
    std::vector<std::string> out;
    while (true) {
        const auto comma = list.find(',');
        std::string_view entry = list.substr(0, comma);
        while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
        while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
        out.push_back(one_endpoint(entry, default_scheme, where));
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return out;
}

void check_config(const EtcdConfig& config, std::string_view where) {
    if (config.endpoints.empty()) bad(where, "no etcd endpoints");
    if (!config.key_file.empty() && config.cert_file.empty()) {
        bad(where, "a client key without a client certificate (give both, or neither)");
    }
    if (!config.cert_file.empty() && config.key_file.empty()) {
        bad(where, "a client certificate without its key (give both, or neither)");
    }
    if (!config.user.empty() && config.password.empty()) {
        bad(where, fmt::format("etcd user '{}' has no password", config.user));
    }
    if (config.user.empty() && !config.password.empty()) bad(where, "a password without a user");
    check_readable(config.ca_file, "CA file", where);
    check_readable(config.cert_file, "client certificate", where);
    check_readable(config.key_file, "client key", where);
    if (config.attempt_timeout.count() <= 0 || config.connect_timeout.count() <= 0) {
        bad(where, "etcd timeouts must be positive");
    }
}

std::string endpoint_list(const std::vector<std::string>& endpoints) {
    std::string out;
    for (const auto& e : endpoints) out += (out.empty() ? "" : ", ") + e;
    return out;
}

}  // namespace cohort::etcd
