// Connects a rank to every other rank: it dials the lower ranks (retrying
// with backoff while they come up) and accepts the higher ones, shaking
// hands on each connection. The whole set-up is bounded by one deadline.
#pragma once

#include "comm/transport/peer.hpp"
#include "comm/transport/tls.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace cohort::comm {

struct MeshOptions {
    int rank = 0;
    int size = 1;
    std::string job_id;
    uint64_t generation = 0;
    std::string secret;
    std::size_t socket_buffer = 0;
    bool direct_copy = true;  // allow process_vm_readv between processes of one machine (never under TLS)
    // When set, every connection is TLS with both ends' certificates
    // checked, before the hello (which then travels encrypted).
    std::shared_ptr<const TlsContext> tls;
    std::chrono::steady_clock::time_point deadline;
};

// Tunes a data socket: no Nagle delay, kernel buffers sized for throughput.
void tune_socket(boost::asio::ip::tcp::socket& socket, std::size_t buffer_bytes);

// `endpoints[r]` is where rank r listens; `acceptor` is this rank's
// listening socket. Returns peers[r] on `io` (null for this rank). Throws
// Error(timeout) naming the ranks that never connected,
// Error(unavailable) or Error(permission_denied) when a peer refused.
std::vector<std::unique_ptr<Peer>> connect_mesh(boost::asio::io_context& io, boost::asio::ip::tcp::acceptor& acceptor,
                                                const std::vector<boost::asio::ip::tcp::endpoint>& endpoints,
                                                const MeshOptions& options);

}  // namespace cohort::comm
