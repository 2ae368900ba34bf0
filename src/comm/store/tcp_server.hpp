// The tcp:// store server's insides, shared by tcp_server.cpp (the keys,
// the waiters, accepting) and tcp_session.cpp (one client's connection).
// Everything here runs on the server's one io thread.
#pragma once

#include "comm/store/protocol.hpp"

#include <cohort/store.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace cohort {

namespace detail {

class StoreSession;

// A get or wait whose keys are not all set yet. It is filed under one key
// it still misses; a set of that key re-checks it.
struct StoreWaiter {
    explicit StoreWaiter(boost::asio::io_context& io) : timer(io) {}
    std::shared_ptr<StoreSession> session;
    store_protocol::Command command = store_protocol::Command::wait;
    std::vector<std::string> keys;
    std::string filed_under;
    boost::asio::steady_timer timer;
    bool done = false;
};

}  // namespace detail

struct StoreServer::Impl {
    using Session = detail::StoreSession;
    using Waiter = detail::StoreWaiter;

    boost::asio::io_context io;  // first: destroyed last, after every socket and timer
    boost::asio::ip::tcp::acceptor acceptor{io};
    boost::asio::steady_timer accept_retry{io};
    std::string url;
    uint16_t port = 0;
    std::thread thread;
    bool stopping = false;
    std::unordered_map<std::string, std::string> data;
    std::unordered_map<std::string, std::vector<std::shared_ptr<Waiter>>> waiters;
    std::unordered_set<std::shared_ptr<Session>> sessions;

    ~Impl();
    void bind(const std::string& host, uint16_t wanted_port);
    void accept();
    void shutdown();
    void handle(const std::shared_ptr<Session>& session, detail::store_protocol::Request request);
    void park(const std::shared_ptr<Session>& session, detail::store_protocol::Request request);
    void notify(const std::string& key);
    void finish(const std::shared_ptr<Waiter>& waiter, bool timed_out);
    void drop(const std::shared_ptr<Waiter>& waiter);
    void unfile(const std::shared_ptr<Waiter>& waiter);
    const std::string* first_missing(std::span<const std::string> keys) const;
};

namespace detail {

// One client connection: strictly one request, then its reply, then the
// next request. A parked request keeps a one-byte read open only to notice
// the client leaving.
class StoreSession : public std::enable_shared_from_this<StoreSession> {
public:
    StoreSession(StoreServer::Impl& server, boost::asio::ip::tcp::socket socket);

    void start() { read_header(); }
    // A non-empty reason is a client's fault and is logged; a client that
    // simply leaves is not.
    void close(std::string_view reason);
    void reply(store_protocol::Command command, const store_protocol::Reply& reply);
    // While a request is parked the client must stay silent; anything but
    // the cancel from unwatch() means it left or broke the protocol.
    void watch();
    void unwatch();

    std::shared_ptr<StoreWaiter> parked;

private:
    void read_header();
    void read_body();
    void dispatch();

    StoreServer::Impl& server_;
    boost::asio::ip::tcp::socket socket_;
    std::string peer_;
    std::array<uint8_t, store_protocol::kHeaderBytes> header_{};
    std::size_t length_ = 0;
    std::vector<uint8_t> body_;
    std::array<uint8_t, 1> probe_{};
    std::string out_;
    bool closed_ = false;
};

}  // namespace detail

}  // namespace cohort
