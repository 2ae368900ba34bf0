// StoreServer: the tcp:// store's server, and what it does with requests.
// One io_context on one thread owns everything (the keys, the parked
// waiters, the connections), so no handler ever races another and the map
// needs no lock; nothing on that thread blocks.
#include "comm/store/tcp_server.hpp"
#include "core/cloexec.hpp"

#include "core/accept_loop.hpp"
#include "comm/store/backends.hpp"

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <boost/asio/ip/host_name.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

namespace cohort {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
namespace sp = detail::store_protocol;

namespace {

std::string url_host(const std::string& host, const asio::ip::address& bound) {
    if (host.empty() || bound.is_unspecified()) {
        // Every interface: the machine's name is what another machine uses.
        error_code ec;
        std::string name = asio::ip::host_name(ec);
        return ec || name.empty() ? std::string("127.0.0.1") : name;
    }
    error_code ec;
    const auto literal = asio::ip::make_address(host, ec);
    if (!ec && literal.is_v6()) return fmt::format("[{}]", literal.to_string());
    return host;
}

}  // namespace

void StoreServer::Impl::bind(const std::string& host, uint16_t wanted_port) {
    error_code ec;
    const auto literal = asio::ip::make_address(host, ec);
    const std::string where = fmt::format("tcp://{}:{}",
                                          host.empty()             ? "*"
                                          : !ec && literal.is_v6() ? "[" + host + "]"
                                                                   : host,
                                          wanted_port);
    const auto failed = [&](const std::string& why) {
        return Error(Errc::unavailable, fmt::format("cannot host store {}: {}", where, why));
    };
    std::vector<tcp::endpoint> candidates;
    if (host.empty()) {
        // The IPv6 wildcard also takes IPv4 (v6_only off); the IPv4 one is
        // the fallback on machines without IPv6.
        candidates = {tcp::endpoint(asio::ip::address_v6::any(), wanted_port),
                      tcp::endpoint(asio::ip::address_v4::any(), wanted_port)};
    } else if (!ec) {
        candidates = {tcp::endpoint(literal, wanted_port)};
    } else {
        tcp::resolver resolver(io);
        const auto results = resolver.resolve(host, std::to_string(wanted_port), ec);
        if (ec) {
            throw failed(fmt::format("cannot resolve '{}': {}", host, detail::lowercase_first(ec.message())));
        }
        for (const auto& entry : results) candidates.push_back(entry.endpoint());
    }
    error_code last;
    for (const auto& endpoint : candidates) {
        error_code ignored;
        acceptor.close(ignored);
        detail::open_cloexec(acceptor, endpoint.protocol(), last);
        if (last) continue;
        if (endpoint.address().is_v6() && endpoint.address().is_unspecified()) {
            acceptor.set_option(asio::ip::v6_only(false), ignored);
        }
        // A restarted rank 0 must be able to take its port back while the
        // old connections sit in TIME_WAIT.
        acceptor.set_option(tcp::acceptor::reuse_address(true), ignored);
        if (acceptor.bind(endpoint, last)) continue;
        if (acceptor.listen(asio::socket_base::max_listen_connections, last)) continue;
        port = acceptor.local_endpoint().port();
        url = fmt::format("tcp://{}:{}", url_host(host, endpoint.address()), port);
        return;
    }
    acceptor.close(ec);
    throw failed(last ? detail::lowercase_first(last.message()) : std::string("no address to bind"));
}

void StoreServer::Impl::accept() {
    detail::accept_connections(
        acceptor, accept_retry, stopping,
        [this](tcp::socket socket) {
            auto session = std::make_shared<Session>(*this, std::move(socket));
            sessions.insert(session);
            session->start();
        },
        [this](const error_code& ec) {
            fmt::print(stderr, "cohort: store server {}: accept failed: {}\n", url, ec.message());
            return false;  // pause, then try again
        });
}

void StoreServer::Impl::shutdown() {
    stopping = true;
    error_code ignored;
    acceptor.close(ignored);
    accept_retry.cancel();
    const auto open = sessions;  // close() erases from the set
    for (const auto& session : open) session->close({});
    sessions.clear();
    // Every waiter belongs to a session and went with it; this is only a
    // guarantee that no timer keeps io.run() from returning.
    for (auto& [key, filed] : waiters) {
        for (auto& waiter : filed) waiter->timer.cancel();
    }
    waiters.clear();
}

StoreServer::Impl::~Impl() {
    if (thread.joinable()) {
        asio::post(io, [this] { shutdown(); });
        thread.join();
    }
}

void StoreServer::Impl::handle(const std::shared_ptr<Session>& session, sp::Request request) {
    const std::string& key = request.keys.front();
    sp::Reply reply;
    switch (request.command) {
        case sp::Command::set:
            data[key] = std::move(request.value);
            notify(key);
            break;
        case sp::Command::get:
        case sp::Command::try_get: {
            const auto it = data.find(key);
            if (it != data.end()) {
                reply.value = it->second;
            } else if (request.command == sp::Command::get) {
                return park(session, std::move(request));
            } else {
                reply.status = sp::Status::not_found;
            }
            break;
        }
        case sp::Command::add: {
            const auto it = data.find(key);
            const auto current =
                it == data.end() ? std::optional<int64_t>(0) : detail::parse_stored_integer(it->second);
            if (!current) {
                reply.status = sp::Status::invalid_argument;
                reply.message = fmt::format("add: the value of key {} is not an integer: {}", detail::quote(key),
                                            detail::quote(it->second.substr(0, 40)));
            } else if (__builtin_add_overflow(*current, request.number, &reply.number)) {
                reply.status = sp::Status::invalid_argument;
                reply.message =
                    fmt::format("add: {} + {} overflows key {}", *current, request.number, detail::quote(key));
            } else {
                data[key] = std::to_string(reply.number);
                notify(key);
            }
            break;
        }
        case sp::Command::compare_and_set: {
            const auto it = data.find(key);
            const bool matches =
                request.expected ? it != data.end() && it->second == *request.expected : it == data.end();
            if (matches) {
                reply.value = request.value;
                data[key] = std::move(request.value);
                notify(key);
            } else if (it != data.end()) {
                reply.value = it->second;
            }
            break;
        }
        case sp::Command::wait: {
            if (first_missing(request.keys) != nullptr) return park(session, std::move(request));
            break;
        }
        case sp::Command::remove:
            reply.number = data.erase(key) > 0 ? 1 : 0;
            break;
    }
    session->reply(request.command, reply);
}

void StoreServer::Impl::park(const std::shared_ptr<Session>& session, sp::Request request) {
    auto waiter = std::make_shared<Waiter>(io);
    waiter->session = session;
    waiter->command = request.command;
    waiter->keys = std::move(request.keys);
    waiter->filed_under = *first_missing(waiter->keys);
    waiters[waiter->filed_under].push_back(waiter);
    session->parked = waiter;
    session->watch();
    const int64_t timeout_ms = std::clamp<int64_t>(request.number, 0, sp::kMaxTimeoutMs);
    waiter->timer.expires_after(std::chrono::milliseconds(timeout_ms));
    waiter->timer.async_wait([this, waiter](error_code ec) {
        if (ec || waiter->done || stopping) return;
        finish(waiter, true);
    });
}

// Re-checks the waiters filed under a key that was just set: each is either
// answered or filed under the next key it misses.
void StoreServer::Impl::notify(const std::string& key) {
    const auto it = waiters.find(key);
    if (it == waiters.end()) return;
    auto filed = std::move(it->second);
    waiters.erase(it);
    for (auto& waiter : filed) {
        if (waiter->done) continue;
        if (const std::string* missing = first_missing(waiter->keys)) {
            waiter->filed_under = *missing;
            waiters[*missing].push_back(waiter);
        } else {
            waiter->filed_under.clear();
            finish(waiter, false);
        }
    }
}

void StoreServer::Impl::finish(const std::shared_ptr<Waiter>& waiter, bool timed_out) {
    auto session = waiter->session;
    drop(waiter);
    session->parked = nullptr;
    session->unwatch();
    sp::Reply reply;
    if (timed_out) {
        reply.status = sp::Status::timeout;
        for (const auto& k : waiter->keys) {
            if (!data.contains(k)) reply.keys.push_back(k);
        }
    } else if (waiter->command == sp::Command::get) {
        reply.value = data.at(waiter->keys.front());
    }
    session->reply(waiter->command, reply);
}

void StoreServer::Impl::drop(const std::shared_ptr<Waiter>& waiter) {
    waiter->done = true;
    waiter->timer.cancel();
    unfile(waiter);
    waiter->session = nullptr;  // breaks the session <-> waiter cycle
}

void StoreServer::Impl::unfile(const std::shared_ptr<Waiter>& waiter) {
    const auto it = waiters.find(waiter->filed_under);
    if (it == waiters.end()) return;
    std::erase(it->second, waiter);
    if (it->second.empty()) waiters.erase(it);
}

const std::string* StoreServer::Impl::first_missing(std::span<const std::string> keys) const {
    for (const auto& k : keys) {
        if (!data.contains(k)) return &k;
    }
    return nullptr;
}

StoreServer::StoreServer(const std::string& host, uint16_t port) : impl_(std::make_unique<Impl>()) {
    impl_->bind(host, port);
    impl_->accept();
    impl_->thread = std::thread([impl = impl_.get()] {
        // A handler that throws must not take the server down with it.
        for (;;) {
            try {
                impl->io.run();
                return;
            } catch (const std::exception& e) {
                fmt::print(stderr, "cohort: store server {}: {}\n", impl->url, e.what());
            }
        }
    });
}

StoreServer::StoreServer(StoreServer&&) noexcept = default;
StoreServer& StoreServer::operator=(StoreServer&&) noexcept = default;
StoreServer::~StoreServer() = default;

uint16_t StoreServer::port() const {
    if (!impl_) throw Error(Errc::invalid_argument, "StoreServer::port() on a moved-from server");
    return impl_->port;
}

std::string StoreServer::url() const {
    if (!impl_) throw Error(Errc::invalid_argument, "StoreServer::url() on a moved-from server");
    return impl_->url;
}

}  // namespace cohort
