// Dialling, accepting and handshakes, as coroutines on a private io_context;
// the finished sockets move to the engine's io_context.
#include "comm/transport/mesh.hpp"

#include "comm/transport/direct_proof.hpp"
#include "comm/transport/handshake.hpp"
#include "comm/transport/link.hpp"
#include "core/cloexec.hpp"
#include "core/local_socket.hpp"
#include "core/text.hpp"

#include <cohort/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <fmt/format.h>

#include <sys/socket.h>
#include <cerrno>
#include <cstring>
#include <map>

namespace cohort::comm {
namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using local_socket = asio::local::stream_protocol::socket;
using boost::system::error_code;

namespace {

constexpr uint32_t kProofMagic = 0x50484F43;  // "COHP"
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::string endpoint_text(const tcp::endpoint& ep) {
    if (ep.address().is_v6()) return fmt::format("[{}]:{}", ep.address().to_string(), ep.port());
    return fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

// An end of a connection for connection_key(): an IPv4 address seen
// through an IPv6 socket is written as IPv4, as the other end sees it.
std::string key_text(const tcp::endpoint& ep) {
    if (ep.address().is_v6() && ep.address().to_v6().is_v4_mapped())
        return endpoint_text(
            tcp::endpoint(asio::ip::make_address_v4(asio::ip::v4_mapped, ep.address().to_v6()), ep.port()));
    return endpoint_text(ep);
}

uint32_t magic_of(const std::array<unsigned char, 4>& b) {
    return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}

// Thrown for errors worth another dial.
struct Transient : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Thrown when TLS refused the peer or its certificate, or the peer refused
// ours: another dial would meet the same certificates.
struct TlsRefused : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::string explain(Link& s, const error_code& ec) { return s.explain(ec); }
std::string explain(local_socket&, const error_code& ec) {
    return ec == asio::error::eof ? "the peer closed the connection" : ec.message();
}

template <typename Stream>
[[noreturn]] void failed(Stream& s, const error_code& ec) {
    if (Link::is_tls_failure(ec)) throw TlsRefused(explain(s, ec));
    throw Transient(explain(s, ec));
}

template <typename Stream>
awaitable<void> read_exact(Stream& s, void* data, std::size_t n) {
    auto [ec, got] = co_await asio::async_read(s, asio::buffer(data, n), use_tuple);
    (void)got;
    if (ec) failed(s, ec);
}

template <typename Stream>
awaitable<void> write_all(Stream& s, const void* data, std::size_t n) {
    auto [ec, put] = co_await asio::async_write(s, asio::buffer(data, n), use_tuple);
    (void)put;
    if (ec) failed(s, ec);
}

// After a failed TLS handshake: OpenSSL queued its alert, but closing a
// socket with the peer's bytes unread sends a reset, which can reach the
// peer first and read as a broken connection, worth another dial. So stop
// sending, and wait (a second at most) for the peer to read the alert and
// close.
awaitable<void> linger(tcp::socket& s) {
    error_code ec;
    s.shutdown(tcp::socket::shutdown_send, ec);
    auto alive = std::make_shared<bool>(true);
    asio::steady_timer timer(s.get_executor(), std::chrono::seconds(1));
    timer.async_wait([&s, alive](const error_code& e) {
        error_code ignored;
        if (!e && *alive) s.cancel(ignored);
    });
    std::array<char, 4096> sink{};
    for (int reads = 0; reads < 256; ++reads) {
        auto [e, n] = co_await s.async_read_some(asio::buffer(sink), use_tuple);
        (void)n;
        if (e) break;
    }
    *alive = false;
    timer.cancel();
}

// Whether the first bytes waiting on a new connection are a cohort hello
// in clear: a plain rank dialling a TLS one. Looks without taking them.
awaitable<bool> plain_hello_waits(tcp::socket& s, std::chrono::steady_clock::time_point deadline) {
    auto executor = co_await asio::this_coro::executor;
    for (int tries = 0; tries < 200 && std::chrono::steady_clock::now() < deadline; ++tries) {
        auto [ec] = co_await s.async_wait(tcp::socket::wait_read, use_tuple);
        if (ec) co_return false;
        std::array<unsigned char, 4> first{};
        const ssize_t n = ::recv(s.native_handle(), first.data(), first.size(), MSG_PEEK | MSG_DONTWAIT);
        if (n == 4) co_return looks_like_hello(first.data());
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) co_return false;
        asio::steady_timer pause(executor, std::chrono::milliseconds(5));  // the rest of 4 bytes is on its way
        co_await pause.async_wait(use_tuple);
    }
    co_return false;
}

// The TLS handshake of a new connection, when TLS is on: the session, or
// null for plain TCP. Throws TlsRefused or Transient.
awaitable<std::unique_ptr<TlsSession>> secure(const MeshOptions& options, tcp::socket& s, bool server) {
    if (!options.tls) co_return nullptr;
    error_code ec;
    s.non_blocking(true, ec);  // OpenSSL reads and writes the descriptor itself: it must never block
    auto session = std::make_unique<TlsSession>(options.tls, s.native_handle(), server);
    Link link(s, session.get());
    std::tie(ec) = co_await link.async_handshake(use_tuple);
    if (ec) failed(link, ec);
    co_return session;
}

awaitable<std::string> read_refusal_text(Link& s) {
    std::array<unsigned char, 2> length{};
    co_await read_exact(s, length.data(), 2);
    const std::size_t n = length[0] | std::size_t{length[1]} << 8;
    std::string text(n, '\0');
    co_await read_exact(s, text.data(), text.size());
    co_return cohort::detail::escape_bytes(text, text.size());  // the peer's bytes, for a message
}

awaitable<Hello> read_hello(Link& s, const std::array<unsigned char, 4>& magic) {
    std::array<unsigned char, kHelloFixedBytes> fixed{};
    std::copy(magic.begin(), magic.end(), fixed.begin());
    co_await read_exact(s, fixed.data() + 4, fixed.size() - 4);
    Hello hello;
    const std::size_t job_length = decode_hello_fixed(fixed.data(), hello);
    hello.job_id.assign(job_length, '\0');
    co_await read_exact(s, hello.job_id.data(), job_length);
    co_return hello;
}

// What this rank's local socket learnt about one connection: the process
// the kernel says claimed it, and why it may not be read ("" if it may).
struct Verdict {
    pid_t pid = 0;
    std::string why;
};

// Direct copies are off under TLS: docs/collectives.md says why.
bool direct_wanted(const MeshOptions& options) { return options.direct_copy && !options.tls; }

struct MeshState {
    const MeshOptions& options;
    Hello self;
    std::vector<std::unique_ptr<tcp::socket>> sockets;  // by rank
    std::vector<std::unique_ptr<TlsSession>> sessions;  // by rank, under TLS
    std::vector<std::string> endpoints;                 // by rank, for peers
    std::vector<Hello> hellos;                          // by rank
    std::vector<bool> direct;                           // by rank
    std::vector<pid_t> pids;                            // by rank: proven, for direct copies
    std::vector<std::string> direct_why;                // by rank: why no direct copies
    std::map<std::string, Verdict> claims;              // by connection_key, as this rank sees it
    std::map<int, std::string> dial_errors;             // last error per lower rank
    std::vector<std::string> refused;                   // connections this rank turned away
    std::string fatal;                                  // a refusal that will not go away
    Errc fatal_code = Errc::ok;
    int missing = 0;
};

// One claim on this rank's local socket: judged, recorded, answered with
// one byte so that the claimant knows it counted before it says so on TCP.
awaitable<void> serve_claim(MeshState& st, local_socket s) {
    try {
        std::array<unsigned char, kClaimFixedBytes> fixed{};
        co_await read_exact(s, fixed.data(), fixed.size());
        DirectClaim claim;
        claim.connection.resize(decode_claim_fixed(fixed.data(), claim));
        co_await read_exact(s, claim.connection.data(), claim.connection.size());
        Verdict v;
        const auto who = cohort::detail::peer_credentials(s.native_handle());
        v.pid = who ? who->pid : 0;
        v.why = judge_claim(who, claim, st.self.nonce);
        auto [at, fresh] = st.claims.try_emplace(claim.connection, v);
        // Two processes claiming one connection: one of them lies, and this
        // rank cannot tell which, so it reads neither.
        if (!fresh && at->second.pid != v.pid)
            at->second.why = fmt::format("pids {} and {} both claimed the connection", at->second.pid, v.pid);
        const unsigned char done = 1;
        co_await write_all(s, &done, 1);
    } catch (const std::exception&) {
        // A claim cut short proves nothing; the connection it named finds no verdict.
    }
}

awaitable<void> serve_claims(MeshState& st, asio::local::stream_protocol::acceptor& acceptor) {
    for (;;) {
        auto [ec] = co_await acceptor.async_wait(asio::socket_base::wait_read, use_tuple);
        if (ec == asio::error::operation_aborted) co_return;
        if (ec) continue;
        for (;;) {
            const int fd = ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) break;
            local_socket s(acceptor.get_executor());
            s.assign(asio::local::stream_protocol(), fd, ec);
            if (ec) {
                ::close(fd);
                continue;
            }
            asio::co_spawn(acceptor.get_executor(), serve_claim(st, std::move(s)), asio::detached);
        }
    }
}

// Claims the TCP connection `s` on `peer`'s local socket; returns why that
// failed, or "".
awaitable<std::string> claim(const Hello& peer, int rank, tcp::socket& s) {
    error_code ec;
    const auto local = s.local_endpoint(ec);
    const auto remote = s.remote_endpoint(ec);
    if (ec) co_return fmt::format("the connection to rank {} has no address: {}", rank, ec.message());
    const std::string connection = connection_key(key_text(remote), key_text(local));  // as the peer sees it
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) co_return fmt::format("cannot make a local socket: {}", std::strerror(errno));
    local_socket u(co_await asio::this_coro::executor);
    u.assign(asio::local::stream_protocol(), fd, ec);
    if (ec) {
        ::close(fd);
        co_return fmt::format("cannot use a local socket: {}", ec.message());
    }
    std::string name(1, '\0');  // abstract
    name += peer.direct_socket;
    std::tie(ec) = co_await u.async_connect(asio::local::stream_protocol::endpoint(name), use_tuple);
    if (ec)
        co_return fmt::format(
            "cannot reach rank {}'s local socket @{}: {} (ranks in different network namespaces "
            "cannot prove who they are to each other)",
            rank, peer.direct_socket, ec.message());
    try {
        const auto bytes = encode_claim(claim_for(peer.nonce, connection));
        co_await write_all(u, bytes.data(), bytes.size());
        unsigned char done = 0;
        co_await read_exact(u, &done, 1);
    } catch (const Transient& e) {
        co_return fmt::format("rank {}'s local socket @{}: {}", rank, peer.direct_socket, e.what());
    }
    co_return "";
}

struct DirectAgreement {
    bool direct = false;
    pid_t pid = 0;    // proven, when direct
    std::string why;  // when not direct
};

// Each side proves to the other which process it is, then both say whether
// they may read the other's memory; direct copies are used only when both
// may.
awaitable<DirectAgreement> agree_direct(MeshState& st, Link& link, const Hello& peer, int rank) {
    DirectAgreement agreed;
    tcp::socket& s = link.socket();
    const bool enabled = direct_wanted(st.options) && !st.self.direct_socket.empty();
    const bool same_boot = st.self.boot != 0 && peer.boot == st.self.boot;
    // Only a cohort claim socket: the name must not send claims to another service.
    const bool offered = peer.direct_socket.rfind(kDirectSocketPrefix, 0) == 0;
    std::string claimed;  // why this rank's claim failed
    if (enabled && same_boot && offered) claimed = co_await claim(peer, rank, s);
    // Both claims have been answered once each side has said so here.
    std::array<unsigned char, 1> mine{1}, theirs{};
    co_await write_all(link, mine.data(), 1);
    co_await read_exact(link, theirs.data(), 1);
    std::string why;
    if (!st.options.direct_copy)
        why = "direct copies are off on this rank (direct_copy option or COHORT_DIRECT_COPY=0)";
    else if (st.options.tls)
        why = "direct copies are off under TLS (docs/collectives.md says why)";
    else if (st.self.direct_socket.empty())
        why = "this rank could not listen on a local socket";
    else if (!same_boot)
        why = fmt::format("rank {} runs on another machine (its boot id differs, or one is unknown)", rank);
    else if (!offered)
        why = fmt::format("direct copies are off on rank {}", rank);
    else {
        error_code ec;
        const auto local = s.local_endpoint(ec);
        const auto remote = s.remote_endpoint(ec);
        const auto found = ec ? st.claims.end() : st.claims.find(connection_key(key_text(local), key_text(remote)));
        if (found == st.claims.end())
            why = fmt::format(
                "rank {} (pid {} by its word) did not prove which process holds its end of the "
                "connection on this rank's local socket",
                rank, peer.pid);
        else if (!found->second.why.empty())
            why = fmt::format("rank {}: {}", rank, found->second.why);
        else
            agreed.pid = found->second.pid;
    }
    mine[0] = why.empty() ? 1 : 0;
    co_await write_all(link, mine.data(), 1);
    co_await read_exact(link, theirs.data(), 1);
    if (why.empty() && theirs[0] != 1)
        why = fmt::format("rank {} may not read this rank's memory{}", rank, claimed.empty() ? "" : ": " + claimed);
    agreed.direct = why.empty();
    agreed.why = why;
    co_return agreed;
}

awaitable<void> accept_one(MeshState& st, tcp::socket socket) {
    const std::string from = [&] {
        error_code ec;
        const auto ep = socket.remote_endpoint(ec);
        return ec ? std::string("?") : endpoint_text(ep);
    }();
    std::unique_ptr<TlsSession> session;
    Link s(socket, nullptr);
    auto refuse = [&](std::string why) -> awaitable<void> {
        st.refused.push_back(fmt::format("from {}: {}", from, why));
        const auto bytes = encode_refusal(why);
        co_await asio::async_write(s, asio::buffer(bytes), use_tuple);
    };
    try {
        // A plain rank dialling this TLS rank: its hello is refused in
        // words it reads, rather than by a handshake it does not speak.
        if (st.options.tls && co_await plain_hello_waits(socket, st.options.deadline)) {
            std::array<unsigned char, 4> magic{};
            co_await read_exact(s, magic.data(), 4);
            co_await read_hello(s, magic);  // all of it, so that closing sends no reset before the refusal
            co_await refuse(kTlsMeetsPlain);
            co_return;
        }
        std::string failed_handshake;
        try {
            session = co_await secure(st.options, socket, true);
        } catch (const std::exception& e) {
            std::string_view why = e.what();
            if (why.rfind("TLS: ", 0) == 0) why.remove_prefix(5);
            failed_handshake = fmt::format("from {}: TLS handshake failed: {}", from, why);
        }
        if (!failed_handshake.empty()) {
            // OpenSSL sent the peer its alert; nothing more to say to it.
            st.refused.push_back(std::move(failed_handshake));
            co_await linger(socket);
            co_return;
        }
        s = Link(socket, session.get());
        std::array<unsigned char, 4> magic{};
        co_await read_exact(s, magic.data(), 4);
        if (!session && looks_like_tls(magic.data())) {
            // A TLS client reached this plain rank: the refusal makes its
            // handshake fail at once (it is not TLS) rather than wait. Its
            // first record is read first, so that closing sends no reset
            // that could overtake the refusal.
            std::array<unsigned char, 1> low{};
            co_await read_exact(s, low.data(), 1);
            std::vector<unsigned char> record(std::size_t{magic[3]} << 8 | low[0]);
            co_await read_exact(s, record.data(), record.size());
            co_await refuse(kPlainMeetsTls);
            co_return;
        }
        Hello peer = co_await read_hello(s, magic);
        std::string why = refusal(st.self, peer, -1);
        if (why.empty() && peer.rank < st.self.rank)
            why = fmt::format("rank {} should accept from rank {}, not dial it", peer.rank, st.self.rank);
        if (why.empty() && st.sockets[peer.rank])
            why = fmt::format("rank {} is already connected", peer.rank);
        if (!why.empty()) {
            co_await refuse(why);
            co_return;
        }
        const auto hello = encode_hello(st.self);
        co_await write_all(s, hello.data(), hello.size());
        if (st.self.has_secret) {
            std::array<unsigned char, kMacBytes> theirs{};
            co_await read_exact(s, theirs.data(), theirs.size());
            if (!proofs_equal(theirs, proof(st.options.secret, peer, st.self))) {
                co_await refuse(fmt::format("rank {} does not know the shared secret", peer.rank));
                co_return;
            }
            std::array<unsigned char, 4 + kMacBytes> reply{};
            const uint32_t m = kProofMagic;
            for (int i = 0; i < 4; ++i) reply[i] = static_cast<unsigned char>(m >> (8 * i));
            const auto mine = proof(st.options.secret, st.self, peer);
            std::copy(mine.begin(), mine.end(), reply.begin() + 4);
            co_await write_all(s, reply.data(), reply.size());
        }
        const auto agreed = co_await agree_direct(st, s, peer, static_cast<int>(peer.rank));
        if (st.sockets[peer.rank]) co_return;  // a duplicate raced us
        st.direct[peer.rank] = agreed.direct;
        st.pids[peer.rank] = agreed.pid;
        st.direct_why[peer.rank] = agreed.why;
        st.hellos[peer.rank] = peer;
        st.endpoints[peer.rank] = from;
        st.sockets[peer.rank] =
            std::make_unique<tcp::socket>(std::move(socket));  // the session's descriptor moves with it
        st.sessions[peer.rank] = std::move(session);
        --st.missing;
    } catch (const std::exception& e) {
        st.refused.push_back(fmt::format("from {}: {}", from, e.what()));
    }
}

awaitable<void> accept_loop(MeshState& st, tcp::acceptor& acceptor) {
    for (;;) {
        // Wait, then accept4 with SOCK_CLOEXEC (core/cloexec.hpp).
        auto [ec] = co_await acceptor.async_wait(tcp::acceptor::wait_read, use_tuple);
        if (ec == asio::error::operation_aborted) co_return;
        if (ec) continue;
        tcp::socket s(acceptor.get_executor());
        if (!cohort::detail::accept_cloexec(acceptor, s, ec) || ec) continue;
        tune_socket(s, st.options.socket_buffer);
        asio::co_spawn(acceptor.get_executor(), accept_one(st, std::move(s)), asio::detached);
    }
}

awaitable<void> dial(MeshState& st, int rank, tcp::endpoint ep) {
    auto executor = co_await asio::this_coro::executor;
    auto backoff = std::chrono::milliseconds(5);
    for (;;) {
        tcp::socket s(executor);
        error_code ec;
        cohort::detail::open_cloexec(s, ep.protocol(), ec);
        if (!ec) tune_socket(s, st.options.socket_buffer);
        std::tie(ec) = co_await s.async_connect(ep, use_tuple);
        try {
            if (ec) throw Transient(ec.message());
            auto session = co_await secure(st.options, s, false);
            Link link(s, session.get());
            const auto hello = encode_hello(st.self);
            co_await write_all(link, hello.data(), hello.size());
            std::array<unsigned char, 4> magic{};
            co_await read_exact(link, magic.data(), 4);
            if (magic_of(magic) == kRefuseMagic) {
                st.fatal = fmt::format("rank {} at {} refused the connection: {}", rank, endpoint_text(ep),
                                       co_await read_refusal_text(link));
                const bool proof = st.fatal.find("secret") != std::string::npos ||
                                   st.fatal.find("TLS") != std::string::npos;  // a refusal of who we are
                st.fatal_code = proof ? Errc::permission_denied : Errc::unavailable;
                co_return;
            }
            Hello peer = co_await read_hello(link, magic);
            if (const std::string why = refusal(st.self, peer, rank); !why.empty()) {
                st.fatal = fmt::format("rank {} at {} does not match: {}", rank, endpoint_text(ep), why);
                st.fatal_code = Errc::unavailable;
                co_return;
            }
            if (st.self.has_secret) {
                const auto mine = proof(st.options.secret, st.self, peer);
                co_await write_all(link, mine.data(), mine.size());
                co_await read_exact(link, magic.data(), 4);
                if (magic_of(magic) == kRefuseMagic) {
                    st.fatal = fmt::format("rank {} at {} refused the connection: {}", rank, endpoint_text(ep),
                                           co_await read_refusal_text(link));
                    st.fatal_code = Errc::permission_denied;
                    co_return;
                }
                std::array<unsigned char, kMacBytes> theirs{};
                co_await read_exact(link, theirs.data(), theirs.size());
                if (magic_of(magic) != kProofMagic || !proofs_equal(theirs, proof(st.options.secret, peer, st.self))) {
                    st.fatal = fmt::format("rank {} at {} does not know the shared secret", rank, endpoint_text(ep));
                    st.fatal_code = Errc::permission_denied;
                    co_return;
                }
            }
            const auto agreed = co_await agree_direct(st, link, peer, rank);
            st.direct[rank] = agreed.direct;
            st.pids[rank] = agreed.pid;
            st.direct_why[rank] = agreed.why;
            st.hellos[rank] = peer;
            st.endpoints[rank] = endpoint_text(ep);
            st.sockets[rank] = std::make_unique<tcp::socket>(std::move(s));  // the session's descriptor moves with it
            st.sessions[rank] = std::move(session);
            --st.missing;
            co_return;
        } catch (const TlsRefused& e) {
            st.fatal = fmt::format("rank {} at {}: {}", rank, endpoint_text(ep), e.what());
            st.fatal_code = Errc::permission_denied;
            co_return;
        } catch (const Transient& e) {
            st.dial_errors[rank] = fmt::format("rank {} at {}: {}", rank, endpoint_text(ep), e.what());
        } catch (const Error& e) {
            st.fatal = fmt::format("rank {} at {}: {}", rank, endpoint_text(ep), e.what());
            st.fatal_code = e.code();
            co_return;
        }
        if (std::chrono::steady_clock::now() + backoff >= st.options.deadline) co_return;
        asio::steady_timer timer(executor, backoff);
        co_await timer.async_wait(use_tuple);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
    }
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
    std::string text;
    for (const auto& p : parts) text += (text.empty() ? "" : sep) + p;
    return text;
}

}  // namespace

void tune_socket(tcp::socket& socket, std::size_t buffer_bytes) {
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    socket.set_option(asio::socket_base::keep_alive(true), ignored);
    if (buffer_bytes > 0) {
        socket.set_option(asio::socket_base::send_buffer_size(static_cast<int>(buffer_bytes)), ignored);
        socket.set_option(asio::socket_base::receive_buffer_size(static_cast<int>(buffer_bytes)), ignored);
    }
}

std::vector<std::unique_ptr<Peer>> connect_mesh(asio::io_context& io, tcp::acceptor& acceptor,
                                                const std::vector<tcp::endpoint>& endpoints,
                                                const MeshOptions& options) {
    std::vector<std::unique_ptr<Peer>> peers(options.size);
    if (options.size == 1) return peers;
    asio::io_context setup;
    tcp::acceptor local(setup);
    const auto protocol = acceptor.local_endpoint().protocol();
    local.assign(protocol, acceptor.release());
    MeshState st{options, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, Errc::ok, options.size - 1};
    describe_process(st.self);
    asio::local::stream_protocol::acceptor claims(setup);
    if (direct_wanted(options)) {
        allow_peer_reads();
        const std::string name = cohort::detail::random_abstract_name(kDirectSocketPrefix);
        const int fd = cohort::detail::listen_abstract(name, asio::socket_base::max_listen_connections);
        error_code ec;
        if (fd >= 0) claims.assign(asio::local::stream_protocol(), fd, ec);
        if (fd >= 0 && !ec) {
            st.self.direct_socket = name;
            asio::co_spawn(setup, serve_claims(st, claims), asio::detached);
        } else if (fd >= 0) {
            ::close(fd);
        }
    }
    st.hellos.resize(options.size);
    st.direct.resize(options.size, false);
    st.pids.resize(options.size, 0);
    st.direct_why.resize(options.size);
    st.self.has_secret = !options.secret.empty();
    st.self.rank = static_cast<uint32_t>(options.rank);
    st.self.size = static_cast<uint32_t>(options.size);
    st.self.generation = options.generation;
    st.self.job_id = options.job_id;
    st.self.nonce = fresh_nonce();
    st.sockets.resize(options.size);
    st.sessions.resize(options.size);
    st.endpoints.resize(options.size);
    if (options.rank + 1 < options.size) asio::co_spawn(setup, accept_loop(st, local), asio::detached);
    for (int r = 0; r < options.rank; ++r) asio::co_spawn(setup, dial(st, r, endpoints[r]), asio::detached);
    while (st.missing > 0 && st.fatal.empty()) {
        if (setup.run_one_until(options.deadline) == 0) break;
    }
    error_code ignored;
    const std::string listening = endpoint_text(local.local_endpoint(ignored));
    local.close(ignored);
    claims.close(ignored);
    if (!st.fatal.empty()) throw Error(st.fatal_code, fmt::format("rank {}: {}", options.rank, st.fatal));
    if (st.missing > 0) {
        std::vector<std::string> lower, higher, details;
        for (int r = 0; r < options.size; ++r) {
            if (r == options.rank || st.sockets[r]) continue;
            (r < options.rank ? lower : higher).push_back(std::to_string(r));
            if (r < options.rank && st.dial_errors.count(r)) details.push_back(st.dial_errors[r]);
        }
        std::string message = fmt::format("rank {} could not connect to every peer in time:", options.rank);
        if (!lower.empty())
            message += fmt::format(" dialling rank(s) {} failed ({});", join(lower, ", "),
                                   details.empty() ? std::string("no answer") : join(details, "; "));
        if (!higher.empty())
            message += fmt::format(" rank(s) {} never connected to {};", join(higher, ", "), listening);
        if (!st.refused.empty()) message += " refused: " + join(st.refused, "; ") + ";";
        message += " check that every rank runs with the same store, job id and generation, and that the"
                   " addresses are reachable (COHORT_SOCKET_IFNAME picks the interface)";
        throw Error(Errc::timeout, message);
    }
    for (int r = 0; r < options.size; ++r) {
        if (!st.sockets[r]) continue;
        const auto socket_protocol = st.sockets[r]->local_endpoint().protocol();
        tcp::socket moved(io);
        moved.assign(socket_protocol, st.sockets[r]->release());
        // OpenSSL reads the descriptor itself: it must stay non-blocking.
        if (st.sessions[r]) moved.non_blocking(true);
        peers[r] = std::make_unique<Peer>(r, std::move(moved), std::move(st.sessions[r]));
        peers[r]->endpoint = st.endpoints[r];
        peers[r]->direct = st.direct[r];
        peers[r]->pid = st.pids[r];
        peers[r]->direct_unavailable = st.direct_why[r];
    }
    return peers;
}

}  // namespace cohort::comm
