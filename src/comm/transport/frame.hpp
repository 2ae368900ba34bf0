// The data connection's wire format: every message is a fixed 48-byte
// header followed by at most max_frame payload bytes. The header repeats the
// operation's signature so a receiver catches ranks that disagree on what
// they are doing, and a bounded length means a peer's bytes never size an
// allocation. Integers are little-endian.
#pragma once

#include <cohort/error.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace cohort::comm {

inline constexpr uint32_t kFrameMagic = 0x46484F43;  // "COHF"
inline constexpr std::size_t kFrameHeaderBytes = 48;
inline constexpr std::size_t kMaxAbortText = 4096;

// direct: the payload is {u64 address, u64 bytes} of the sender's buffer,
// which the receiver copies with process_vm_readv (same machine only) and
// answers with an ack, after which the sender may reuse the buffer.
enum class FrameKind : uint8_t { data = 1, abort = 2, goodbye = 3, direct = 4, ack = 5 };
inline constexpr std::size_t kDirectPayload = 16;
enum class OpKind : uint8_t { none = 0, allreduce = 1, broadcast = 2, barrier = 3, allgather = 4, reduce_scatter = 5 };

const char* op_kind_name(OpKind kind) noexcept;

// What every rank must agree on for one collective.
struct OpSignature {
    OpKind kind = OpKind::none;
    uint8_t dtype = 0;
    uint8_t reduce_op = 0;
    uint8_t algorithm = 0;
    uint32_t root = 0;
    uint64_t seq = 0;    // the operation's number on this communicator, from 1
    uint64_t count = 0;  // elements (bytes for broadcast and allgather)
    uint64_t aux = 0;    // named all-reduce: a hash of the names, sizes and types
    // Shared-memory all-reduce: 24 bits naming how the message is cut into
    // rounds (CommTuning's pipeline_chunk and shm_single_round_max); 0 for
    // the default cuts, so peers of a version without it still agree.
    uint32_t cuts = 0;

    bool operator==(const OpSignature&) const = default;
};

// "allreduce #12 (ring, 1000 float32, sum)"
std::string describe(const OpSignature& op);

struct FrameHeader {
    FrameKind kind = FrameKind::data;
    OpSignature op;
    uint32_t tag = 0;     // the algorithm's step, checked by the receiver
    uint32_t length = 0;  // payload bytes after the header
};

using FrameBytes = std::array<unsigned char, kFrameHeaderBytes>;

void encode(const FrameHeader& header, FrameBytes& out) noexcept;
// Error(peer_failed) for a header that is not a cohort frame or whose length
// exceeds `max_payload`; the message says what was wrong, not whose it was.
FrameHeader decode(const FrameBytes& bytes, std::size_t max_payload);

// Why `got` differs from `expected`, or "" if it does not. Names the
// sender's operation the way a user wrote it.
std::string mismatch(const OpSignature& expected, const OpSignature& got);

}  // namespace cohort::comm
