// Reading an etcd:// URL: endpoints, path and the options of EtcdConfig.
#include "etcd/etcd_url.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace cohort::etcd {

namespace {

struct Where {
    std::string_view url, what, grammar;

    [[noreturn]] void bad(std::string_view problem) const {
        throw Error(Errc::invalid_argument, fmt::format("{} '{}': {} (expected {})", what, url, problem, grammar));
    }
};

std::string percent_decode(const Where& where, std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out += text[i];
            continue;
        }
        unsigned byte = 0;
        const char* first = text.data() + i + 1;
        if (i + 2 >= text.size() || std::from_chars(first, first + 2, byte, 16).ptr != first + 2) {
            where.bad("'%' is not followed by two hex digits");
        }
        out += static_cast<char>(byte);
        i += 2;
    }
    return out;
}

std::string read_password(const Where& where, const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) where.bad(fmt::format("cannot read the password file '{}'", path));
    std::ostringstream text;
    text << in.rdbuf();
    std::string password = text.str();
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) password.pop_back();
    if (password.empty()) where.bad(fmt::format("the password file '{}' is empty", path));
    return password;
}

}  // namespace

EtcdUrl parse_etcd_url(std::string_view url, std::string_view what, std::string_view grammar,
                       std::span<const std::string_view> extra_options) {
    const Where where{url, what, grammar};
    if (!url.starts_with("etcd://")) where.bad("not an etcd:// URL");
    std::string_view rest = url.substr(7);
    std::string_view query;
    if (const auto q = rest.find('?'); q != std::string_view::npos) {
        query = rest.substr(q + 1);
        rest = rest.substr(0, q);
    }
    const auto slash = rest.find('/');
    if (slash == 0 || rest.empty()) where.bad("no etcd endpoint");
    EtcdUrl out;
    out.hosts = std::string(rest.substr(0, slash));
    if (slash != std::string_view::npos) out.path = percent_decode(where, rest.substr(slash + 1));
    while (out.path.ends_with('/')) out.path.pop_back();
    while (out.path.starts_with('/')) out.path.erase(0, 1);
    if (out.path.find('\0') != std::string::npos) where.bad("the prefix holds a NUL byte");

    std::vector<std::string_view> known{"cacert", "cert", "key", "tls", "user", "password-file"};
    known.insert(known.end(), extra_options.begin(), extra_options.end());
    bool tls = false;
    std::string password_file;
    while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view item = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        if (item.empty()) continue;
        const auto eq = item.find('=');
        if (eq == std::string_view::npos) where.bad(fmt::format("option '{}' has no value (write NAME=VALUE)", item));
        const std::string_view name = item.substr(0, eq);
        std::string value = percent_decode(where, item.substr(eq + 1));
        if (name == "cacert") {
            out.config.ca_file = value;
            tls = true;
        } else if (name == "cert") {
            out.config.cert_file = value;
            tls = true;
        } else if (name == "key") {
            out.config.key_file = value;
            tls = true;
        } else if (name == "tls") {
            if (value != "1" && value != "true" && value != "0" && value != "false") {
                where.bad(fmt::format("tls={} (expected true or false)", value));
            }
            tls = value == "1" || value == "true";
        } else if (name == "user") {
            out.config.user = value;
        } else if (name == "password-file") {
            password_file = value;
        } else if (std::find(extra_options.begin(), extra_options.end(), name) != extra_options.end()) {
            out.options.emplace_back(std::string(name), std::move(value));
        } else {
            const auto guess = detail::closest_word(name, std::span<const std::string_view>(known));
            where.bad(fmt::format("unknown option '{}'{}", name,
                                  guess ? fmt::format(" (did you mean '{}'?)", *guess) : std::string()));
        }
    }
    if (!password_file.empty()) out.config.password = read_password(where, password_file);
    if (!out.config.user.empty() && password_file.empty()) {
        where.bad(fmt::format("user={} needs password-file=PATH (passwords are not written in URLs)", out.config.user));
    }
    if (out.config.user.empty() && !password_file.empty()) where.bad("password-file= needs user=");
    const std::string label = fmt::format("{} '{}'", what, url);
    out.config.endpoints = parse_endpoints(out.hosts, tls ? "https" : "http", label);
    check_config(out.config, label);
    return out;
}

}  // namespace cohort::etcd
