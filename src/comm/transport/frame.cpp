// Encoding, decoding and comparing frame headers.
#include "comm/transport/frame.hpp"

#include <cohort/communicator.hpp>
#include <cohort/dtype.hpp>
#include <cohort/reduce_op.hpp>

#include <fmt/format.h>

#include <cstring>

namespace cohort::comm {
namespace {

template <typename T>
void put(unsigned char* at, T value) noexcept {
    for (std::size_t i = 0; i < sizeof(T); ++i) at[i] = static_cast<unsigned char>(uint64_t(value) >> (8 * i));
}

template <typename T>
T get(const unsigned char* at) noexcept {
    uint64_t value = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) value |= uint64_t(at[i]) << (8 * i);
    return static_cast<T>(value);
}

std::string arguments(const OpSignature& op) {
    const auto algorithm = algorithm_name(static_cast<Algorithm>(op.algorithm));
    switch (op.kind) {
        case OpKind::allreduce:
        case OpKind::reduce_scatter:
            return fmt::format("{}, {} {}, {}", algorithm, op.count, dtype_name(static_cast<DataType>(op.dtype)),
                               reduce_op_name(static_cast<ReduceOp>(op.reduce_op)));
        case OpKind::broadcast: return fmt::format("{} bytes, root {}", op.count, op.root);
        case OpKind::allgather: return fmt::format("{} bytes", op.count);
        case OpKind::barrier:
        case OpKind::none: break;
    }
    return "";
}

}  // namespace

const char* op_kind_name(OpKind kind) noexcept {
    switch (kind) {
        case OpKind::allreduce: return "allreduce";
        case OpKind::broadcast: return "broadcast";
        case OpKind::barrier: return "barrier";
        case OpKind::allgather: return "allgather";
        case OpKind::reduce_scatter: return "reduce_scatter";
        case OpKind::none: break;
    }
    return "no operation";
}

std::string describe(const OpSignature& op) {
    const std::string args = arguments(op);
    if (args.empty()) return fmt::format("{} #{}", op_kind_name(op.kind), op.seq);
    return fmt::format("{} #{} ({})", op_kind_name(op.kind), op.seq, args);
}

void encode(const FrameHeader& h, FrameBytes& out) noexcept {
    out.fill(0);
    unsigned char* p = out.data();
    put<uint32_t>(p + 0, kFrameMagic);
    p[4] = static_cast<unsigned char>(h.kind);
    p[5] = static_cast<unsigned char>(h.op.kind);
    p[6] = h.op.dtype;
    p[7] = h.op.reduce_op;
    p[8] = h.op.algorithm;
    p[9] = static_cast<unsigned char>(h.op.cuts);
    p[10] = static_cast<unsigned char>(h.op.cuts >> 8);
    p[11] = static_cast<unsigned char>(h.op.cuts >> 16);
    put<uint32_t>(p + 12, h.op.root);
    put<uint64_t>(p + 16, h.op.seq);
    put<uint64_t>(p + 24, h.op.count);
    put<uint64_t>(p + 32, h.op.aux);
    put<uint32_t>(p + 40, h.tag);
    put<uint32_t>(p + 44, h.length);
}

FrameHeader decode(const FrameBytes& bytes, std::size_t max_payload) {
    const unsigned char* p = bytes.data();
    const auto magic = get<uint32_t>(p);
    if (magic != kFrameMagic)
        throw Error(Errc::peer_failed, fmt::format("sent a malformed frame (magic {:#010x}, expected {:#010x})", magic,
                                                   kFrameMagic));
    FrameHeader h;
    if (p[4] < 1 || p[4] > 5) throw Error(Errc::peer_failed, fmt::format("sent a frame of unknown kind {}", p[4]));
    h.kind = static_cast<FrameKind>(p[4]);
    if (p[5] > 5) throw Error(Errc::peer_failed, fmt::format("sent a frame for unknown operation {}", p[5]));
    h.op.kind = static_cast<OpKind>(p[5]);
    h.op.dtype = p[6];
    h.op.reduce_op = p[7];
    h.op.algorithm = p[8];
    h.op.cuts = uint32_t(p[9]) | uint32_t(p[10]) << 8 | uint32_t(p[11]) << 16;
    h.op.root = get<uint32_t>(p + 12);
    h.op.seq = get<uint64_t>(p + 16);
    h.op.count = get<uint64_t>(p + 24);
    h.op.aux = get<uint64_t>(p + 32);
    h.tag = get<uint32_t>(p + 40);
    h.length = get<uint32_t>(p + 44);
    std::size_t limit = 0;
    switch (h.kind) {
        case FrameKind::data: limit = max_payload; break;
        case FrameKind::abort: limit = kMaxAbortText; break;
        case FrameKind::direct: limit = kDirectPayload; break;
        case FrameKind::goodbye:
        case FrameKind::ack: break;
    }
    if (h.length > limit)
        throw Error(Errc::peer_failed,
                    fmt::format("sent a frame of {} bytes, more than the {} allowed", h.length, limit));
    if (h.kind == FrameKind::direct && h.length != kDirectPayload)
        throw Error(Errc::peer_failed,
                    fmt::format("sent a direct frame of {} bytes; it must have exactly {}", h.length, kDirectPayload));
    return h;
}

std::string mismatch(const OpSignature& expected, const OpSignature& got) {
    if (expected == got) return "";
    if (expected.seq != got.seq)
        return fmt::format("it is at {} while this rank is at {}", describe(got), describe(expected));
    if (expected.cuts != got.cuts && expected.kind == got.kind && expected.count == got.count &&
        expected.algorithm == got.algorithm)
        return fmt::format("it cuts {} into other rounds than this rank (tuning.pipeline_chunk or "
                           "tuning.shm_single_round_max differ: give every rank the same set_tuning)",
                           describe(got));
    if (expected.aux != got.aux && expected.kind == got.kind && expected.count == got.count)
        return fmt::format("it called {} with other tensor names, sizes or types than this rank", describe(got));
    return fmt::format("it called {} while this rank called {}", describe(got), describe(expected));
}

}  // namespace cohort::comm
