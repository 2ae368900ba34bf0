// Address choice: explicit, by interface name, or by route.
#include "comm/transport/address.hpp"
#include "core/cloexec.hpp"

#include <cohort/error.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>

#include <fmt/format.h>

#include <cstdlib>
#include <optional>
#include <ifaddrs.h>
#include <net/if.h>
#include <set>

namespace cohort::comm {
namespace asio = boost::asio;
namespace ip = boost::asio::ip;

namespace {

ip::address resolve(const std::string& host, const std::string& what) {
    boost::system::error_code ec;
    const auto direct = ip::make_address(host, ec);
    if (!ec) return direct;
    asio::io_context io;
    ip::tcp::resolver resolver(io);
    const auto results = resolver.resolve(host, "", ec);
    if (ec || results.empty())
        throw Error(Errc::invalid_argument, fmt::format("{}: cannot resolve host '{}': {}", what, host,
                                                        ec ? ec.message() : "no addresses"));
    return results.begin()->endpoint().address();
}

ListenAddress from_interface(const std::string& name, const std::string& source) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) throw Error(Errc::unavailable, "cannot list the network interfaces (getifaddrs failed)");
    std::set<std::string> names;
    std::optional<ip::address> v4, v6;
    for (ifaddrs* it = list; it; it = it->ifa_next) {
        if (!it->ifa_addr) continue;
        names.insert(it->ifa_name);
        if (name != it->ifa_name || !(it->ifa_flags & IFF_UP)) continue;
        if (it->ifa_addr->sa_family == AF_INET && !v4) {
            const auto* in = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
            v4 = ip::address_v4(ntohl(in->sin_addr.s_addr));
        } else if (it->ifa_addr->sa_family == AF_INET6 && !v6) {
            const auto* in6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
            ip::address_v6::bytes_type bytes;
            std::copy(std::begin(in6->sin6_addr.s6_addr), std::end(in6->sin6_addr.s6_addr), bytes.begin());
            const ip::address_v6 a(bytes, in6->sin6_scope_id);
            if (!a.is_link_local()) v6 = a;
        }
    }
    freeifaddrs(list);
    if (v4) return {*v4, 0, source};
    if (v6) return {*v6, 0, source};
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw Error(Errc::invalid_argument, fmt::format("{}: no interface '{}' with an address that is up; interfaces: {}",
                                                    source, name, known));
}

// The local address the kernel would use to reach `target`: connecting a
// UDP socket sends nothing, it only picks the route.
std::optional<ip::address> route_to(const ip::address& target) {
    asio::io_context io;
    ip::udp::socket socket(io);
    boost::system::error_code ec;
    cohort::detail::open_cloexec(socket, target.is_v4() ? ip::udp::v4() : ip::udp::v6(), ec);
    if (!ec) socket.connect(ip::udp::endpoint(target, 9), ec);
    if (ec) return std::nullopt;
    const auto local = socket.local_endpoint(ec);
    if (ec) return std::nullopt;
    return local.address();
}

}  // namespace

bool split_host_port(const std::string& text, std::string& host, std::string& port) {
    if (!text.empty() && text[0] == '[') {
        const auto close = text.find(']');
        if (close == std::string::npos) return false;
        host = text.substr(1, close - 1);
        if (close + 1 == text.size()) {
            port.clear();
            return true;
        }
        if (text[close + 1] != ':') return false;
        port = text.substr(close + 2);
        return true;
    }
    const auto colon = text.rfind(':');
    if (colon != std::string::npos && text.find(':') == colon) {
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
    } else {
        host = text;  // a bare IPv6 address has several colons and no port
        port.clear();
    }
    return true;
}

ListenAddress choose_listen_address(const Setting& address, const Setting& ifname, const std::string& store_host) {
    const std::string& explicit_address = address.value;
    const std::string& source = address.source;
    if (!explicit_address.empty()) {
        std::string host, port;
        if (!split_host_port(explicit_address, host, port) || host.empty())
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: '{}' is not HOST, HOST:PORT or [IPV6]:PORT", source, explicit_address));
        ListenAddress out{resolve(host, source), 0, source + "=" + explicit_address};
        if (!port.empty()) {
            char* end = nullptr;
            const long value = std::strtol(port.c_str(), &end, 10);
            if (*end != '\0' || value < 0 || value > 65535)
                throw Error(Errc::invalid_argument,
                            fmt::format("{}: port '{}' in '{}' is not a number from 0 to 65535", source, port,
                                        explicit_address));
            out.port = static_cast<uint16_t>(value);
        }
        return out;
    }
    if (!ifname.value.empty()) return from_interface(ifname.value, ifname.source);
    if (!store_host.empty()) {
        boost::system::error_code ec;
        auto target = ip::make_address(store_host, ec);
        if (ec) {
            try {
                target = resolve(store_host, "store host");
            } catch (const Error&) {
                ec = make_error_code(boost::system::errc::host_unreachable);
            }
        }
        if (!ec) {
            if (target.is_loopback()) return {target, 0, "the store is on this machine"};
            if (auto local = route_to(target)) return {*local, 0, "the route to the store at " + store_host};
        }
    }
    if (auto local = route_to(ip::make_address("192.0.2.1")); local && !local->is_loopback())
        return {*local, 0, "the default route"};
    return {ip::address_v4::loopback(), 0, "no route off this machine"};
}

}  // namespace cohort::comm
