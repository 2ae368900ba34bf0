// Taking connections: each new one passes the gate (per-client cap, then
// the cap, where the longest idle connection may give up its place) or is
// refused with a short 503, a rate-limited line on stderr and a count in
// /metrics. While crowded, idle connections are closed after the shorter
// timeout. Out of descriptors, the server gives up a spare one for a moment
// to accept and close what waits, so clients hear no rather than hang.
#include "coordinator/server/session.hpp"

#include <cerrno>
#include <cstdio>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cohort {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using coord::server::Refusal;
using SteadyClock = std::chrono::steady_clock;

namespace {

// The most lines a reason prints: one per interval, the rest counted.
constexpr std::chrono::seconds kLogInterval{5};
// Out of descriptors: at most this many waiting connections are accepted
// and closed per try.
constexpr int kDropPerTry = 64;

constexpr std::string_view kRefusedReply =
    "HTTP/1.1 503 Service Unavailable\r\n"
    "Server: cohort-coordinator\r\n"
    "Content-Type: application/json\r\n"
    "Retry-After: 1\r\n"
    "Connection: close\r\n"
    "Content-Length: 96\r\n"
    "\r\n"
    "{\"error\":\"unavailable\",\"detail\":\"too many connections: the coordinator is at its limit; retry\"}\n";

}  // namespace

void Coordinator::Impl::take(tcp::socket socket) {
    error_code ec;
    const auto remote = socket.remote_endpoint(ec);
    if (ec) return;  // gone already
    std::string peer = remote.address().to_string();
    const auto at = SteadyClock::now();
    shed_idle(at);
    auto refusal = gate.admit(peer);
    if (refusal == Refusal::max_connections) {
        if (const auto idle = gate.displace()) {
            close_session(*idle);
            log_shed(at, 1,
                     fmt::format("at max_connections ({}): closed the longest idle connection to take a new one",
                                 options.max_connections));
            refusal = gate.admit(peer);
        }
    }
    if (refusal) {
        refuse(socket, *refusal, peer);
        return;
    }
    const uint64_t id = ++next_session;
    auto session = std::make_shared<HttpSession>(*this, std::move(socket), id, std::move(peer), tls.get());
    sessions.emplace(id, session);
    session->start();
    if (gate.crowded()) arm_shed();
}

void Coordinator::Impl::refuse(tcp::socket& socket, Refusal why, const std::string& peer) {
    gate.refused(why);
    if (why == Refusal::per_client) {
        log_refusal(why, fmt::format("refused a connection from {}: {} connections are open from that address, "
                                     "the limit per client (max_connections_per_client)",
                                     peer, options.max_connections_per_client));
    } else {
        log_refusal(why, fmt::format("refused a connection from {}: {} connections are open, the limit "
                                     "(max_connections), and none is idle",
                                     peer, gate.open()));
    }
    // A fresh socket's send buffer is empty: this never blocks, and what
    // does not fit is not worth waiting for.
    (void)::send(socket.native_handle(), kRefusedReply.data(), kRefusedReply.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    error_code ignored;
    socket.close(ignored);
}

bool Coordinator::Impl::close_session(uint64_t id) {
    const auto it = sessions.find(id);
    if (it == sessions.end()) return false;
    const auto session = it->second;  // close() erases the entry
    session->close();
    return true;
}

void Coordinator::Impl::shed_idle(SteadyClock::time_point at) {
    const std::vector<uint64_t> idle = gate.shed(at);
    for (const uint64_t id : idle) close_session(id);
    if (idle.empty()) return;
    log_shed(at, idle.size(),
             fmt::format("over four fifths of max_connections ({}) open: closed {} connections idle for over {} ms "
                         "(crowded_idle_timeout)",
                         options.max_connections, idle.size(), options.crowded_idle_timeout.count()));
}

void Coordinator::Impl::log_shed(SteadyClock::time_point at, std::size_t closed, std::string_view line) {
    shed_unlogged += closed;
    if (shed_logged != SteadyClock::time_point{} && at - shed_logged < kLogInterval) return;
    std::fprintf(stderr, "cohort-coordinator: %s (%llu idle connections closed early since the last such line)\n",
                 std::string(line).c_str(), static_cast<unsigned long long>(shed_unlogged));
    shed_logged = at;
    shed_unlogged = 0;
}

void Coordinator::Impl::arm_shed() {
    if (shed_armed || stopping) return;
    const auto next = gate.next_shed();
    if (!next) return;
    shed_armed = true;
    shed_timer.expires_at(std::max(*next, SteadyClock::now() + std::chrono::milliseconds(10)));
    shed_timer.async_wait([this](error_code ec) {
        shed_armed = false;
        if (ec || stopping) return;
        shed_idle(SteadyClock::now());
        if (gate.crowded()) arm_shed();
    });
}

bool Coordinator::Impl::on_accept_error(const error_code& ec) {
    const bool out_of_descriptors = ec == asio::error::no_descriptors ||
                                    (ec.category() == boost::system::system_category() && ec.value() == ENFILE);
    if (!out_of_descriptors) return false;  // a client gone before it was taken; go on after a pause
    // Idle connections give way first, and the accept loop tries again at
    // once with their descriptors free.
    const std::vector<uint64_t> idle = gate.make_room(kDropPerTry);
    std::size_t closed = 0;
    for (const uint64_t id : idle) closed += close_session(id) ? 1 : 0;
    if (closed > 0) {
        log_refusal(Refusal::descriptors,
                    fmt::format("out of file descriptors ({}) with {} connections open: closed the {} longest idle "
                                "to go on accepting; raise the open-file limit (ulimit -n) or lower max_connections",
                                ec.message(), gate.open() + idle.size(), idle.size()));
        return true;
    }
    // Nothing idle to close: the waiting connections would sit in the
    // backlog, unanswered, until their clients time out. Take each with
    // the spare descriptor's slot and close it at once.
    if (spare_fd >= 0) {
        ::close(spare_fd);
        spare_fd = -1;
    }
    int dropped = 0;
    for (; dropped < kDropPerTry; ++dropped) {
        const int fd = ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        (void)::send(fd, kRefusedReply.data(), kRefusedReply.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        ::close(fd);
        gate.refused(Refusal::descriptors);
    }
    spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    log_refusal(Refusal::descriptors,
                fmt::format("out of file descriptors ({}) with {} connections open, none idle: refused {} waiting "
                            "connections; raise the open-file limit (ulimit -n) or lower max_connections",
                            ec.message(), gate.open(), dropped));
    return false;  // pause: nothing idle to close, so descriptors come back only as requests end
}

void Coordinator::Impl::handshake_failed(const std::string& peer, const error_code& ec) {
    gate.refused(Refusal::tls_handshake);
    const bool timed_out = ec == boost::beast::error::timeout;
    log_refusal(Refusal::tls_handshake,
                timed_out ? fmt::format("TLS handshake with {}: no handshake within idle_timeout ({} ms); closed",
                                        peer, options.idle_timeout.count())
                          : fmt::format("TLS handshake with {} failed: {}; closed", peer, ec.message()));
}

void Coordinator::Impl::log_refusal(Refusal why, std::string_view line) {
    const auto i = static_cast<std::size_t>(why);
    const auto at = SteadyClock::now();
    if (refusal_logged[i] != SteadyClock::time_point{} && at - refusal_logged[i] < kLogInterval) {
        ++refusal_unlogged[i];
        return;
    }
    std::string more;
    if (refusal_unlogged[i] > 0) {
        more = fmt::format(" ({} more such lines left out since the last)", refusal_unlogged[i]);
    }
    std::fprintf(stderr, "cohort-coordinator: %s%s\n", std::string(line).c_str(), more.c_str());
    refusal_logged[i] = at;
    refusal_unlogged[i] = 0;
}

}  // namespace cohort
