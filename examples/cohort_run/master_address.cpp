#include "master_address.hpp"

#include <cohort/error.hpp>

#include <cerrno>
#include <cstring>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace cohort_run {
namespace {

namespace json = boost::json;
using cohort::Errc;
using cohort::Error;

// The local address the kernel would send from to reach `host`: connecting
// a UDP socket sends nothing, it only picks the route. IPv4 first: a
// MASTER_ADDR of "localhost" should read 127.0.0.1, not ::1.
std::optional<std::string> route_to(const std::string& host, int family) {
    addrinfo hints{};
    hints.ai_family = family;
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) return std::nullopt;
    std::optional<std::string> out;
    for (const addrinfo* a = found; a != nullptr && !out; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        sockaddr_storage local{};
        socklen_t len = sizeof local;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
            char text[INET6_ADDRSTRLEN] = {};
            const void* raw = local.ss_family == AF_INET
                                  ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                                  : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
            if (::inet_ntop(local.ss_family, raw, text, sizeof text) != nullptr) out = text;
        }
        ::close(fd);
    }
    ::freeaddrinfo(found);
    return out;
}

std::optional<std::string> route_to(const std::string& host) {
    if (auto v4 = route_to(host, AF_INET)) return v4;
    return route_to(host, AF_INET6);
}

bool wildcard(const std::string& host) {
    return host == "0.0.0.0" || host == "::" || host == "[::]";
}

}  // namespace

std::string advertised_address(const std::string& override_addr, const std::string& host) {
    if (!override_addr.empty()) return override_addr;
    // A coordinator on every address of this machine says nothing about the
    // route the others take: the default route's address is the best guess
    // (192.0.2.1 is a documentation address; nothing is sent to it).
    if (auto local = route_to(wildcard(host) ? "192.0.2.1" : host)) return *local;
    return "127.0.0.1";
}

uint16_t free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw Error(Errc::io, fmt::format("MASTER_PORT: cannot open a socket: {}", std::strerror(errno)));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof addr;
    uint16_t port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
        port = ntohs(addr.sin_port);
    const int error = errno;
    ::close(fd);
    if (port == 0) throw Error(Errc::io, fmt::format("MASTER_PORT: no free TCP port: {}", std::strerror(error)));
    return port;
}

void publish_master(cohort::CoordinatorClient& client, std::string_view job, uint64_t generation,
                    const MasterAddress& master) {
    json::object o;
    o["master_addr"] = master.addr;
    o["master_port"] = master.port;
    client.store_set(job, generation, kMasterKey, json::serialize(o));
}

std::optional<MasterAddress> read_master(cohort::CoordinatorClient& client, std::string_view job, uint64_t generation) {
    const std::optional<std::string> text = client.store_try_get(job, generation, kMasterKey);
    if (!text) return std::nullopt;
    boost::system::error_code ec;
    const json::value v = json::parse(*text, ec);
    const json::object* o = ec ? nullptr : v.if_object();
    const json::value* addr = o != nullptr ? o->if_contains("master_addr") : nullptr;
    const json::value* port = o != nullptr ? o->if_contains("master_port") : nullptr;
    if (addr == nullptr || !addr->is_string() || addr->as_string().empty() || port == nullptr || !port->is_number() ||
        port->to_number<double>() < 1 || port->to_number<double>() > 65535) {
        throw Error(Errc::parse,
                    fmt::format("job '{}' generation {}: store key '{}' holds '{}', not {{\"master_addr\", "
                                "\"master_port\"}}: is another program using that key?",
                                job, generation, kMasterKey, text->substr(0, 200)));
    }
    return MasterAddress{std::string(addr->as_string()), static_cast<uint16_t>(port->to_number<double>())};
}

}  // namespace cohort_run
