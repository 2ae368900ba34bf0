// Coordinator: binding, the io thread, accepting connections, the tick that
// lets time-driven changes happen (failures, rounds, timeouts, lease
// expiry), and shutting down.
#include "coordinator/server/server.hpp"
#include "coordinator/server/session.hpp"

#include <boost/asio/post.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

namespace cohort {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

CoordinatorOptions::CoordinatorOptions() {
    if (const char* token_env = std::getenv("COHORT_COORDINATOR_TOKEN")) token = token_env;
}

Coordinator::Impl::Impl(CoordinatorOptions opts) : options(std::move(opts)) {
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
    if (!options.data_dir.empty()) {
        // The journal (not written yet) will live here; fail now, not later.
        std::error_code ec;
        std::filesystem::create_directories(options.data_dir, ec);
        if (ec) {
            throw Error(Errc::io, fmt::format("coordinator: cannot create data directory '{}': {}",
                                              options.data_dir.string(), ec.message()));
        }
    }
}

Coordinator::Impl::~Impl() {
    if (thread.joinable()) {
        asio::post(io, [this] { shutdown(); });
        thread.join();
    }
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
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw failed(ec.message());
    port = acceptor.local_endpoint().port();
    const auto bound = acceptor.local_endpoint().address();
    std::string host = bound.is_unspecified() ? std::string("127.0.0.1")
                       : bound.is_v6()        ? fmt::format("[{}]", bound.to_string())
                                              : bound.to_string();
    url = fmt::format("http://{}:{}", host, port);
}

void Coordinator::Impl::accept() {
    acceptor.async_accept([this](error_code ec, tcp::socket socket) {
        if (stopping) return;
        if (ec) {
            // Out of descriptors, most likely: try again shortly rather
            // than spin or give up.
            accept_retry.expires_after(std::chrono::milliseconds(100));
            accept_retry.async_wait([this](error_code wait_ec) {
                if (!wait_ec && !stopping) accept();
            });
            return;
        }
        error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        auto session = std::make_shared<HttpSession>(*this, std::move(socket));
        sessions.insert(session);
        session->start();
        accept();
    });
}

void Coordinator::Impl::schedule_tick() {
    ticker.expires_after(options.tick);
    ticker.async_wait([this](error_code ec) {
        if (ec || stopping) return;
        try {
            state.tick(now());
        } catch (const std::exception& e) {
            std::fprintf(stderr, "cohort-coordinator: tick: %s\n", e.what());
        }
        changed("");
        schedule_tick();
    });
}

void Coordinator::Impl::changed(std::string_view job) {
    if (after_change) {
        after_change(state);
    } else {
        state.take_events();
    }
    if (job.empty()) {
        for (auto& [name, list] : parked) recheck(name, list, false);
    } else if (const auto it = parked.find(job); it != parked.end()) {
        recheck(it->first, it->second, false);
    }
    std::erase_if(parked, [](const auto& entry) { return entry.second.reads.empty(); });
}

void Coordinator::Impl::shutdown() {
    if (stopping) return;
    stopping = true;
    error_code ignored;
    acceptor.close(ignored);
    accept_retry.cancel();
    ticker.cancel();
    for (auto& [job, list] : parked) {
        for (auto& read : list.reads) {
            read->done = true;
            read->timer.cancel();
        }
    }
    parked.clear();
    const auto open = sessions;
    for (const auto& session : open) session->close();
    sessions.clear();
    io.stop();
}

Coordinator::Coordinator(CoordinatorOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
    impl_->bind();
    // The journal, when it comes, loads saved state here and calls
    // state.resume(), then plugs itself into after_change.
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
