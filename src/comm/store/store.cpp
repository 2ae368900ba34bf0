// open_store: parses a store URL and opens the backend it names; and the
// checks and message helpers the backends share (backends.hpp).
#include "comm/store/backends.hpp"
#include "comm/store/protocol.hpp"
#include "comm/transport/address.hpp"

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <boost/asio/ip/address.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <mutex>

#include <fmt/format.h>

namespace cohort {

Store::~Store() = default;

std::string Store::host() const {
    const std::string url = address();
    const auto scheme_end = url.find("://");
    if (scheme_end == std::string::npos) return "";
    std::string authority = url.substr(scheme_end + 3);
    authority = authority.substr(0, authority.find('/'));
    if (const auto at = authority.rfind('@'); at != std::string::npos) authority.erase(0, at + 1);
    std::string host, port;
    if (!comm::split_host_port(authority, host, port)) return "";
    return host;
}

namespace detail {

void check_key(std::string_view address, std::string_view key) {
    if (key.empty()) throw Error(Errc::invalid_argument, fmt::format("store {}: empty key", address));
    if (key.size() > store_protocol::kMaxKey) {
        throw Error(Errc::invalid_argument, fmt::format("store {}: key {} is {} bytes; keys are at most {} bytes",
                                                        address, quote(key), key.size(), store_protocol::kMaxKey));
    }
}

void check_value(std::string_view address, std::string_view key, std::string_view value) {
    if (value.size() > store_protocol::kMaxValue) {
        throw Error(Errc::invalid_argument,
                    fmt::format("store {}: value for key {} is {} bytes; values are at most 16 MiB", address,
                                quote(key), value.size()));
    }
}

std::optional<int64_t> parse_stored_integer(std::string_view text) {
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return v;
}

std::string format_duration(std::chrono::milliseconds d) {
    const auto ms = d.count();
    if (ms < 1000) return fmt::format("{} ms", ms);
    if (ms % 1000 == 0) return fmt::format("{} s", ms / 1000);
    return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000.0);
}

std::string lowercase_first(std::string text) {
    if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
    return text;
}

namespace {

[[noreturn]] void bad_url(std::string_view url, std::string_view what) {
    throw Error(Errc::invalid_argument, fmt::format("store URL '{}': {}", url, what));
}

std::shared_ptr<Store> open_tcp_url(std::string_view url, std::string_view rest, const StoreOptions& options) {
    std::string host;
    std::string_view after;
    if (rest.starts_with('[')) {
        const auto close = rest.find(']');
        if (close == std::string_view::npos) bad_url(url, "'[' opens an IPv6 address that no ']' closes");
        host = std::string(rest.substr(1, close - 1));
        boost::system::error_code ec;
        boost::asio::ip::make_address_v6(host, ec);
        if (ec) bad_url(url, fmt::format("'{}' is not an IPv6 address", host));
        after = rest.substr(close + 1);
    } else {
        const auto colon = rest.find(':');
        host = std::string(rest.substr(0, colon));
        if (colon == std::string_view::npos) bad_url(url, "no port (expected tcp://HOST:PORT)");
        if (host.find_first_of("/[]") != std::string::npos) {
            bad_url(url, fmt::format("'{}' is not a host name or address", host));
        }
        after = rest.substr(colon);
        if (after.find(':', 1) != std::string_view::npos) {
            bad_url(url, "too many ':' (write an IPv6 address in brackets: tcp://[::1]:29500)");
        }
    }
    if (host.empty()) bad_url(url, "no host (expected tcp://HOST:PORT)");
    if (!after.starts_with(':') || after.size() == 1) bad_url(url, "no port (expected tcp://HOST:PORT)");
    const std::string_view digits = after.substr(1);
    unsigned port = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc() || digits.front() == '+' || end == digits.data()) {
        bad_url(url, fmt::format("port '{}' is not a number", digits));
    }
    if (end != digits.data() + digits.size()) {
        bad_url(url,
                fmt::format("unexpected '{}' after the port", std::string_view(end, digits.data() + digits.size())));
    }
    if (port > 65535) bad_url(url, fmt::format("port {} is past 65535", port));
    if (port == 0 && !options.host) bad_url(url, "port 0 can only be hosted (StoreOptions::host), not reached");
    return open_tcp_store(std::move(host), static_cast<uint16_t>(port), options);
}

std::shared_ptr<Store> open_file_url(std::string_view url, std::string_view rest, const StoreOptions& options) {
    // file:///DIR: an empty authority, then an absolute path.
    if (rest.empty()) bad_url(url, "no folder (expected file:///ABSOLUTE/DIR)");
    if (!rest.starts_with('/')) {
        const auto slash = rest.find('/');
        bad_url(url, fmt::format("file URLs take no host ('{}'); write file:///ABSOLUTE/DIR", rest.substr(0, slash)));
    }
    std::string path;
    for (std::size_t i = 0; i < rest.size(); ++i) {
        if (rest[i] != '%') {
            path += rest[i];
            continue;
        }
        unsigned byte = 0;
        const char* first = rest.data() + i + 1;
        if (i + 2 >= rest.size() || std::from_chars(first, first + 2, byte, 16).ptr != first + 2) {
            bad_url(url, "'%' is not followed by two hex digits");
        }
        path += static_cast<char>(byte);
        i += 2;
    }
    if (path.find('\0') != std::string::npos) bad_url(url, "the path holds a NUL byte");
    if (path.find_first_not_of('/') == std::string::npos) bad_url(url, "the path names no folder");
    return open_file_store(std::filesystem::path(path), options);
}

// The schemes registered by the layers above, by name. A function's static,
// so that registrations made while the library loads find it constructed.
struct SchemeRegistry {
    std::mutex mutex;
    std::map<std::string, StoreOpener, std::less<>> openers;
};

SchemeRegistry& schemes() {
    static SchemeRegistry registry;
    return registry;
}

}  // namespace

}  // namespace detail

void register_store_scheme(std::string scheme, StoreOpener opener) {
    if (scheme.empty() || scheme.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789+-.") != std::string::npos) {
        throw Error(Errc::invalid_argument,
                    fmt::format("register_store_scheme: '{}' is not a scheme (lowercase letters, digits, '+', '-', "
                                "'.')",
                                scheme));
    }
    if (scheme == "tcp" || scheme == "file") {
        throw Error(Errc::invalid_argument,
                    fmt::format("register_store_scheme: {}:// is built in and cannot be replaced", scheme));
    }
    if (!opener) throw Error(Errc::invalid_argument, fmt::format("register_store_scheme: {}: no opener", scheme));
    auto& registry = detail::schemes();
    std::lock_guard lock(registry.mutex);
    registry.openers[std::move(scheme)] = std::move(opener);
}

std::shared_ptr<Store> open_store(std::string_view url, const StoreOptions& options) {
    if (options.timeout <= std::chrono::milliseconds::zero()) {
        throw Error(Errc::invalid_argument,
                    fmt::format("store URL '{}': StoreOptions::timeout must be positive, not {} ms", url,
                                options.timeout.count()));
    }
    const auto sep = url.find("://");
    if (sep == std::string_view::npos) {
        throw Error(Errc::invalid_argument,
                    fmt::format("store URL '{}' has no scheme; expected tcp://HOST:PORT, file:///DIR or "
                                "coordinator://HOST:PORT/JOB/GENERATION",
                                url));
    }
    const std::string_view scheme = url.substr(0, sep);
    const std::string_view rest = url.substr(sep + 3);
    if (scheme == "tcp") return detail::open_tcp_url(url, rest, options);
    if (scheme == "file") return detail::open_file_url(url, rest, options);
    StoreOpener opener;
    std::string known = "tcp://, file://";
    {
        auto& registry = detail::schemes();
        std::lock_guard lock(registry.mutex);
        if (const auto it = registry.openers.find(scheme); it != registry.openers.end()) opener = it->second;
        for (const auto& [name, unused] : registry.openers) known += fmt::format(", {}://", name);
    }
    if (opener) return opener(url, rest, options);
    throw Error(Errc::invalid_argument,
                fmt::format("store URL '{}': unknown scheme '{}' (expected {})", url, scheme, known));
}

}  // namespace cohort
