// One connected peer: its socket and the state of the frames moving on it.
// Owned by the Engine; only the thread driving the engine's io_context
// touches it.
#pragma once

#include "comm/transport/frame.hpp"
#include "comm/transport/link.hpp"
#include "comm/transport/tls.hpp"

#include <boost/asio/ip/tcp.hpp>

#include <sys/types.h>
#include <array>
#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <string>

namespace cohort::comm {

struct Transfer;

struct Peer {
    Peer(int rank_, boost::asio::ip::tcp::socket socket_, std::unique_ptr<TlsSession> tls_ = nullptr)
        : rank(rank_), socket(std::move(socket_)), tls(std::move(tls_)), link(socket, tls.get()) {}
    Peer(const Peer&) = delete;  // `link` points into this object
    Peer& operator=(const Peer&) = delete;

    int rank;
    // The socket is for the connection's life (close, shutdown, cancel,
    // looking at what waits in it); frames go through `link`, which is TLS
    // over this socket when `tls` is set.
    boost::asio::ip::tcp::socket socket;
    std::unique_ptr<TlsSession> tls;
    Link link;
    std::string endpoint;  // "10.0.0.2:41234", for messages

    // Receiving: a header read is always outstanding unless a data header
    // waits in `pending` for the operation that will consume it.
    FrameBytes in_header{};
    bool header_read_posted = false;
    int reads = 0;  // reads in flight (header, payload, abort text, direct descriptor)
    std::optional<FrameHeader> pending;
    std::string abort_text;
    Transfer* recv = nullptr;
    std::size_t recv_done = 0;
    std::size_t recv_frames = 0;

    // Sending: frames of the current transfer, one at a time.
    FrameBytes out_header{};
    Transfer* send = nullptr;
    std::size_t send_done = 0;
    std::size_t send_frames = 0;
    bool mid_frame = false;  // a write is in flight; an abort cannot go into the middle of a frame
    bool awaiting_ack = false;  // a direct send waits for the peer to say it copied the buffer
    std::array<unsigned char, kDirectPayload> out_direct{};
    std::array<unsigned char, kDirectPayload> in_direct{};
    // Acks to write once the write in flight is done; the receive they
    // answer completes when its ack is written.
    std::deque<FrameBytes> acks;

    // Same machine, and each side proved to the other which process it is
    // (comm/transport/direct_proof.hpp) and that it can read its memory.
    bool direct = false;
    pid_t pid = 0;                   // the kernel's word (SO_PEERCRED), never the hello's
    std::string direct_unavailable;  // why not direct, for describe()
    std::string send_error;          // a failed send, reported once the reader saw why

    // Set once the peer said goodbye (left = true) or the connection broke.
    bool gone = false;
    bool left = false;
    std::string gone_reason;
};

}  // namespace cohort::comm
