// Runs the steps of a collective over the mesh of peers: each step is a set
// of sends and receives that proceed concurrently on one io_context driven
// by the calling thread until they finish, a peer fails, or the deadline
// passes. Any failure breaks the engine for good: it tells every peer it
// still can (an abort frame) and closes the sockets, so nobody waits for a
// rank that gave up.
#pragma once

#include "comm/transport/frame.hpp"
#include "comm/transport/peer.hpp"

#include <cohort/error.hpp>

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace cohort::comm {

using Clock = std::chrono::steady_clock;

struct Transfer {
    enum class Direction { send, recv };
    Direction direction = Direction::send;
    int peer = -1;
    std::byte* data = nullptr;  // read for sends, written for receives
    std::size_t bytes = 0;
    uint32_t tag = 0;  // the algorithm's step: sender and receiver must agree
    // Receives only: called as each piece lands, so reduction overlaps the
    // next piece's arrival.
    std::function<void(std::size_t offset, std::size_t length)> on_chunk;
    // Receives with on_chunk only: `data` is a staging buffer of at least
    // Engine::stage_bytes() and every piece lands at its start, to be
    // consumed by on_chunk before the next is read. The piece then stays in
    // cache between the copy out of the socket and the reduction, where
    // a buffer the size of the message would be written to memory and read
    // back.
    bool staged = false;

    static Transfer send_to(int peer, const void* data, std::size_t bytes, uint32_t tag = 0) {
        return {Direction::send, peer, static_cast<std::byte*>(const_cast<void*>(data)), bytes, tag, {}};
    }
    static Transfer recv_from(int peer, void* data, std::size_t bytes, uint32_t tag = 0,
                              std::function<void(std::size_t, std::size_t)> on_chunk = {}) {
        return {Direction::recv, peer, static_cast<std::byte*>(data), bytes, tag, std::move(on_chunk)};
    }
    // `stage` holds Engine::stage_bytes(); on_chunk(offset, length) finds
    // the piece at stage[0, length).
    static Transfer recv_staged(int peer, void* stage, std::size_t bytes, uint32_t tag,
                                std::function<void(std::size_t, std::size_t)> on_chunk) {
        Transfer t{Direction::recv, peer, static_cast<std::byte*>(stage), bytes, tag, std::move(on_chunk)};
        t.staged = true;
        return t;
    }
};

class Engine {
public:
    // peers[r] is the connection to rank r (null for this rank); an
    // operation polls its sockets for `spin` before it sleeps.
    Engine(int rank, int size, std::vector<std::unique_ptr<Peer>> peers, std::size_t max_frame,
           std::chrono::microseconds spin, std::unique_ptr<boost::asio::io_context> io);
    ~Engine();

    int rank() const { return rank_; }
    int size() const { return size_; }

    // Starts an operation; Error(closed) once the engine is broken.
    void begin(const OpSignature& op, Clock::time_point deadline, std::chrono::milliseconds timeout);
    // Runs the transfers to completion; throws the failure's Error.
    void run(std::span<Transfer> transfers);
    void run(std::initializer_list<Transfer> transfers);
    const OpSignature& op() const { return op_; }

    // For a transport outside the sockets (shared memory) that waits on its
    // own: runs the socket events already there (a peer's abort frame, a
    // closed connection), then throws the operation's Error if it failed,
    // was aborted or ran past its deadline; `waiting_on` says, for the
    // timeout's message, what the caller waits for. A data frame of this
    // operation's number but another kind waiting on a socket is a
    // mismatch: that peer runs something else. `arrived`, when given, is
    // asked before throwing: true means what the caller waited for came
    // after all (a peer that arrived and then exited), so the failure is
    // only recorded, for the next wait or operation.
    void check(const std::function<std::string()>& waiting_on, const std::function<bool()>& arrived = {});
    // Whether `rank` closed its communicator or its connection broke (as
    // far as the events run so far tell).
    bool peer_gone(int rank) const { return rank != rank_ && peers_.at(rank) && peers_[rank]->gone; }
    // The ranks whose connection ended without a goodbye or an abort frame
    // at a frame boundary (end of stream or reset): the process exited or
    // died. What a survivor may report to the coordinator; a rank that gave
    // up, said goodbye, broke off mid-frame or went silent is not here.
    // Once broken, also the peers whose socket holds nothing but its end
    // now. Any thread.
    std::vector<int> dead_ranks() const;
    // Fails the operation because `rank`, which it still needs, is gone.
    [[noreturn]] void fail_gone(int rank);

    // The piece a TCP receive that reduces is read and reduced in
    // (CommTuning::pipeline_chunk): a multiple of every element size.
    void set_reduce_piece(std::size_t bytes) { reduce_piece_ = bytes; }
    // The largest piece a staged receive hands its on_chunk.
    std::size_t stage_bytes() const { return reduce_piece_; }

    // A scratch buffer of at least `bytes`; `slot` 0 to 2.
    std::byte* scratch(std::size_t bytes, int slot = 0);

    // These three may be called from any thread, even during an operation.
    bool broken() const { return broken_.load(); }
    std::string broken_reason() const {
        std::lock_guard lock(reason_mutex_);
        return broken_reason_;
    }
    Errc broken_code() const { return broken_code_.load(); }

    // Says goodbye to every peer, waits up to `grace` for it to leave, closes.
    void close(std::chrono::milliseconds grace);
    // Marks the engine broken with this error and tells the peers.
    [[noreturn]] void fail_now(Errc code, std::string message);
    // From any thread: the operation under way, or else the next one, fails
    // with Error(closed) carrying `reason`, and the peers are told. The
    // caller keeps the engine alive for the duration of the call.
    void abort(std::string reason);

private:
    void start_send(Peer& peer);
    void pump(Peer& peer);
    bool wrote(Peer& peer, const boost::system::error_code& ec);
    void on_ack(Peer& peer, const FrameHeader& header);
    void read_direct(Peer& peer);
    void start_recv(Peer& peer);
    void post_header_read(Peer& peer);
    void on_header(Peer& peer);
    void read_payload(Peer& peer, const FrameHeader& header);
    void read_piece(Peer& peer, std::size_t frame_end);
    void read_abort(Peer& peer, const FrameHeader& header);
    void peer_gone(Peer& peer, bool died, const std::string& reason);
    void record_dead(const Peer& peer);
    void fail(Errc code, std::string message);
    void finish_transfer();
    void take_abort();  // turns a requested abort into this operation's failure
    std::string waiting_on() const;
    [[noreturn]] void break_and_throw();

    int rank_;
    int size_;
    std::unique_ptr<boost::asio::io_context> io_;
    std::vector<std::unique_ptr<Peer>> peers_;
    std::size_t max_frame_;
    std::size_t reduce_piece_ = std::size_t(128) << 10;

    OpSignature op_;
    Clock::time_point deadline_{};
    std::chrono::milliseconds timeout_{0};
    bool in_op_ = false;
    std::size_t outstanding_ = 0;
    std::chrono::microseconds spin_;  // CommOptions::spin

    bool failed_ = false;
    Errc fail_code_ = Errc::ok;
    std::string fail_message_;

    void mark_broken(Errc code, std::string reason);

    std::atomic<bool> abort_requested_{false};
    std::string abort_reason_;  // guarded by reason_mutex_

    std::atomic<bool> broken_{false};
    std::atomic<Errc> broken_code_{Errc::ok};
    mutable std::mutex reason_mutex_;
    std::string broken_reason_;
    std::vector<int> dead_ranks_;  // guarded by reason_mutex_, ascending

    std::vector<std::byte> scratch_[3];
};

}  // namespace cohort::comm
