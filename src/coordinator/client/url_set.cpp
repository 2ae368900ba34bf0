// Reading the coordinator URL forms: one http:// URL, a list, or etcd://.
#include "coordinator/client/url_set.hpp"

#include "etcd/etcd_url.hpp"

#include <cohort/error.hpp>

#include <charconv>

#include <fmt/format.h>

namespace cohort::coord::client {

namespace {

constexpr std::string_view kForms =
    "http://HOST:PORT (or https://), a list http://HOST:PORT,http://HOST:PORT of replicas, or "
    "etcd://HOST:PORT[,HOST:PORT]/PREFIX[?OPTIONS] to find the leader through etcd";

std::vector<std::string_view> split(std::string_view text, char by) {
    std::vector<std::string_view> out;
    for (;;) {
        const auto at = text.find(by);
        out.push_back(text.substr(0, at));
        if (at == std::string_view::npos) return out;
        text = text.substr(at + 1);
    }
}

bool valid_port(std::string_view text) {
    unsigned port = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
    return !text.empty() && ec == std::errc() && end == text.data() + text.size() && port >= 1 && port <= 65535;
}

}  // namespace

std::optional<std::string> http_url(std::string_view text, std::string* why) {
    auto no = [&](std::string reason) -> std::optional<std::string> {
        if (why != nullptr) *why = std::move(reason);
        return std::nullopt;
    };
    std::string url(text);
    while (url.ends_with('/')) url.pop_back();
    const bool https = url.starts_with("https://");
    if (!https && !url.starts_with("http://")) {
        if (url.find("://") != std::string::npos) {
            return no(fmt::format("scheme '{}' is not http or https", url.substr(0, url.find("://"))));
        }
        return no("has no http:// in front");
    }
    const std::string_view authority = std::string_view(url).substr(https ? 8 : 7);
    if (authority.empty()) return no("has no HOST:PORT");
    if (authority.find('/') != std::string_view::npos) return no("has a path; expected http://HOST:PORT alone");
    if (authority.find_first_of(" \t\r\n,?#@") != std::string_view::npos) {
        return no("holds a character a HOST:PORT cannot");
    }
    const auto colon = authority.rfind(':');
    const auto bracket = authority.rfind(']');
    if (colon == 0) return no("has no host");
    if (colon == std::string_view::npos || (bracket != std::string_view::npos && colon < bracket)) {
        return no("has no port");
    }
    if (!valid_port(authority.substr(colon + 1))) return no("has no port from 1 to 65535");
    return url;
}

std::string host_of(std::string_view url) {
    if (const auto scheme = url.find("://"); scheme != std::string_view::npos) url = url.substr(scheme + 3);
    url = url.substr(0, url.find('/'));
    const auto colon = url.rfind(':');
    std::string_view host = colon == std::string_view::npos ? url : url.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return std::string(host);
}

std::string with_http_scheme(std::string_view text) {
    if (text.starts_with("etcd://")) return std::string(text);
    std::string out;
    bool first = true;
    for (const std::string_view entry : split(text, ',')) {
        if (!first) out += ',';
        first = false;
        if (!entry.empty() && entry.find("://") == std::string_view::npos) out += "http://";
        out += entry;
    }
    return out;
}

UrlSet parse_url_set(std::string_view text) {
    UrlSet set;
    if (text.starts_with("etcd://")) {
        auto parsed = etcd::parse_etcd_url(text, "coordinator URL",
                                           "etcd://HOST:PORT[,HOST:PORT...][/PREFIX][?OPTION=VALUE&...]", {});
        const std::string prefix = parsed.path.empty() ? std::string(kDefaultEtcdPrefix) : "/" + parsed.path;
        set.etcd = std::move(parsed.config);
        set.leader_key = prefix + "/leader";
        set.address = fmt::format("etcd://{}{}", parsed.hosts, prefix);
        return set;
    }
    if (text.empty()) {
        throw Error(Errc::invalid_argument, fmt::format("coordinator URL is empty (expected {})", kForms));
    }
    const auto entries = split(text, ',');
    for (std::size_t i = 0; i < entries.size(); ++i) {
        std::string why;
        const auto where = [&] {
            return entries.size() == 1 ? fmt::format("coordinator URL '{}'", text)
                                       : fmt::format("coordinator URL list '{}', entry {} ('{}')", text, i + 1,
                                                     entries[i]);
        };
        if (entries[i].empty()) {
            throw Error(Errc::invalid_argument,
                        fmt::format("coordinator URL list '{}': entry {} is empty (a stray ','?)", text, i + 1));
        }
        if (entries[i].starts_with("etcd://")) {
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: an etcd:// URL stands alone (list etcd's endpoints inside it: "
                                    "etcd://h1:2379,h2:2379/PREFIX)",
                                    where()));
        }
        auto url = http_url(entries[i], &why);
        if (!url) throw Error(Errc::invalid_argument, fmt::format("{} {} (expected {})", where(), why, kForms));
        for (const auto& seen : set.urls) {
            if (seen == *url) {
                throw Error(Errc::invalid_argument, fmt::format("{}: {} is listed twice", where(), *url));
            }
        }
        set.urls.push_back(std::move(*url));
    }
    for (const auto& url : set.urls) {
        if (!set.address.empty()) set.address += ',';
        set.address += url;
    }
    return set;
}

std::string store_address(std::string_view address, std::string_view job, uint64_t generation) {
    if (address.starts_with("etcd://")) {
        return fmt::format("coordinator+etcd://{}/{}/{}", address.substr(7), job, generation);
    }
    // HTTPS replicas: coordinator+https://, so the store speaks HTTPS too
    // (its TLS files come from the same environment variables).
    std::string authority;
    bool https = false;
    for (const std::string_view url : split(address, ',')) {
        if (!authority.empty()) authority += ',';
        https = https || url.starts_with("https://");
        authority += url.substr(url.find("://") == std::string_view::npos ? 0 : url.find("://") + 3);
    }
    return fmt::format("coordinator{}://{}/{}/{}", https ? "+https" : "", authority, job, generation);
}

}  // namespace cohort::coord::client
