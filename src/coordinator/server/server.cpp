// Coordinator: binding, the io thread, accepting connections, the tick that
// lets time-driven changes happen (failures, rounds, timeouts, lease
// expiry), the journal when there is a data directory (answers wait for its
// writer thread's fsync), and shutting down.
#include "coordinator/server/server.hpp"
#include "core/cloexec.hpp"

#include "coordinator/journal/data_dir.hpp"
#include "coordinator/server/session.hpp"
#include "core/accept_loop.hpp"
#include "core/fd_limit.hpp"

#include <boost/asio/post.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <utility>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

namespace cohort {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

CoordinatorOptions::CoordinatorOptions() {
    if (const char* token_env = std::getenv("COHORT_COORDINATOR_TOKEN")) token = token_env;
}

namespace coord::server {

DataDirLock::DataDirLock(const std::filesystem::path& dir) {
    if (dir.empty()) return;
    journal::create_data_directory(dir);  // 0700: the state holds the store's values
    const std::filesystem::path path = dir / "lock";
    fd_ = journal::open_private(path, O_RDWR | O_CREAT, "cannot open the lock file");
    int rc = 0;
    do {
        rc = ::flock(fd_, LOCK_EX | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        const int err = errno;
        ::close(fd_);
        fd_ = -1;
        if (err == EWOULDBLOCK) {
            throw Error(Errc::unavailable,
                        fmt::format("coordinator: the data directory '{}' is in use: another coordinator holds its "
                                    "lock ({}); stop that one first, or give this one another data directory",
                                    dir.string(), path.string()));
        }
        throw Error(Errc::io, fmt::format("coordinator: cannot lock '{}': {}", path.string(), std::strerror(err)));
    }
}

DataDirLock::~DataDirLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace coord::server

namespace {

// Once per process: every coordinator in it shares the limit.
void raise_fd_limit_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        const detail::FdLimit limit = detail::raise_open_file_limit();
        if (!limit.error.empty()) {
            std::fprintf(stderr,
                         "cohort-coordinator: warning: cannot raise the open-file limit from %llu to its hard limit "
                         "%llu: %s; connections are capped below the current limit\n",
                         static_cast<unsigned long long>(limit.before), static_cast<unsigned long long>(limit.hard),
                         limit.error.c_str());
        } else if (limit.soft != limit.before) {
            std::fprintf(stderr, "cohort-coordinator: raised the open-file limit from %llu to %llu (the hard limit)\n",
                         static_cast<unsigned long long>(limit.before), static_cast<unsigned long long>(limit.soft));
        }
    });
}

// Fills in the derived connection limits and checks the given ones.
void resolve_connection_limits(CoordinatorOptions& options) {
    using std::chrono::milliseconds;
    if (options.idle_timeout <= milliseconds(0)) {
        throw Error(Errc::invalid_argument,
                    fmt::format("coordinator: idle_timeout must be positive, not {} ms", options.idle_timeout.count()));
    }
    if (options.crowded_idle_timeout <= milliseconds(0) || options.crowded_idle_timeout > options.idle_timeout) {
        throw Error(Errc::invalid_argument,
                    fmt::format("coordinator: crowded_idle_timeout must be positive and at most idle_timeout ({} ms), "
                                "not {} ms",
                                options.idle_timeout.count(), options.crowded_idle_timeout.count()));
    }
    if (options.raise_fd_limit) raise_fd_limit_once();
    if (options.max_connections == 0) {
        // What the journal, snapshots, the lock and the embedding program
        // may need is kept back; past 65,536 idle sessions cost more memory
        // than descriptors are worth.
        constexpr uint64_t kReserve = 128, kMinimum = 16, kLargest = 65536;
        const uint64_t fds = detail::open_file_limit();
        options.max_connections =
            static_cast<std::size_t>(std::min(kLargest, fds > kReserve + kMinimum ? fds - kReserve : kMinimum));
    }
    if (options.max_connections_per_client == 0) {
        options.max_connections_per_client = std::max<std::size_t>(1, options.max_connections / 4);
    }
}

coord::server::ConnectionLimits connection_limits(const CoordinatorOptions& options) {
    return {options.max_connections, options.max_connections_per_client, options.crowded_idle_timeout};
}

CoordinatorOptions checked(CoordinatorOptions options) {
    if (!options.clock) {
        options.clock = [] {
            return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        };
    }
    if (options.tick <= std::chrono::milliseconds(0)) {
        throw Error(Errc::invalid_argument,
                    fmt::format("coordinator: tick must be positive, not {} ms", options.tick.count()));
    }
    if (options.body_limit == 0) throw Error(Errc::invalid_argument, "coordinator: body_limit must be positive");
    if (!options.etcd.empty() && !options.data_dir.empty()) {
        throw Error(Errc::invalid_argument,
                    "coordinator: give a data directory or etcd endpoints, not both: with etcd the state lives in "
                    "etcd");
    }
    resolve_connection_limits(options);
    return options;
}

// Loads the data directory (after its lock is held). Torn last lines and
// leftovers are warnings on stderr; corruption is the Error(parse) that
// stops the coordinator from starting.
std::unique_ptr<coord::DurableState> open_journal(const std::filesystem::path& dir) {
    if (dir.empty()) return nullptr;
    return std::make_unique<coord::DurableState>(
        coord::DurableState::open(dir, coord::JournalOptions{}, [](const std::string& warning) {
            std::fprintf(stderr, "cohort-coordinator: warning: %s\n", warning.c_str());
        }));
}

}  // namespace

Coordinator::Impl::Impl(CoordinatorOptions opts)
    : options(checked(std::move(opts))),
      tls(coord::server::make_tls_context(options)),
      lock(options.data_dir),
      durable(open_journal(options.data_dir)),
      state(durable ? durable->state() : memory_state),
      gate(connection_limits(options)) {
    state.set_max_members(options.max_members);
    state.set_answer_limits({std::chrono::duration<double>(options.idempotency_window).count(),
                             options.idempotency_keys, coord::AnswerLimits{}.bytes});
    // With etcd (no data directory, so no `durable` yet), start_replica()
    // runs once bind() knows this server's URL.
    if (durable) {
        // The outage is nobody's silence: heartbeat and lease clocks start
        // again now, and that restart is journaled too.
        state.resume(now());
        durable->commit();
        // From here on the I/O thread never writes, fsyncs or snapshots.
        static_cast<coord::DurableState&>(*durable).start_writer([this](uint64_t seq, std::exception_ptr failure) {
            asio::post(io, [this, seq, failure] { on_durable(seq, failure); });
        });
        durable_seq = durable->queued_seq();  // start_writer synced it
    }
}

Coordinator::Impl::~Impl() {
    if (thread.joinable()) {
        asio::post(io, [this] { shutdown(); });
        thread.join();
    }
    if (spare_fd >= 0) ::close(spare_fd);
}

double Coordinator::Impl::now() const {
    return options.clock();
}

void Coordinator::Impl::bind() {
    const std::string where = fmt::format("{}:{}", options.host, options.port);
    const auto failed = [&](const std::string& why) {
        return Error(Errc::unavailable, fmt::format("cannot serve the coordinator at {}: {}", where, why));
    };
    error_code ec;
    const auto address = asio::ip::make_address(options.host, ec);
    tcp::endpoint endpoint;
    if (ec) {
        tcp::resolver resolver(io);
        const auto results = resolver.resolve(options.host, std::to_string(options.port), ec);
        if (ec || results.empty()) throw failed(fmt::format("cannot resolve '{}': {}", options.host, ec.message()));
        endpoint = results.begin()->endpoint();
    } else {
        endpoint = tcp::endpoint(address, options.port);
    }
    detail::open_cloexec(acceptor, endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw failed(ec.message());
    port = acceptor.local_endpoint().port();
    const auto bound = acceptor.local_endpoint().address();
    std::string host = bound.is_unspecified() ? std::string("127.0.0.1")
                       : bound.is_v6()        ? fmt::format("[{}]", bound.to_string())
                                              : bound.to_string();
    url = fmt::format("{}://{}:{}", tls ? "https" : "http", host, port);
    spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void Coordinator::Impl::accept() {
    detail::accept_connections(
        acceptor, accept_retry, stopping, [this](tcp::socket socket) { take(std::move(socket)); },
        [this](const error_code& ec) { return on_accept_error(ec); });
}

void Coordinator::Impl::schedule_tick() {
    // The tick runs at the state's next deadline (a silent member's failure
    // timeout, a round's last call, a lease's expiry), at most `tick` apart:
    // a member that falls silent is declared failed on time, not up to a
    // whole tick late.
    auto delay = options.tick;
    if (const auto next = state.next_deadline()) {
        const auto until = std::chrono::duration<double>(*next - now());
        if (until < delay) {
            delay = std::max(std::chrono::milliseconds(1), std::chrono::ceil<std::chrono::milliseconds>(until));
        }
    }
    arm_tick(std::chrono::steady_clock::now() + delay);
}

void Coordinator::Impl::arm_tick(std::chrono::steady_clock::time_point at) {
    if (tick_armed && ticker.expiry() <= at) return;
    tick_armed = true;
    ticker.expires_at(at);
    ticker.async_wait([this](error_code ec) {
        if (ec == boost::asio::error::operation_aborted) return;  // re-armed sooner
        tick_armed = false;
        if (ec || stopping) return;
        try {
            expire_held();
            if (!may_decide()) {
                schedule_tick();
                return;
            }
            const double t = now();
            state.tick(t);
            // Health costs O(n log n) per job (about 20 ms at 10,000
            // members): twice a second is plenty for what counts in seconds.
            if (t >= next_health) {
                state.evaluate_health(t);
                next_health = t + 0.5;
            }
            changed("");
            last_tick_error.clear();
        } catch (const std::exception& e) {
            // Once per distinct error: a broken journal fails every tick.
            if (last_tick_error != e.what()) {
                last_tick_error = e.what();
                std::fprintf(stderr, "cohort-coordinator: tick: %s\n", e.what());
            }
        }
        schedule_tick();
    });
}

void Coordinator::Impl::tick_by(double deadline) {
    const auto until = std::chrono::duration<double>(deadline - now());
    arm_tick(std::chrono::steady_clock::now() +
             std::max(std::chrono::milliseconds(1), std::chrono::ceil<std::chrono::milliseconds>(until)));
}

void Coordinator::Impl::changed(std::string_view job) {
    if (deferred_changes) {
        deferred_changes->emplace_back(job);
        return;
    }
    commit_changes();
    if (const coord::Job* j = job.empty() ? nullptr : state.find_job(job)) {
        if (const auto at = j->closes_at()) tick_by(*at);
    }
    if (job.empty()) {
        for (auto& [name, list] : parked) recheck(name, list, false);
    } else if (const auto it = parked.find(job); it != parked.end()) {
        recheck(it->first, it->second, false);
    }
    std::erase_if(parked, [](const auto& entry) { return entry.second.reads.empty(); });
}

void Coordinator::Impl::commit_changes() {
    if (durable) {
        // Queued for the writer; answer() holds the caller's reply until it
        // is synced. A write that fails leaves the journal unusable; clients
        // get 503 and retry until an operator restarts the coordinator,
        // which recovers from the directory.
        try {
            durable->commit();
        } catch (const Error& e) {
            if (e.code() != Errc::io) throw;
            throw Error(Errc::unavailable, fmt::format("the coordinator cannot save changes: {}", e.what()));
        }
    } else {
        state.take_events();
    }
}

void Coordinator::Impl::answer(const std::shared_ptr<HttpSession>& session, Response response) {
    // After a failure nothing more becomes durable; changes are refused
    // (503) and reads answer at once, as they would without a journal.
    if (!durable || response.unheld || durable->answer_seq() <= durable_seq || !journal_failure.empty()) {
        session->send(std::move(response));
        return;
    }
    held.push_back({durable->answer_seq(), std::chrono::steady_clock::now(), session, std::move(response)});
}

void Coordinator::Impl::on_durable(uint64_t seq, std::exception_ptr failure) {
    if (failure && replica) {
        // Fenced: another replica leads. The replica steps down, and
        // on_demoted() answers what is held.
        try {
            std::rethrow_exception(failure);
        } catch (const std::exception& e) {
            replica->deposed(e.what());
        }
        return;
    }
    if (failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const std::exception& e) {
            journal_failure = e.what();
        }
        std::fprintf(stderr, "cohort-coordinator: journal: %s\n", journal_failure.c_str());
        // The answers kept may be of changes that never became durable: a
        // retry must not be told they were made.
        state.forget_answers();
        // Not durable, so not acknowledged: the clients retry.
        const Error refused(Errc::unavailable, fmt::format("the coordinator cannot save changes: {}", journal_failure));
        for (auto& h : std::exchange(held, {})) h.session->send(coord::server::error_response(refused));
        return;
    }
    durable_seq = std::max(durable_seq, seq);
    while (!held.empty() && held.front().seq <= durable_seq) {
        coord::server::HeldReply h = std::move(held.front());
        held.pop_front();
        h.session->send(std::move(h.response));
    }
}

void Coordinator::Impl::shutdown() {
    if (stopping) return;
    stopping = true;
    error_code ignored;
    acceptor.close(ignored);
    accept_retry.cancel();
    ticker.cancel();
    shed_timer.cancel();
    if (spare_fd >= 0) ::close(spare_fd);
    spare_fd = -1;
    if (replica) {
        // What the leader queued reaches etcd (bounded); then the lease is
        // revoked, so a follower takes over at once.
        if (durable) durable->flush();
        replica.reset();
        durable.reset();
    } else if (durable) {
        // A clean stop leaves a snapshot, so the next start replays nothing.
        try {
            durable->snapshot();
            durable->flush();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "cohort-coordinator: cannot write the final snapshot: %s\n", e.what());
        }
    }
    for (auto& [job, list] : parked) {
        for (auto& read : list.reads) {
            read->done = true;
            read->timer.cancel();
        }
    }
    parked.clear();
    held.clear();  // their connections close: the journal never got to say
    const auto open = sessions;
    for (const auto& [id, session] : open) session->close();
    sessions.clear();
    io.stop();
}

Coordinator::Coordinator(CoordinatorOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
    impl_->bind();
    if (!impl_->options.etcd.empty()) impl_->start_replica();
    impl_->accept();
    impl_->schedule_tick();
    impl_->thread = std::thread([impl = impl_.get()] {
        try {
            impl->io.run();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "cohort-coordinator: server thread stopped: %s\n", e.what());
        }
    });
}

Coordinator::~Coordinator() {
    stop();
}

uint16_t Coordinator::port() const {
    return impl_->port;
}

std::string Coordinator::url() const {
    return impl_->url;
}

void Coordinator::stop() {
    if (!impl_->thread.joinable()) return;
    asio::post(impl_->io, [impl = impl_.get()] { impl->shutdown(); });
    impl_->thread.join();
}

}  // namespace cohort
