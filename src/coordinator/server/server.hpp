// The coordinator server's insides, shared by server.cpp (lifecycle, ticks,
// accepting), session.cpp (one HTTP connection), routes.cpp and
// store_routes.cpp (what each request does) and metrics.cpp; the dashboard's
// files are in assets.hpp. Everything
// here runs on the server's one io thread, so nothing needs a lock; with a
// data directory the journal's writer thread writes and fsyncs, and tells
// the io thread (by a post) what is durable.
#pragma once

#include "coordinator/journal/durable_state.hpp"
#include "coordinator/replication/replica.hpp"
#include "coordinator/server/connection_gate.hpp"
#include "coordinator/state/histogram.hpp"
#include "coordinator/server/http_reply.hpp"
#include "coordinator/server/idempotency.hpp"
#include "coordinator/server/target.hpp"
#include "coordinator/server/tls_context.hpp"
#include "coordinator/state/state.hpp"

#include <cohort/coordinator.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace cohort::coord::server {

class HttpSession;
using Request = boost::beast::http::request<boost::beast::http::string_body>;

// A store get or wait whose keys are not all set: it waits, off the io
// thread's critical path, until they are, the timeout passes or the
// generation changes.
struct ParkedRead {
    explicit ParkedRead(boost::asio::io_context& io) : timer(io) {}
    std::shared_ptr<HttpSession> session;
    std::string job;
    uint64_t generation = 0;
    std::vector<std::string> keys;
    bool get = false;  // answer with the value of keys[0]
    std::chrono::milliseconds timeout{0};
    boost::asio::steady_timer timer;
    bool done = false;
};

// A job's parked reads, and the store they last looked at.
struct ParkedList {
    std::vector<std::shared_ptr<ParkedRead>> reads;
    uint64_t generation = 0, version = 0;
};

// GET .../world: the peers array is O(world size) to build; every member of
// a generation shares it.
struct WorldCache {
    uint64_t generation = 0;
    double formed_at = 0;
    std::string peers;  // JSON text of the array
};

// An answer held back until the journal has synced the changes made before
// it (everything up to `seq`).
struct HeldReply {
    uint64_t seq = 0;
    std::chrono::steady_clock::time_point at;  // when it was held
    std::shared_ptr<HttpSession> session;
    Response response;
};

// An exclusive flock(2) on <data dir>/lock, held for the server's life, so
// that two coordinators never append to the same journal. Nothing to hold
// for an empty path. Error(unavailable) when another process holds it.
class DataDirLock {
public:
    explicit DataDirLock(const std::filesystem::path& dir);
    DataDirLock(const DataDirLock&) = delete;
    DataDirLock& operator=(const DataDirLock&) = delete;
    ~DataDirLock();

private:
    int fd_ = -1;
};

}  // namespace cohort::coord::server

namespace cohort {

struct Coordinator::Impl {
    using HttpSession = coord::server::HttpSession;
    using Response = coord::server::Response;
    using Request = coord::server::Request;
    using ParkedRead = coord::server::ParkedRead;

    // How long an answer may take to be read (how long a connection may
    // wait for a request is options.idle_timeout).
    static constexpr std::chrono::seconds kWriteTimeout{30};
    static constexpr std::size_t kHeaderLimit = 16 * 1024;
    // The longest a store get or wait may park.
    static constexpr std::chrono::milliseconds kMaxWait{std::chrono::hours(1)};

    explicit Impl(CoordinatorOptions opts);
    ~Impl();

    boost::asio::io_context io;  // first: destroyed last, after every socket and timer
    boost::asio::ip::tcp::acceptor acceptor{io};
    boost::asio::steady_timer accept_retry{io};
    boost::asio::steady_timer ticker{io};
    bool tick_armed = false;
    double next_health = 0;  // the state's clock
    CoordinatorOptions options;
    // With TLS options: every connection is HTTPS (tls_context.hpp).
    std::unique_ptr<boost::asio::ssl::context> tls;
    std::string url;
    uint16_t port = 0;
    std::thread thread;
    bool stopping = false;
    std::string last_tick_error;  // printed once, not every tick

    // With options.data_dir: the directory's lock, then the state loaded
    // from it and journaled; without, the state lives in memory_state.
    // `state` is whichever of the two is in use. With options.etcd the
    // state is memory_state, filled from etcd while this replica leads and
    // journaled by its LogWriter (`durable`), and empty while it follows.
    coord::server::DataDirLock lock;
    std::unique_ptr<coord::Journal> durable;
    coord::CoordinatorState memory_state;
    coord::CoordinatorState& state;
    // replica_routes.cpp: with options.etcd, this server as one replica.
    std::unique_ptr<coord::replication::Replica> replica;
    bool leading = false;
    std::string leader_url;  // the leader's, as etcd says; empty: unknown
    // What the journal's writer has reported synced; the answers waiting for
    // it, oldest (lowest seq) first; why it stopped, once it failed.
    uint64_t durable_seq = 0;
    std::deque<coord::server::HeldReply> held;
    std::string journal_failure;

    // Open connections by id, and who may open more (connections.cpp).
    std::unordered_map<uint64_t, std::shared_ptr<HttpSession>> sessions;
    uint64_t next_session = 0;
    coord::server::ConnectionGate gate;
    boost::asio::steady_timer shed_timer{io};
    bool shed_armed = false;
    int spare_fd = -1;  // given up for a moment to accept and close when out of descriptors
    // Refusal lines are rate-limited: when each reason last printed one,
    // and how many went unprinted since.
    std::array<std::chrono::steady_clock::time_point, coord::server::kRefusalCount> refusal_logged{};
    std::array<uint64_t, coord::server::kRefusalCount> refusal_unlogged{};
    std::chrono::steady_clock::time_point shed_logged{};
    uint64_t shed_unlogged = 0;
    std::map<std::string, coord::server::ParkedList, std::less<>> parked;  // by job
    std::map<std::string, coord::server::WorldCache, std::less<>> worlds;  // by job
    // Seconds to handle a heartbeat request.
    static constexpr std::array<double, 12> kLatencyBounds{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                           0.005,   0.01,   0.025,   0.05,   0.1,   0.5};
    coord::Histogram heartbeat_latency{kLatencyBounds};
    std::array<uint64_t, 6> responses{};  // by status class: 1xx..5xx, [0] unused
    // Retries answered with the first answer to their Idempotency-Key (the
    // answers are the state's: CoordinatorState::find_answer).
    uint64_t replayed = 0;
    // While route_once() routes a keyed change: the jobs changed() was told
    // about, so that the change and its kept answer are committed together,
    // and no parked read sees the change before both are journaled.
    std::optional<std::vector<std::string>> deferred_changes;

    double now() const;
    void bind();
    void accept();

    // connections.cpp: a new connection taken, or refused and closed; idle
    // connections closed early while crowded; out of descriptors.
    void take(boost::asio::ip::tcp::socket socket);
    void refuse(boost::asio::ip::tcp::socket& socket, coord::server::Refusal why, const std::string& peer);
    bool close_session(uint64_t id);  // false: no such session
    void shed_idle(std::chrono::steady_clock::time_point now);
    // Rate-limited like log_refusal; `closed` adds to the count it reports.
    void log_shed(std::chrono::steady_clock::time_point at, std::size_t closed, std::string_view line);
    void arm_shed();
    // True when it closed idle connections, so accepting can go on at once.
    bool on_accept_error(const boost::system::error_code& ec);
    void log_refusal(coord::server::Refusal why, std::string_view line);
    // A TLS handshake failed or timed out: counted and logged like a refusal.
    void handshake_failed(const std::string& peer, const boost::system::error_code& ec);
    void schedule_tick();
    void arm_tick(std::chrono::steady_clock::time_point at);
    // Makes sure a tick runs by `deadline` (the state's clock): a round's
    // last call that ends sooner than the armed tick.
    void tick_by(double deadline);
    void shutdown();
    // After a change to `state`, before any reply: queues its events for
    // the journal (or drops them without one), then rechecks the parked
    // reads of `job` (all jobs when empty).
    void changed(std::string_view job);
    // The journal part of changed(): queues the state's new events for the
    // writer (or drops them without a data directory).
    void commit_changes();
    // Every answer goes through here: it is sent once the journal holds
    // every change made so far (heartbeats aside: DurableState::answer_seq),
    // at once without a data directory, so no client hears of a change a
    // crash could still undo.
    void answer(const std::shared_ptr<HttpSession>& session, Response response);
    // On the io thread, from the journal's writer: `seq` is durable, or the
    // journal failed and the held answers become 503s.
    void on_durable(uint64_t seq, std::exception_ptr failure);

    // replica_routes.cpp: route_keyed(), unless this replica must not
    // answer (a follower, or a leader that etcd has not confirmed).
    std::optional<Response> route_once(const std::shared_ptr<HttpSession>& session, const Request& request);
    // nullopt: route it; else the answer instead.
    std::optional<Response> replica_gate(const Request& request, bool& unheld);
    void start_replica();
    void on_promoted(coord::replication::LoadedState loaded, int64_t fence);
    void on_demoted(const std::string& why);
    // Answers held longer than etcd_write_timeout while etcd is away: 503.
    void expire_held();
    // True when this server may change the state (ticks included).
    bool may_decide() const;

    // idempotency_routes.cpp: route() for a request with an
    // Idempotency-Key: its first answer again when the key was seen, else
    // route()'s answer, remembered. Without a key it is route().
    std::optional<Response> route_keyed(const std::shared_ptr<HttpSession>& session, const Request& request);

    // routes.cpp: the answer now, or nothing when the request was parked
    // (the session gets its answer later).
    std::optional<Response> route(const std::shared_ptr<HttpSession>& session, const Request& request);
    bool authorised(const Request& request) const;

    // store_routes.cpp
    std::optional<Response> store_route(const std::shared_ptr<HttpSession>& session, const Request& request,
                                        const coord::server::Target& target);
    void park(std::shared_ptr<ParkedRead> read);
    void recheck(std::string_view job, coord::server::ParkedList& list, bool force);
    void finish(const std::shared_ptr<ParkedRead>& read, Response response);

    // metrics.cpp
    std::string prometheus() const;
};

}  // namespace cohort
