// Setting a communicator up: the options with their environment defaults,
// checked; meet the other ranks in the store, listen, connect the mesh.
#include "comm/communicator_impl.hpp"
#include "core/cloexec.hpp"

#include "comm/shm/join.hpp"
#include "comm/transport/address.hpp"
#include "comm/transport/mesh.hpp"
#include "comm/transport/tls.hpp"
#include "core/deadline.hpp"

#include <boost/asio/ip/tcp.hpp>

#include <fmt/format.h>

#include <unistd.h>
#include <charconv>
#include <set>
#include <sstream>

namespace cohort {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::string machine_name() {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) return "localhost";
    return name;
}

std::string endpoint_text(const tcp::endpoint& ep) {
    if (ep.address().is_v6()) return fmt::format("[{}]:{}", ep.address().to_string(), ep.port());
    return fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

}  // namespace

Communicator::Impl::Impl(const CommOptions& given) : options(with_env_defaults(given)) {
    check_options(options);
    tuning = options.tuning;
    // The certificates are checked first, even alone, so a bad file is an
    // error at once rather than after the other ranks have been waited for.
    std::shared_ptr<const comm::TlsContext> tls;
    if (const comm::TlsFiles files{options.tls_ca, options.tls_cert, options.tls_key}; files.on())
        tls = std::make_shared<comm::TlsContext>(files);
    const auto deadline = detail::deadline_after(options.connect_timeout);
    const int rank = options.rank, size = options.size;
    if (options.host_label.empty()) options.host_label = machine_name();
    hosts.assign(size, options.host_label);
    transports.assign(size, Transport::self);
    auto io = std::make_unique<asio::io_context>();
    if (size == 1) {
        engine = std::make_unique<comm::Engine>(0, 1, std::vector<std::unique_ptr<comm::Peer>>(1), options.max_frame,
                                                *options.spin, std::move(io));
        abort_signal->engine = engine.get();
        return;
    }

    store = options.store;
    if (!store) {
        StoreOptions so;
        so.timeout = options.connect_timeout;
        so.host = rank == 0 && options.store_url.rfind("tcp://", 0) == 0;
        store = open_store(options.store_url, so);
    }
    // Each rank numbers its communicators of this job and generation, so a
    // second communicator on the same store never reads the first's keys.
    auto job = scoped_store(store, fmt::format("cohort/{}/{}/", options.job_id, options.generation));
    const int64_t instance = job->add(fmt::format("instances/{}", rank), 1);
    scoped = scoped_store(job, fmt::format("{}/", instance));

    // Where the address came from, for messages: the option or its variable.
    const auto chosen = comm::choose_listen_address(
        {options.address, given.address.empty() ? "COHORT_SOCKET_ADDR" : "the address option"},
        {options.ifname,
         given.ifname.empty() ? "COHORT_SOCKET_IFNAME=" + options.ifname : "interface option " + options.ifname},
        store->host());
    tcp::acceptor acceptor(*io);
    boost::system::error_code ec;
    const tcp::endpoint listen_at(chosen.ip, chosen.port);
    detail::open_cloexec(acceptor, listen_at.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec && options.socket_buffer > 0)
        acceptor.set_option(asio::socket_base::receive_buffer_size(static_cast<int>(options.socket_buffer)), ec);
    if (!ec) acceptor.bind(listen_at, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
        throw Error(Errc::unavailable, fmt::format("rank {} cannot listen on {} (chosen by {}): {}", rank,
                                                   endpoint_text(listen_at), chosen.source, ec.message()));
    const auto local = acceptor.local_endpoint();
    listening = {local.address(), local.port(), chosen.source};
    scoped->set(fmt::format("rank/{}", rank),
                fmt::format("{}\n{}\n{}", local.address().to_string(), local.port(), options.host_label));

    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back(fmt::format("rank/{}", r));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - comm::Clock::now());
    try {
        scoped->wait(keys, std::max(left, std::chrono::milliseconds(1)));
    } catch (const Error& e) {
        if (e.code() != Errc::timeout) throw;
        std::string missing;
        for (int r = 0; r < size; ++r)
            if (!scoped->try_get(keys[r])) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        throw Error(Errc::timeout,
                    fmt::format("rank {}: rank(s) {} of {} never registered with the store {} within {:g} s; are they "
                                "running, with the same store, job id '{}' and generation {}?",
                                rank, missing, size, store->address(), options.connect_timeout.count() / 1000.0,
                                options.job_id, options.generation));
    }
    std::vector<tcp::endpoint> endpoints(size);
    for (int r = 0; r < size; ++r) {
        std::istringstream text(scoped->get(keys[r], std::chrono::milliseconds(1000)));
        std::string address, port, label;
        std::getline(text, address);
        std::getline(text, port);
        std::getline(text, label);
        const auto ip = asio::ip::make_address(address, ec);
        uint16_t port_number = 0;
        const auto parsed = std::from_chars(port.data(), port.data() + port.size(), port_number);
        if (ec || port.empty() || parsed.ec != std::errc() || parsed.ptr != port.data() + port.size())
            throw Error(Errc::parse,
                        fmt::format("rank {}: the store holds a malformed address for rank {}: '{}' port '{}' (is "
                                    "another program using job id '{}' on this store?)",
                                    rank, r, address, port, options.job_id));
        endpoints[r] = tcp::endpoint(ip, port_number);
        hosts[r] = label.empty() ? address : label;
        if (r != rank && ip.is_loopback() && !local.address().is_loopback())
            throw Error(Errc::invalid_argument,
                        fmt::format("rank {} advertises a loopback address ({}) but this rank listens on {}: ranks "
                                    "on other machines cannot reach it; set COHORT_SOCKET_IFNAME",
                                    r, address, local.address().to_string()));
    }
    std::set<std::string> distinct(hosts.begin(), hosts.end());
    host_count = distinct.size();
    multi_rank_host = host_count < hosts.size();

    comm::MeshOptions mesh;
    mesh.rank = rank;
    mesh.size = size;
    mesh.job_id = options.job_id;
    mesh.generation = options.generation;
    mesh.secret = options.secret;
    mesh.socket_buffer = options.socket_buffer;
    mesh.direct_copy = options.direct_copy;
    mesh.tls = tls;
    mesh.deadline = deadline;
    auto peers = comm::connect_mesh(*io, acceptor, endpoints, mesh);
    direct_unavailable.assign(size, "");
    for (int r = 0; r < size; ++r) {
        if (r == rank) continue;
        transports[r] = peers[r]->direct ? Transport::direct_copy : Transport::tcp;
        direct_unavailable[r] = peers[r]->direct_unavailable;
        if (peers[r]->tls && tls_negotiated.empty()) tls_negotiated = peers[r]->tls->negotiated();
    }
    // After the mesh: a host's ranks that share memory still need their
    // sockets, which carry aborts and show a dead peer by closing.
    bool direct_locally = true;  // to every other rank of this host
    for (int r = 0; r < size; ++r)
        if (r != rank && hosts[r] == hosts[rank]) direct_locally = direct_locally && peers[r]->direct;
    auto joined = comm::shm::join(*scoped, hosts, rank, *options.shm_size, direct_locally, *options.spin, deadline);
    shm = std::move(joined.group);
    shm_unavailable = std::move(joined.unavailable);
    shm_direct_everywhere = shm && joined.direct_everywhere;
    if (shm) {
        for (int r : shm->ranks())
            if (r != rank) transports[r] = Transport::shared_memory;
        shm_everyone = shm->size() == size;
    }
    engine =
        std::make_unique<comm::Engine>(rank, size, std::move(peers), options.max_frame, *options.spin, std::move(io));
    std::lock_guard lock(abort_signal->mutex);
    abort_signal->engine = engine.get();
}

}  // namespace cohort
