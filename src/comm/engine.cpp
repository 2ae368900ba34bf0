// The engine's event handling: frames out, frames in, failures, deadlines.
#include "comm/engine.hpp"

#include "core/text.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <fmt/format.h>

#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cohort::comm {
using detail::format_size;
namespace asio = boost::asio;
using boost::system::error_code;

Engine::Engine(int rank, int size, std::vector<std::unique_ptr<Peer>> peers, std::size_t max_frame,
               std::chrono::microseconds spin, std::unique_ptr<asio::io_context> io)
    : rank_(rank), size_(size), io_(std::move(io)), peers_(std::move(peers)), max_frame_(max_frame), spin_(spin) {
    for (auto& peer : peers_)
        if (peer) post_header_read(*peer);
}

Engine::~Engine() {
    for (auto& peer : peers_)
        if (peer) {
            peer->recv = peer->send = nullptr;
            error_code ignored;
            peer->socket.close(ignored);
        }
    io_->restart();
    io_->run();
}

std::byte* Engine::scratch(std::size_t bytes, int slot) {
    auto& buffer = scratch_[slot];
    if (buffer.size() < bytes) buffer.resize(bytes);
    return buffer.data();
}

void Engine::begin(const OpSignature& op, Clock::time_point deadline, std::chrono::milliseconds timeout) {
    if (broken_)
        throw Error(Errc::closed, fmt::format("{} on rank {}: the communicator is broken ({}); create a new one",
                                              describe(op), rank_, broken_reason()));
    op_ = op;
    deadline_ = deadline;
    timeout_ = timeout;
    in_op_ = true;
    for (const auto& peer : peers_)
        if (peer && peer->gone && !peer->left) {
            fail(Errc::peer_failed, fmt::format("{} on rank {}: rank {} ({}) {}", describe(op_), rank_, peer->rank,
                                                peer->endpoint, peer->gone_reason));
            break_and_throw();
        }
    if (abort_requested_) {
        take_abort();
        break_and_throw();
    }
}

void Engine::abort(std::string reason) {
    {
        std::lock_guard lock(reason_mutex_);
        if (abort_requested_ || broken_) return;
        abort_reason_ = std::move(reason);
    }
    abort_requested_ = true;
    // Wakes an operation sleeping in run_one_until; the handler itself has
    // nothing to do, the loop checks the flag.
    asio::post(*io_, [] {});
}

void Engine::take_abort() {
    std::string reason;
    {
        std::lock_guard lock(reason_mutex_);
        reason = abort_reason_;
    }
    fail(Errc::closed,
         fmt::format("{} on rank {}: aborted: {}", in_op_ ? describe(op_) : "the communicator", rank_, reason));
}

void Engine::run(std::initializer_list<Transfer> transfers) {
    std::vector<Transfer> list(transfers);
    run(std::span<Transfer>(list));
}

void Engine::run(std::span<Transfer> transfers) {
    if (failed_) break_and_throw();
    outstanding_ = transfers.size();
    for (auto& t : transfers) {
        Peer& peer = *peers_.at(t.peer);
        if (t.direction == Transfer::Direction::send) {
            peer.send = &t;
            peer.send_done = peer.send_frames = 0;
            peer.awaiting_ack = false;
        } else {
            peer.recv = &t;
            peer.recv_done = peer.recv_frames = 0;
        }
    }
    // Start after registering all, so a failure seen while starting one
    // leaves no transfer half-registered.
    for (auto& t : transfers) {
        Peer& peer = *peers_[t.peer];
        if (failed_) break;
        if (t.direction == Transfer::Direction::send)
            start_send(peer);
        else
            start_recv(peer);
    }
    // Small messages answer within microseconds; polling for a moment
    // before sleeping in epoll saves the wake-up (MPI busy-polls the same
    // way). Yielding lets other ranks on a crowded machine run meanwhile.
    // The moment counts from the last event, not from the start: a large
    // message fills and drains the socket buffers many times, and sleeping
    // at each gap cost one wake-up per gap (130 per 16 MiB all-reduce on 2
    // ranks, a third of its time).
    auto spin_until = Clock::now() + spin_;
    unsigned polls = 0;
    while (outstanding_ > 0 && !failed_) {
        if (abort_requested_) {
            take_abort();
            break;
        }
        if (io_->poll_one() > 0) {
            spin_until = Clock::now() + spin_;
            continue;
        }
        if (io_->stopped()) io_->restart();
        if (Clock::now() < spin_until) {
            if (++polls % 16 == 0) sched_yield();
            continue;
        }
        if (io_->run_one_until(deadline_) == 0) {
            if (io_->stopped()) io_->restart();
            if (Clock::now() >= deadline_)
                fail(Errc::timeout, fmt::format("{} timed out on rank {} after {} waiting for {}", describe(op_), rank_,
                                                fmt::format("{:g} s", timeout_.count() / 1000.0), waiting_on()));
        }
    }
    if (failed_) break_and_throw();
}

void Engine::fail_gone(int rank) {
    const Peer& peer = *peers_.at(rank);
    fail(peer.left ? Errc::closed : Errc::peer_failed, fmt::format("{} on rank {}: rank {} ({}) {}", describe(op_),
                                                                   rank_, peer.rank, peer.endpoint, peer.gone_reason));
    break_and_throw();
}

void Engine::check(const std::function<std::string()>& waiting_on, const std::function<bool()>& arrived) {
    if (abort_requested_) {
        take_abort();
    } else {
        io_->poll();
        if (io_->stopped()) io_->restart();
        for (const auto& peer : peers_) {
            // A peer already in a later operation is no mismatch: it saw
            // every rank through this one before this rank noticed.
            if (failed_ || !peer || !peer->pending || peer->pending->op.seq != op_.seq) continue;
            if (const std::string why = mismatch(op_, peer->pending->op); !why.empty())
                fail(Errc::mismatch,
                     fmt::format("{} on rank {} does not match rank {}: {}", describe(op_), rank_, peer->rank, why));
        }
        if (!failed_ && Clock::now() >= deadline_)
            fail(Errc::timeout,
                 fmt::format("{} timed out on rank {} after {} waiting for {}; a rank that never called "
                             "this operation, or a hung or dead one, is the usual cause",
                             describe(op_), rank_, fmt::format("{:g} s", timeout_.count() / 1000.0), waiting_on()));
    }
    if (failed_ && !(arrived && arrived())) break_and_throw();
}

void Engine::finish_transfer() {
    if (outstanding_ > 0) --outstanding_;
}

// ---------------------------------------------------------------- sending

namespace {

// Direct copies pay an ack round trip; below this size TCP is faster.
constexpr std::size_t kDirectMinimum = std::size_t(64) << 10;
// Copied and reduced piece by piece so the reduction reads from cache.
constexpr std::size_t kDirectChunk = std::size_t(512) << 10;

void put64(unsigned char* at, uint64_t value) {
    for (int i = 0; i < 8; ++i) at[i] = static_cast<unsigned char>(value >> (8 * i));
}
uint64_t get64(const unsigned char* at) {
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value |= uint64_t(at[i]) << (8 * i);
    return value;
}

// Writes of a data frame go out up to this many bytes per system call.
// asio's composed write stops each call at 64 KiB, which on loopback cost
// a wake-up of the reader per 64 KiB and made a 2-rank 16 MiB all-reduce
// twice as slow as Open MPI's; whole 4 MiB frames in one call were faster
// but left the socket buffer's pages cold by the time they were read (and
// now and then stalled a connection for a retransmission timeout, 200 ms).
// 512 KiB and 1 MiB measured alike (docs/benchmarks.md). Reads keep
// asio's 64 KiB: smaller reads free the kernel's buffers sooner, and the
// sender then writes into pages still in cache.
constexpr std::size_t kWriteMax = std::size_t(512) << 10;

std::size_t up_to_write_max(const error_code& ec, std::size_t) { return ec ? 0 : kWriteMax; }

}  // namespace

void Engine::start_send(Peer& peer) {
    if (peer.gone) {
        fail(peer.left ? Errc::closed : Errc::peer_failed,
             fmt::format("{} on rank {}: cannot send to rank {}: {}", describe(op_), rank_, peer.rank,
                         peer.gone_reason));
        return;
    }
    pump(peer);
}

// Starts the next write on the peer's socket, if none is in flight: acks
// first (the peer waits on them), then the current send's next frame.
void Engine::pump(Peer& peer) {
    if (peer.mid_frame || peer.gone || failed_) return;
    if (!peer.acks.empty()) {
        peer.out_header = peer.acks.front();
        peer.acks.pop_front();
        peer.mid_frame = true;
        asio::async_write(peer.link, asio::buffer(peer.out_header),
                          [this, p = &peer](const error_code& ec, std::size_t) {
                              if (!wrote(*p, ec)) return;
                              if (p->recv) {
                                  p->recv = nullptr;
                                  finish_transfer();
                              }
                              post_header_read(*p);
                              pump(*p);
                          });
        return;
    }
    if (peer.send == nullptr || peer.awaiting_ack) return;
    Transfer& t = *peer.send;
    if (peer.direct && t.bytes >= kDirectMinimum) {
        encode(FrameHeader{FrameKind::direct, op_, t.tag, static_cast<uint32_t>(kDirectPayload)}, peer.out_header);
        put64(peer.out_direct.data(), reinterpret_cast<uintptr_t>(t.data));
        put64(peer.out_direct.data() + 8, t.bytes);
        peer.mid_frame = true;
        peer.awaiting_ack = true;
        const std::array<asio::const_buffer, 2> buffers{asio::buffer(peer.out_header), asio::buffer(peer.out_direct)};
        asio::async_write(peer.link, buffers, [this, p = &peer](const error_code& ec, std::size_t) {
            if (wrote(*p, ec)) pump(*p);
        });
        return;
    }
    if (peer.send_frames > 0 && peer.send_done == t.bytes) return;
    const std::size_t length = std::min(max_frame_, t.bytes - peer.send_done);
    encode(FrameHeader{FrameKind::data, op_, t.tag, static_cast<uint32_t>(length)}, peer.out_header);
    peer.mid_frame = true;
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(peer.out_header),
                                                    asio::buffer(t.data + peer.send_done, length)};
    asio::async_write(peer.link, buffers, up_to_write_max, [this, p = &peer, length](const error_code& ec, std::size_t) {
        if (!wrote(*p, ec)) return;
        p->send_done += length;
        ++p->send_frames;
        if (p->send_done == p->send->bytes) {
            p->send = nullptr;
            finish_transfer();
        }
        pump(*p);
    });
}

// The common end of every write: false when the write's continuation must
// not run (cancelled, or the connection broke).
bool Engine::wrote(Peer& peer, const error_code& ec) {
    peer.mid_frame = false;
    if (ec == asio::error::operation_aborted || broken_) return false;  // nothing continues after a failure
    if (!ec) return true;
    // A peer that gave up writes an abort frame and half-closes; our write
    // may fail with a reset before we read why. The header read, if one is
    // outstanding, still gets the abort frame (or the end of the stream),
    // so let any read in flight (header, payload or abort text) speak first.
    const std::string why =
        fmt::format("sending to it failed: {} (it died or closed the connection)", peer.link.explain(ec));
    if (peer.reads > 0) {
        peer.send_error = why;
        return false;
    }
    peer_gone(peer, true, why);
    return false;
}

// -------------------------------------------------------------- receiving

void Engine::start_recv(Peer& peer) {
    if (peer.pending) {
        const FrameHeader header = *peer.pending;
        peer.pending.reset();
        read_payload(peer, header);
    } else if (peer.gone) {
        fail(peer.left ? Errc::closed : Errc::peer_failed,
             fmt::format("{} on rank {}: rank {} {}", describe(op_), rank_, peer.rank, peer.gone_reason));
    } else if (!peer.header_read_posted) {
        post_header_read(peer);
    }
}

void Engine::post_header_read(Peer& peer) {
    if (peer.gone || peer.pending || peer.header_read_posted) return;
    peer.header_read_posted = true;
    ++peer.reads;
    asio::async_read(peer.link, asio::buffer(peer.in_header), [this, p = &peer](const error_code& ec,
                                                                                  std::size_t n) {
        --p->reads;
        p->header_read_posted = false;
        if (ec == asio::error::operation_aborted) return;
        if (!ec) {
            on_header(*p);
            return;
        }
        // Between frames (no byte of a header came), with no goodbye and no
        // abort: a process that gives up writes an abort frame and
        // half-closes, one that closes says goodbye, so only an exit or a
        // death ends a connection here (a reset: the dead process had
        // unread data). A live rank that gives up in the middle of a frame
        // closes without an abort: not here.
        if ((ec == asio::error::eof || ec == asio::error::connection_reset) && n == 0 && !p->gone) record_dead(*p);
        if (!p->send_error.empty()) {
            peer_gone(*p, true, p->send_error);
        } else if (ec == asio::error::eof) {
            peer_gone(*p, true, "closed the connection without saying goodbye (it exited or died)");
        } else {
            peer_gone(*p, true, fmt::format("connection failed: {}", p->link.explain(ec)));
        }
    });
}

void Engine::on_ack(Peer& peer, const FrameHeader& header) {
    if (peer.send == nullptr || !peer.awaiting_ack) {
        peer_gone(peer, true, "sent an acknowledgement nothing waited for (a protocol error); disconnected it");
        return;
    }
    if (header.op != op_ || header.tag != peer.send->tag) {
        fail(Errc::mismatch, fmt::format("{} on rank {} does not match rank {}: it acknowledged {} step {}",
                                         describe(op_), rank_, peer.rank, describe(header.op), header.tag));
        return;
    }
    peer.awaiting_ack = false;
    peer.send_done = peer.send->bytes;
    peer.send = nullptr;
    finish_transfer();
    post_header_read(peer);
    pump(peer);
}

// Copies the peer's buffer straight into ours, a chunk at a time, then
// queues the ack that lets the peer reuse its buffer.
void Engine::read_direct(Peer& peer) {
    ++peer.reads;
    asio::async_read(peer.link, asio::buffer(peer.in_direct), [this, p = &peer](const error_code& ec, std::size_t) {
        --p->reads;
        if (ec == asio::error::operation_aborted || p->recv == nullptr || failed_) return;
        if (ec) {
            peer_gone(*p, true, fmt::format("connection failed in the middle of a frame: {}", p->link.explain(ec)));
            return;
        }
        Transfer& t = *p->recv;
        const uint64_t address = get64(p->in_direct.data()), bytes = get64(p->in_direct.data() + 8);
        if (bytes != t.bytes) {
            fail(Errc::mismatch, fmt::format("{} on rank {} does not match rank {}: it offers {} bytes, this rank "
                                             "expected {}",
                                             describe(op_), rank_, p->rank, bytes, t.bytes));
            return;
        }
        const std::size_t chunk = t.staged ? reduce_piece_ : kDirectChunk;
        for (std::size_t off = 0; off < t.bytes;) {
            const std::size_t length = std::min(chunk, t.bytes - off);
            iovec local{t.staged ? t.data : t.data + off, length};
            iovec remote{reinterpret_cast<void*>(address + off), length};
            const ssize_t got = process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
            if (got <= 0) {
                // A peer that gave up and exited has an abort frame in the
                // stream behind this one: read on, and report it if it is there.
                const int err = errno;
                p->send_error = err == ESRCH ? std::string("exited or died while this rank copied its data")
                                             : fmt::format("copying its buffer failed: {}", std::strerror(err));
                p->recv = nullptr;
                post_header_read(*p);
                return;
            }
            if (t.on_chunk) t.on_chunk(off, std::size_t(got));
            off += std::size_t(got);
        }
        p->recv_done = t.bytes;
        FrameBytes ack{};
        encode(FrameHeader{FrameKind::ack, op_, t.tag, 0}, ack);
        p->acks.push_back(ack);
        pump(*p);
    });
}

void Engine::on_header(Peer& peer) {
    FrameHeader header;
    try {
        header = decode(peer.in_header, max_frame_);
    } catch (const Error& e) {
        peer_gone(peer, true, fmt::format("{}; disconnected it", e.what()));
        return;
    }
    if (!peer.send_error.empty() && header.kind != FrameKind::abort) {
        peer_gone(peer, true, peer.send_error);
        return;
    }
    switch (header.kind) {
        case FrameKind::abort:
            read_abort(peer, header);
            return;
        case FrameKind::goodbye:
            peer_gone(peer, false, "closed its communicator");
            return;
        case FrameKind::ack:
            on_ack(peer, header);
            return;
        case FrameKind::direct:
        case FrameKind::data:
            if (peer.recv == nullptr) {
                peer.pending = header;  // for the operation that will want it
                return;
            }
            read_payload(peer, header);
            return;
    }
}

void Engine::read_payload(Peer& peer, const FrameHeader& header) {
    if (failed_) return;
    Transfer& t = *peer.recv;
    if (const std::string why = mismatch(op_, header.op); !why.empty()) {
        fail(Errc::mismatch,
             fmt::format("{} on rank {} does not match rank {}: {}", describe(op_), rank_, peer.rank, why));
        return;
    }
    if (header.kind == FrameKind::direct) {
        if (header.tag != t.tag || !peer.direct) {
            fail(Errc::mismatch,
                 fmt::format("{} on rank {} does not match rank {}: it offered step {} for a direct "
                             "copy, this rank expected step {}{}",
                             describe(op_), rank_, peer.rank, header.tag, t.tag, peer.direct ? "" : " over TCP"));
            return;
        }
        read_direct(peer);
        return;
    }
    const std::size_t expected = std::min(max_frame_, t.bytes - peer.recv_done);
    if (header.tag != t.tag || header.length != expected) {
        fail(Errc::mismatch,
             fmt::format("{} on rank {} does not match rank {}: it sent step {} with {} bytes, this rank expected "
                         "step {} with {} bytes (are both running the same cohort version and algorithm?)",
                         describe(op_), rank_, peer.rank, header.tag, header.length, t.tag, expected));
        return;
    }
    if (expected == 0) {
        ++peer.recv_frames;
        if (peer.recv_done == t.bytes) {
            peer.recv = nullptr;
            finish_transfer();
        }
        post_header_read(peer);
        return;
    }
    read_piece(peer, peer.recv_done + expected);
}

// Reads the current frame up to `frame_end` (an offset in the transfer). A
// receive that reduces takes it in pieces of reduce_piece_ (128 KiB unless
// tuned: small enough to stay in L2), handing each to
// on_chunk as it lands: the reduction of one piece then overlaps the
// arrival of the next, and reads from cache, where a whole frame (up to
// max_frame) would be reduced only after its last byte. The frames on the
// wire are the same either way.
void Engine::read_piece(Peer& peer, std::size_t frame_end) {
    Transfer& t = *peer.recv;
    const std::size_t length =
        t.on_chunk ? std::min(reduce_piece_, frame_end - peer.recv_done) : frame_end - peer.recv_done;
    ++peer.reads;
    std::byte* into = t.staged ? t.data : t.data + peer.recv_done;
    asio::async_read(peer.link, asio::buffer(into, length),
                     [this, p = &peer, length, frame_end](const error_code& ec, std::size_t) {
                         --p->reads;
                         if (ec == asio::error::operation_aborted || p->recv == nullptr) return;
                         if (ec) {
                             peer_gone(*p, true,
                                       !p->send_error.empty()
                                           ? p->send_error
                                           : fmt::format("connection failed in the middle of a frame: {}",
                                                         p->link.explain(ec)));
                             return;
                         }
                         Transfer& cur = *p->recv;
                         if (cur.on_chunk) cur.on_chunk(p->recv_done, length);
                         p->recv_done += length;
                         if (p->recv_done < frame_end) {
                             read_piece(*p, frame_end);
                             return;
                         }
                         ++p->recv_frames;
                         if (p->recv_done == cur.bytes) {
                             p->recv = nullptr;
                             finish_transfer();
                         }
                         post_header_read(*p);
                     });
}

void Engine::read_abort(Peer& peer, const FrameHeader& header) {
    peer.abort_text.assign(header.length, '\0');
    ++peer.reads;
    asio::async_read(peer.link, asio::buffer(peer.abort_text),
                     [this, p = &peer, header](const error_code& ec, std::size_t) {
                         --p->reads;
                         if (ec == asio::error::operation_aborted) return;
                         // The code comes from the network: only a known one is passed on.
                         auto code = static_cast<Errc>(header.op.aux);
                         if (header.op.aux < 1 || header.op.aux > static_cast<uint64_t>(Errc::permission_denied))
                             code = Errc::peer_failed;
                         const std::string text = ec ? std::string("(its message was cut off)") : p->abort_text;
                         p->gone = true;
                         p->gone_reason = "aborted the communicator: " + text;
                         if (!failed_)
                             fail(code, fmt::format("{} on rank {}: rank {} gave up: {}",
                                                    in_op_ ? describe(op_) : "the communicator", rank_, p->rank, text));
                     });
}

// ---------------------------------------------------------------- failure

void Engine::peer_gone(Peer& peer, bool died, const std::string& reason) {
    if (peer.gone) return;
    peer.gone = true;
    peer.left = !died;
    peer.gone_reason = reason;
    error_code ignored;
    if (died) peer.socket.close(ignored);
    // Only an operation that still needs the peer fails now. A peer can
    // send its last frame of an operation and exit at once: its end of
    // stream may come in before another peer's last frame, and the
    // operation it finished must not fail for it. A death still breaks the
    // communicator: the next operation fails as it begins.
    const bool needed = peer.recv != nullptr || peer.send != nullptr;
    if (needed) {
        const std::string what = in_op_ ? describe(op_) : std::string("the communicator");
        fail(died ? Errc::peer_failed : Errc::closed,
             fmt::format("{} on rank {}: rank {} ({}) {}", what, rank_, peer.rank, peer.endpoint, reason));
    }
}

std::vector<int> Engine::dead_ranks() const {
    std::lock_guard lock(reason_mutex_);
    std::vector<int> dead = dead_ranks_;
    if (!broken_) return dead;
    // A broken engine reads its sockets no more, and the failure may have
    // come before another dead peer's end of stream reached this rank (a
    // host's processes die a few milliseconds apart): look at what waits on
    // each socket still open, without taking it. Only an end of stream or a
    // reset with nothing before it is a death; a peer that gave up left its
    // abort frame there first.
    for (const auto& peer : peers_) {
        if (!peer || peer->gone || !peer->socket.is_open()) continue;
        char byte = 0;
        const ssize_t got = ::recv(peer->socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (got == 0 || (got < 0 && errno == ECONNRESET)) dead.push_back(peer->rank);
    }
    std::sort(dead.begin(), dead.end());
    dead.erase(std::unique(dead.begin(), dead.end()), dead.end());
    return dead;
}

void Engine::record_dead(const Peer& peer) {
    std::lock_guard lock(reason_mutex_);
    const auto at = std::lower_bound(dead_ranks_.begin(), dead_ranks_.end(), peer.rank);
    if (at == dead_ranks_.end() || *at != peer.rank) dead_ranks_.insert(at, peer.rank);
}

void Engine::mark_broken(Errc code, std::string reason) {
    {
        std::lock_guard lock(reason_mutex_);
        broken_reason_ = std::move(reason);
    }
    broken_code_ = code;
    broken_ = true;
}

void Engine::fail(Errc code, std::string message) {
    if (failed_) return;
    failed_ = true;
    fail_code_ = code;
    fail_message_ = std::move(message);
}

void Engine::fail_now(Errc code, std::string message) {
    fail(code, std::move(message));
    break_and_throw();
}

std::string Engine::waiting_on() const {
    std::vector<std::string> parts;
    for (const auto& peer : peers_) {
        if (!peer) continue;
        if (peer->recv)
            parts.push_back(fmt::format("data from rank {} ({} of {} received)", peer->rank,
                                        format_size(peer->recv_done), format_size(peer->recv->bytes)));
        if (peer->send)
            parts.push_back(fmt::format("rank {} to take data ({} of {} sent)", peer->rank,
                                        format_size(peer->send_done), format_size(peer->send->bytes)));
    }
    if (parts.empty()) return "nothing";
    std::string text = parts[0];
    for (std::size_t i = 1; i < parts.size(); ++i) text += (i + 1 == parts.size() ? " and " : ", ") + parts[i];
    return text + "; a rank that never called this operation, or a hung or dead one, is the usual cause";
}

void Engine::break_and_throw() {
    in_op_ = false;
    if (!broken_) {
        // Writes that finished but whose handlers have not run yet still
        // count as in flight; run them (nothing new starts once failed) so
        // those peers get the abort frame instead of a bare close.
        io_->restart();
        io_->poll();
        mark_broken(fail_code_, fail_message_);
        // Tell every peer we can reach why we stop, so none waits for us until
        // its own timeout; a connection with half a frame in it is only closed.
        FrameHeader abort{FrameKind::abort, op_, 0, 0};
        abort.op.aux = static_cast<uint64_t>(fail_code_);
        const std::string text = fail_message_.substr(0, kMaxAbortText);
        abort.length = static_cast<uint32_t>(text.size());
        for (auto& peer : peers_) {
            if (!peer) continue;
            peer->recv = nullptr;
            if (!peer->awaiting_ack) peer->send = nullptr;
            peer->acks.clear();
            error_code ignored;
            // A peer gone by its own abort or goodbye still gets ours: a bare
            // close would look, to its dead_ranks(), like a death.
            if (peer->mid_frame || !peer->socket.is_open()) {
                peer->socket.close(ignored);
                continue;
            }
            encode(abort, peer->out_header);
            const std::array<asio::const_buffer, 2> buffers{asio::buffer(peer->out_header), asio::buffer(text)};
            peer->socket.non_blocking(true, ignored);
            asio::write(peer->link, buffers, ignored);  // best effort: never waits on a full socket
            // Half-close only: closing a socket with unread data in it sends a
            // reset, and a reset can reach the peer before it read the abort.
            // The sockets close with the engine.
            peer->socket.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
        }
        // A peer may be copying our buffer right now (a direct send not yet
        // acknowledged); the caller frees that buffer once we throw. So wait,
        // within the operation's deadline, until each such peer acknowledged,
        // gave up (its abort) or went away.
        auto copying = [&] {
            for (auto& peer : peers_)
                if (peer && peer->awaiting_ack && !peer->gone && peer->socket.is_open()) return true;
            return false;
        };
        io_->restart();
        while (copying() && Clock::now() < deadline_)
            if (io_->run_one_until(deadline_) == 0 && io_->stopped()) io_->restart();
        for (auto& peer : peers_) {
            if (!peer) continue;
            peer->send = nullptr;
            peer->awaiting_ack = false;
            error_code ignored;
            peer->socket.cancel(ignored);
        }
        io_->restart();
        io_->poll();  // let cancelled handlers run while the peers still exist
    }
    throw Error(fail_code_, fail_message_);
}

void Engine::close(std::chrono::milliseconds grace) {
    if (broken_) return;
    mark_broken(Errc::closed, "it was closed");
    std::size_t writes = 0;
    for (auto& peer : peers_) {
        // A peer gone by its abort still hears the goodbye: a bare close
        // would look, to its dead_ranks(), like a death.
        if (!peer || !peer->socket.is_open() || peer->mid_frame) continue;
        peer->recv = peer->send = nullptr;
        encode(FrameHeader{FrameKind::goodbye, op_, 0, 0}, peer->out_header);
        ++writes;
        asio::async_write(peer->link, asio::buffer(peer->out_header),
                          [&writes](const error_code&, std::size_t) { --writes; });
    }
    const auto until = Clock::now() + grace;
    io_->restart();
    while (writes > 0 && io_->run_one_until(until) > 0) {
    }
    for (auto& peer : peers_) {
        if (!peer) continue;
        error_code ignored;
        peer->socket.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
        peer->socket.close(ignored);
    }
    io_->restart();
    io_->poll();
}

}  // namespace cohort::comm
