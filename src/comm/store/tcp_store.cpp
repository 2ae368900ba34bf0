// The tcp:// store's client. Each call runs its own small io_context on the
// calling thread against a deadline, so no call outlives its timeout, and
// (re)connects with backoff because rank 0 may start its server late.
#include "comm/store/backends.hpp"
#include "comm/store/protocol.hpp"
#include "core/cloexec.hpp"

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace cohort::detail {

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
namespace sp = store_protocol;

// Idle connections kept for reuse; more exist only while that many calls
// run at once (a thread parked in get() must not block a set() from another).
constexpr std::size_t kMaxIdle = 4;

struct Connection {
    asio::io_context io;
    tcp::socket socket{io};
};

// Runs `io` until `*done` or the deadline. On the deadline `cancel` aborts
// the operation and its handler is drained, so nothing refers to the
// caller's stack afterwards.
template <typename Cancel>
bool run_until(asio::io_context& io, const bool& done, Clock::time_point deadline, Cancel cancel) {
    io.restart();
    while (!done && io.run_one_until(deadline) > 0) {
    }
    if (done) return true;
    cancel();
    io.restart();
    io.run();
    return false;
}

// Whether a request whose reply was lost may be sent again: not add (it
// would count twice) nor remove (it would report the key missing).
bool resendable(sp::Command command) {
    return command != sp::Command::add && command != sp::Command::remove;
}

class TcpStore final : public Store {
public:
    TcpStore(std::string host, uint16_t port, const StoreOptions& options) : options_(options), url_host_(host) {
        error_code ec;
        const auto literal = asio::ip::make_address(host, ec);
        const std::string shown = !ec && literal.is_v6() ? fmt::format("[{}]", host) : host;
        std::optional<Error> cannot_host;
        if (options.host) {
            // A name is bound on every interface: on Debian a machine's own
            // name often resolves to 127.0.1.1, which no other machine reaches.
            const std::string bind_host = ec ? std::string() : host;
            try {
                server_ = std::make_unique<StoreServer>(bind_host, port);
                port = server_->port();
            } catch (const Error& e) {
                if (port == 0) throw;
                cannot_host = e;
            }
            // This process's own server is reached over loopback; one that
            // was there already is reached as the URL says, unless the URL
            // names no address at all.
            const bool ours = server_ != nullptr;
            if ((ours && ec) || (!ec && literal.is_unspecified())) {
                host = !ec && literal.is_v6() ? "::1" : "127.0.0.1";
            }
        }
        host_ = std::move(host);
        port_ = port;
        address_ = fmt::format("tcp://{}:{}", shown, port);
        if (cannot_host) {
            adopt(*cannot_host);
            return;
        }
        // Connect now, so a store that cannot be reached fails at open_store
        // rather than at the first call.
        checkin(connect(deadline_after(options_.timeout)));
    }

    void set(std::string_view key, std::string_view value) override {
        check_value(address_, key, value);
        call(request(sp::Command::set, key, value), {});
    }

    std::string get(std::string_view key, std::chrono::milliseconds timeout) override {
        auto q = request(sp::Command::get, key);
        q.number = clamp(timeout);
        const auto reply = call(q, timeout);
        if (reply.status == sp::Status::timeout) {
            throw Error(Errc::timeout, fmt::format("store {}: key {} not set after {}", address_, quote(key),
                                                   format_duration(timeout)));
        }
        return reply.value;
    }

    std::optional<std::string> try_get(std::string_view key) override {
        auto reply = call(request(sp::Command::try_get, key), {});
        if (reply.status == sp::Status::not_found) return std::nullopt;
        return std::move(reply.value);
    }

    int64_t add(std::string_view key, int64_t delta) override {
        auto q = request(sp::Command::add, key);
        q.number = delta;
        return call(q, {}).number;
    }

    std::string compare_and_set(std::string_view key, const std::optional<std::string>& expected,
                                std::string_view desired) override {
        if (expected) check_value(address_, key, *expected);
        check_value(address_, key, desired);
        auto q = request(sp::Command::compare_and_set, key, desired);
        q.expected = expected;
        return call(q, {}).value;
    }

    void wait(std::span<const std::string> keys, std::chrono::milliseconds timeout) override {
        if (keys.empty()) return;
        sp::Request q;
        q.command = sp::Command::wait;
        for (const auto& k : keys) check_key(address_, k);
        q.keys.assign(keys.begin(), keys.end());
        q.number = clamp(timeout);
        const auto reply = call(q, timeout);
        if (reply.status == sp::Status::timeout) {
            throw Error(Errc::timeout,
                        fmt::format("store {}: {} of {} keys not set after {}: {}", address_, reply.keys.size(),
                                    keys.size(), format_duration(timeout), quote_keys(reply.keys)));
        }
    }

    bool remove(std::string_view key) override { return call(request(sp::Command::remove, key), {}).number != 0; }

    std::string address() const override { return address_; }
    // The URL's host, even when this process hosts the store and talks to
    // it over loopback: the peers reach it there.
    std::string host() const override { return url_host_; }

private:
    sp::Request request(sp::Command command, std::string_view key, std::string_view value = {}) const {
        check_key(address_, key);
        sp::Request q;
        q.command = command;
        q.keys.emplace_back(key);
        q.value = value;
        return q;
    }

    // The port is taken. If a store already serves it (a launcher's, or
    // another communicator's in this process) this one shares it, as a
    // client would; anything else there is the hosting error.
    void adopt(const Error& cannot_host) {
        auto pooled = std::make_unique<Pooled>();
        if (try_connect(pooled->connection, deadline_after(options_.timeout))) throw cannot_host;
        checkin(std::move(pooled));
        sp::Request q;
        q.command = sp::Command::try_get;
        q.keys.emplace_back("cohort/store/probe");
        try {
            call(q, {}, false);
        } catch (const Error& e) {
            throw Error(Errc::unavailable,
                        fmt::format("{}, and what listens there is not a store ({})", cannot_host.what(), e.what()));
        }
    }

    static int64_t clamp(std::chrono::milliseconds timeout) {
        return std::clamp<int64_t>(timeout.count(), 0, sp::kMaxTimeoutMs);
    }

    // Sends one request and returns its reply. `server_wait` is how long the
    // server may hold it (get, wait); the reply may take that plus the
    // store's timeout.
    sp::Reply call(const sp::Request& q, std::chrono::milliseconds server_wait, bool resend = true) {
        std::string frame;
        try {
            frame = sp::encode_request(q);
        } catch (const sp::ProtocolError& e) {
            throw Error(Errc::invalid_argument, fmt::format("store {}: {} request too large: {}", address_,
                                                            sp::command_name(q.command), e.what()));
        }
        const auto connect_deadline = deadline_after(options_.timeout);
        const std::chrono::milliseconds reply_wait(clamp(server_wait) + clamp(options_.timeout));
        for (int attempt = 0;; ++attempt) {
            // A server that accepts and then drops connections must not
            // turn the retries into a busy loop; the first retry, for an idle
            // connection gone stale, goes at once.
            if (attempt > 1) {
                const auto pause = std::chrono::milliseconds(10) * (1 << std::min(attempt - 2, 6));
                std::this_thread::sleep_until(std::min(Clock::now() + pause, connect_deadline));
            }
            auto connection = checkout(connect_deadline);
            const auto reply_deadline = deadline_after(reply_wait);
            bool sent = false;
            error_code ec = exchange(*connection, frame, reply_deadline, sent);
            if (!ec) {
                sp::Reply reply;
                try {
                    reply = sp::decode_reply(q.command, connection->body);
                } catch (const sp::ProtocolError& e) {
                    throw Error(Errc::peer_failed, fmt::format("store {}: malformed reply to {}: {}", address_,
                                                               sp::command_name(q.command), e.what()));
                }
                checkin(std::move(connection));
                if (reply.status == sp::Status::invalid_argument) {
                    throw Error(Errc::invalid_argument, fmt::format("store {}: {}", address_, reply.message));
                }
                return reply;
            }
            if (ec == asio::error::timed_out) {
                throw Error(Errc::timeout, fmt::format("store {}: no reply to {} of key {} within {}", address_,
                                                       sp::command_name(q.command), quote(q.keys.front()),
                                                       format_duration(reply_wait)));
            }
            if (ec == asio::error::message_size) {
                throw Error(Errc::peer_failed, fmt::format("store {}: malformed reply to {}: frame too large", address_,
                                                           sp::command_name(q.command)));
            }
            if (sent && !resendable(q.command)) {
                throw Error(Errc::unavailable,
                            fmt::format("store {}: connection lost during {} of key {} ({}); it may or may not have "
                                        "been applied",
                                        address_, sp::command_name(q.command), quote(q.keys.front()),
                                        lowercase_first(ec.message())));
            }
            if (!resend || Clock::now() >= connect_deadline) {
                throw Error(Errc::unavailable,
                            fmt::format("store {}: connection lost: {}", address_, lowercase_first(ec.message())));
            }
            // The connection broke (the server restarted, or an idle one went
            // stale): connect again and resend.
        }
    }

    struct Pooled {
        Connection connection;
        std::array<uint8_t, sp::kHeaderBytes> header{};
        std::vector<uint8_t> body;
    };

    std::unique_ptr<Pooled> checkout(Clock::time_point deadline) {
        {
            std::lock_guard lock(mutex_);
            while (!idle_.empty()) {
                auto connection = std::move(idle_.back());
                idle_.pop_back();
                if (alive(connection->connection)) return connection;
            }
        }
        return connect(deadline);
    }

    // An idle connection the server has closed reads as end of file at
    // once. Catching that before sending keeps an add from being reported
    // as "may or may not have been applied" after a server restart.
    static bool alive(Connection& c) {
        error_code ec;
        c.socket.non_blocking(true, ec);
        std::array<char, 1> byte{};
        c.socket.receive(asio::buffer(byte), tcp::socket::message_peek, ec);
        return ec == asio::error::would_block;
    }

    void checkin(std::unique_ptr<Pooled> connection) {
        std::lock_guard lock(mutex_);
        if (idle_.size() < kMaxIdle) idle_.push_back(std::move(connection));
    }

    std::unique_ptr<Pooled> connect(Clock::time_point deadline) {
        auto delay = std::chrono::milliseconds(10);
        error_code last;
        for (;;) {
            auto pooled = std::make_unique<Pooled>();
            const error_code ec = try_connect(pooled->connection, deadline);
            if (!ec) return pooled;
            // A refusal says more than the deadline that ended the retries.
            if (!last || ec != asio::error::timed_out) last = ec;
            const auto now = Clock::now();
            if (now >= deadline) break;
            std::this_thread::sleep_until(std::min(now + delay, deadline));
            delay = std::min(delay * 2, std::chrono::milliseconds(1000));
        }
        throw Error(Errc::unavailable, fmt::format("cannot reach store {} after {}: {}", address_,
                                                   format_duration(options_.timeout), lowercase_first(last.message())));
    }

    error_code try_connect(Connection& c, Clock::time_point deadline) {
        std::vector<tcp::endpoint> endpoints;
        error_code ec;
        const auto literal = asio::ip::make_address(host_, ec);
        if (!ec) {
            endpoints.emplace_back(literal, port_);
        } else {
            tcp::resolver resolver(c.io);
            bool done = false;
            resolver.async_resolve(host_, std::to_string(port_), [&](error_code e, tcp::resolver::results_type r) {
                ec = e;
                for (const auto& entry : r) endpoints.push_back(entry.endpoint());
                done = true;
            });
            if (!run_until(c.io, done, deadline, [&] { resolver.cancel(); })) return asio::error::timed_out;
            if (ec) return ec;
        }
        // Each address in turn, as asio::async_connect would try them, but
        // on a socket opened with SOCK_CLOEXEC (core/cloexec.hpp).
        ec = asio::error::host_not_found;
        for (const tcp::endpoint& endpoint : endpoints) {
            close(c);
            detail::open_cloexec(c.socket, endpoint.protocol(), ec);
            if (ec) continue;
            bool done = false;
            c.socket.async_connect(endpoint, [&](error_code e) {
                ec = e;
                done = true;
            });
            if (!run_until(c.io, done, deadline, [&] { close(c); })) return asio::error::timed_out;
            if (!ec) break;
        }
        if (ec) {
            close(c);
            return ec;
        }
        error_code ignored;
        c.socket.set_option(tcp::no_delay(true), ignored);
        return {};
    }

    static void close(Connection& c) {
        error_code ignored;
        c.socket.close(ignored);
    }

    // Writes the frame and reads the whole reply into `p.body`. Any error
    // leaves the connection unusable (a late reply would answer the next
    // request), so the caller drops it.
    error_code exchange(Pooled& p, const std::string& frame, Clock::time_point deadline, bool& sent) {
        Connection& c = p.connection;
        bool done = false;
        error_code ec;
        asio::async_write(c.socket, asio::buffer(frame), [&](error_code e, std::size_t) {
            ec = e;
            done = true;
        });
        if (!run_until(c.io, done, deadline, [&] { close(c); })) return asio::error::timed_out;
        if (ec) return ec;
        sent = true;
        done = false;
        asio::async_read(c.socket, asio::buffer(p.header), [&](error_code e, std::size_t) {
            ec = e;
            done = true;
        });
        if (!run_until(c.io, done, deadline, [&] { close(c); })) return asio::error::timed_out;
        if (ec) return ec;
        std::size_t length = 0;
        try {
            length = sp::frame_length(p.header);
        } catch (const sp::ProtocolError&) {
            return asio::error::message_size;
        }
        p.body.resize(length);
        done = false;
        asio::async_read(c.socket, asio::buffer(p.body), [&](error_code e, std::size_t) {
            ec = e;
            done = true;
        });
        if (!run_until(c.io, done, deadline, [&] { close(c); })) return asio::error::timed_out;
        return ec;
    }

    StoreOptions options_;
    std::string url_host_;                 // as the URL gave it (host_ may be loopback)
    std::unique_ptr<StoreServer> server_;  // when this process hosts the store
    std::string host_;
    uint16_t port_ = 0;
    std::string address_;
    std::mutex mutex_;
    std::vector<std::unique_ptr<Pooled>> idle_;
};

}  // namespace

std::shared_ptr<Store> open_tcp_store(std::string host, uint16_t port, const StoreOptions& options) {
    return std::make_shared<TcpStore>(std::move(host), port, options);
}

}  // namespace cohort::detail
