// Reading an etcd:// URL into the client's config and the store's prefix,
// and registering the scheme with open_store.
#include "etcd/store.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>

#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace cohort::etcd {

namespace {

constexpr std::string_view kGrammar = "etcd://HOST:PORT[,HOST:PORT...]/PREFIX[?OPTION=VALUE&...]";

[[noreturn]] void bad(std::string_view url, std::string_view what) {
    throw Error(Errc::invalid_argument, fmt::format("store URL '{}': {} (expected {})", url, what, kGrammar));
}

std::string percent_decode(std::string_view url, std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out += text[i];
            continue;
        }
        unsigned byte = 0;
        const char* first = text.data() + i + 1;
        if (i + 2 >= text.size() || std::from_chars(first, first + 2, byte, 16).ptr != first + 2) {
            bad(url, "'%' is not followed by two hex digits");
        }
        out += static_cast<char>(byte);
        i += 2;
    }
    return out;
}

std::string read_password(std::string_view url, const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) bad(url, fmt::format("cannot read the password file '{}'", path));
    std::ostringstream text;
    text << in.rdbuf();
    std::string password = text.str();
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) password.pop_back();
    if (password.empty()) bad(url, fmt::format("the password file '{}' is empty", path));
    return password;
}

}  // namespace

StoreUrl parse_store_url(std::string_view url) {
    if (!url.starts_with("etcd://")) bad(url, "not an etcd:// URL");
    std::string_view rest = url.substr(7);
    std::string_view query;
    if (const auto q = rest.find('?'); q != std::string_view::npos) {
        query = rest.substr(q + 1);
        rest = rest.substr(0, q);
    }
    const auto slash = rest.find('/');
    if (slash == 0) bad(url, "no etcd endpoint");
    if (slash == std::string_view::npos) bad(url, "no key prefix after the endpoints");
    const std::string_view hosts = rest.substr(0, slash);
    std::string path = percent_decode(url, rest.substr(slash + 1));
    while (path.ends_with('/')) path.pop_back();
    if (path.empty()) bad(url, "no key prefix after the endpoints (name the job and generation: /cohort/JOB/GEN)");
    if (path.find('\0') != std::string::npos) bad(url, "the prefix holds a NUL byte");

    StoreUrl out;
    out.prefix = "/" + path;
    bool tls = false;
    std::string password_file;
    while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view item = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        if (item.empty()) continue;
        const auto eq = item.find('=');
        if (eq == std::string_view::npos) bad(url, fmt::format("option '{}' has no value (write NAME=VALUE)", item));
        const std::string_view name = item.substr(0, eq);
        const std::string value = percent_decode(url, item.substr(eq + 1));
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
                bad(url, fmt::format("tls={} (expected true or false)", value));
            }
            tls = value == "1" || value == "true";
        } else if (name == "user") {
            out.config.user = value;
        } else if (name == "password-file") {
            password_file = value;
        } else if (name == "ttl") {
            const auto seconds = detail::parse_duration(value);
            if (!seconds || *seconds < 2 || *seconds > 86400) {
                bad(url, fmt::format("ttl={} is not a duration from 2 s to 1 day (write ttl=30 or ttl=2m)", value));
            }
            out.ttl = std::chrono::seconds(static_cast<int64_t>(*seconds));
        } else {
            const auto guess = detail::closest_word(name, {"cacert", "cert", "key", "tls", "user", "password-file", "ttl"});
            bad(url, fmt::format("unknown option '{}'{}", name,
                                 guess ? fmt::format(" (did you mean '{}'?)", *guess) : std::string()));
        }
    }
    if (!password_file.empty()) out.config.password = read_password(url, password_file);
    if (!out.config.user.empty() && password_file.empty()) {
        bad(url, fmt::format("user={} needs password-file=PATH (passwords are not written in URLs)", out.config.user));
    }
    if (out.config.user.empty() && !password_file.empty()) bad(url, "password-file= needs user=");
    const std::string where = fmt::format("store URL '{}'", url);
    out.config.endpoints = parse_endpoints(hosts, tls ? "https" : "http", where);
    check_config(out.config, where);
    out.address = fmt::format("etcd://{}{}", hosts, out.prefix);
    return out;
}

}  // namespace cohort::etcd

namespace cohort {

namespace {

// etcd:// joins open_store's schemes when the library loads: comm, which
// opens stores, sits below etcd and cannot name it.
[[maybe_unused]] const bool kEtcdSchemeRegistered = [] {
    register_store_scheme("etcd", [](std::string_view url, std::string_view, const StoreOptions& options) {
        return etcd::open_store(etcd::parse_store_url(url), options);
    });
    return true;
}();

}  // namespace

}  // namespace cohort

// Named by cohort::cohort_static's link options so a static link keeps this
// object and its registration (as libcohort_link_coordinator_store does).
extern "C" {
extern const int libcohort_link_etcd_store;
const int libcohort_link_etcd_store = 1;
}
