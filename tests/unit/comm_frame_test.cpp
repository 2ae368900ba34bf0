// The collectives' wire format (comm/transport/frame.hpp), the connection
// handshake (comm/transport/handshake.hpp), and a real rank talking to a
// fake peer that this test plays byte by byte: whatever a peer sends, the
// real rank fails with an Error naming it, quickly, and never sizes an
// allocation from the peer's bytes.
#include "comm/transport/direct_proof.hpp"
#include "comm/transport/frame.hpp"
#include "comm/transport/handshake.hpp"

#include <cohort/communicator.hpp>
#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <new>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// The largest single allocation through operator new since the last reset:
// the fake-peer tests check that a peer announcing a 1 GiB frame does not
// make the rank allocate it. Replacing the global operator new is allowed
// once per program; this file is the only one in unit_tests that does.
// TSan's runtime brings its own operator new and delete, which cannot be
// replaced as well; under TSan (scripts/tsan.sh) the allocation check is
// left out and the rest of each test runs.
#if defined(__SANITIZE_THREAD__)
#define COHORT_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COHORT_TEST_TSAN 1
#endif
#endif
namespace {
std::atomic<std::size_t> g_largest_allocation{0};
}  // namespace

#ifndef COHORT_TEST_TSAN
void* operator new(std::size_t bytes) {
    std::size_t seen = g_largest_allocation.load(std::memory_order_relaxed);
    while (bytes > seen && !g_largest_allocation.compare_exchange_weak(seen, bytes, std::memory_order_relaxed)) {
    }
    if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
    throw std::bad_alloc();
}
// The matching deletes, replaced too: ASan reports memory from malloc freed
// by the runtime's own operator delete as an alloc-dealloc mismatch. GCC
// does not see that new is replaced as well, and warns of a mismatch.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // COHORT_TEST_TSAN

namespace cohort::comm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

template <typename F>
std::string error_message(Errc code, F&& f) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), code) << "message: " << e.what();
        return e.what();
    }
    ADD_FAILURE() << "expected cohort::Error(" << errc_name(code) << "), nothing was thrown";
    return {};
}

// --------------------------------------------------------------- frames

OpSignature allreduce_sig(uint64_t seq, uint64_t count) {
    return OpSignature{OpKind::allreduce, static_cast<uint8_t>(DataType::float32), static_cast<uint8_t>(ReduceOp::sum),
                       static_cast<uint8_t>(Algorithm::doubling), 0, seq, count, 0};
}

TEST(Frame, EncodeDecodeRoundTrip) {
    std::mt19937_64 rng(12345);
    for (int i = 0; i < 1000; ++i) {
        FrameHeader h;
        h.kind = static_cast<FrameKind>(1 + rng() % 5);
        h.op.kind = static_cast<OpKind>(rng() % 6);
        h.op.dtype = static_cast<uint8_t>(rng());
        h.op.reduce_op = static_cast<uint8_t>(rng());
        h.op.algorithm = static_cast<uint8_t>(rng());
        h.op.root = static_cast<uint32_t>(rng());
        h.op.seq = rng();
        h.op.count = rng();
        h.op.aux = rng();
        h.op.cuts = static_cast<uint32_t>(rng() & 0xFFFFFF);
        h.tag = static_cast<uint32_t>(rng());
        switch (h.kind) {
            case FrameKind::data: h.length = static_cast<uint32_t>(rng() % 4097); break;
            case FrameKind::abort: h.length = static_cast<uint32_t>(rng() % (kMaxAbortText + 1)); break;
            case FrameKind::direct: h.length = static_cast<uint32_t>(kDirectPayload); break;
            case FrameKind::goodbye:
            case FrameKind::ack: h.length = 0; break;
        }
        FrameBytes bytes;
        encode(h, bytes);
        const FrameHeader back = decode(bytes, 4096);
        EXPECT_EQ(back.kind, h.kind);
        EXPECT_EQ(back.op, h.op);
        EXPECT_EQ(back.tag, h.tag);
        EXPECT_EQ(back.length, h.length);
    }
}

// The layout is the wire format: little-endian, fixed offsets.
TEST(Frame, LayoutIsLittleEndianAtFixedOffsets) {
    FrameHeader h{FrameKind::data, allreduce_sig(0x0102030405060708ull, 0x1112131415161718ull), 0x21222324, 0x31323334};
    h.op.root = 0x41424344;
    h.op.aux = 0x5152535455565758ull;
    FrameBytes b;
    encode(h, b);
    EXPECT_EQ(kFrameHeaderBytes, 48u);
    EXPECT_EQ(std::vector<unsigned char>(b.begin(), b.begin() + 4), (std::vector<unsigned char>{'C', 'O', 'H', 'F'}));
    EXPECT_EQ(b[4], 1);  // data
    EXPECT_EQ(b[5], 1);  // allreduce
    EXPECT_EQ(b[8], static_cast<unsigned char>(Algorithm::doubling));
    EXPECT_EQ(b[12], 0x44);
    EXPECT_EQ(b[16], 0x08);
    EXPECT_EQ(b[23], 0x01);
    EXPECT_EQ(b[24], 0x18);
    EXPECT_EQ(b[32], 0x58);
    EXPECT_EQ(b[40], 0x24);
    EXPECT_EQ(b[44], 0x34);
    EXPECT_EQ(b[47], 0x31);
    EXPECT_EQ(b[9], 0);  // default cuts: the bytes older versions leave zero
    h.op.cuts = 0x616263;
    encode(h, b);
    EXPECT_EQ(b[9], 0x63);
    EXPECT_EQ(b[11], 0x61);
}

// Shared memory's cuts (CommTuning) differing between ranks say so.
TEST(Frame, DifferentCutsAreAMismatchSayingSo) {
    OpSignature a = allreduce_sig(3, 1000), b = a;
    b.cuts = 77;
    const std::string why = mismatch(a, b);
    EXPECT_NE(why.find("into other rounds than this rank (tuning.pipeline_chunk"), std::string::npos) << why;
    EXPECT_EQ(mismatch(a, a), "");
}

TEST(Frame, BadMagicIsRejected) {
    FrameBytes b;
    encode(FrameHeader{FrameKind::data, allreduce_sig(1, 4), 0, 16}, b);
    b[0] = 'X';
    const std::string m = error_message(Errc::peer_failed, [&] { decode(b, 4096); });
    EXPECT_TRUE(contains(m, "malformed frame")) << m;
    EXPECT_TRUE(contains(m, "0x46484f43")) << m;
}

TEST(Frame, UnknownKindsAreRejected) {
    for (unsigned char kind : {0, 6, 255}) {
        FrameBytes b;
        encode(FrameHeader{FrameKind::data, allreduce_sig(1, 4), 0, 16}, b);
        b[4] = kind;
        const std::string m = error_message(Errc::peer_failed, [&] { decode(b, 4096); });
        EXPECT_TRUE(contains(m, "unknown kind " + std::to_string(kind))) << m;
    }
    FrameBytes b;
    encode(FrameHeader{FrameKind::data, allreduce_sig(1, 4), 0, 16}, b);
    b[5] = 6;
    const std::string m = error_message(Errc::peer_failed, [&] { decode(b, 4096); });
    EXPECT_TRUE(contains(m, "unknown operation 6")) << m;
}

TEST(Frame, OversizedLengthsAreRejected) {
    FrameBytes b;
    encode(FrameHeader{FrameKind::data, allreduce_sig(1, 4), 0, 4097}, b);
    std::string m = error_message(Errc::peer_failed, [&] { decode(b, 4096); });
    EXPECT_TRUE(contains(m, "4097 bytes, more than the 4096 allowed")) << m;
    encode(FrameHeader{FrameKind::data, allreduce_sig(1, 4), 0, 4096}, b);
    EXPECT_EQ(decode(b, 4096).length, 4096u);
    encode(FrameHeader{FrameKind::data, allreduce_sig(1, 4), 0, 1u << 30}, b);
    m = error_message(Errc::peer_failed, [&] { decode(b, std::size_t(4) << 20); });
    EXPECT_TRUE(contains(m, "1073741824 bytes")) << m;
    // An abort's text is bounded by kMaxAbortText whatever max_payload is.
    encode(FrameHeader{FrameKind::abort, allreduce_sig(1, 4), 0, kMaxAbortText + 1}, b);
    m = error_message(Errc::peer_failed, [&] { decode(b, std::size_t(256) << 20); });
    EXPECT_TRUE(contains(m, "more than the 4096 allowed")) << m;
    encode(FrameHeader{FrameKind::goodbye, allreduce_sig(1, 4), 0, 0xFFFFFFFFu}, b);
    error_message(Errc::peer_failed, [&] { decode(b, 4096); });
}

// A direct frame carries exactly {u64 address, u64 length}; an ack nothing.
TEST(Frame, DirectAndAckPayloadsAreBounded) {
    EXPECT_EQ(kDirectPayload, 16u);
    FrameBytes b;
    encode(FrameHeader{FrameKind::direct, allreduce_sig(1, 4), 1, 16}, b);
    EXPECT_EQ(b[4], 4);  // direct
    EXPECT_EQ(decode(b, 4096).length, 16u);
    for (uint32_t length : {17u, 4096u, 1u << 30, 0xFFFFFFFFu}) {
        encode(FrameHeader{FrameKind::direct, allreduce_sig(1, 4), 1, length}, b);
        // Whatever max_payload allows data frames.
        const std::string m = error_message(Errc::peer_failed, [&] { decode(b, std::size_t(256) << 20); });
        EXPECT_TRUE(contains(m, std::to_string(length) + " bytes, more than the 16 allowed")) << m;
    }
    encode(FrameHeader{FrameKind::ack, allreduce_sig(1, 4), 1, 0}, b);
    EXPECT_EQ(b[4], 5);  // ack
    EXPECT_EQ(decode(b, 4096).kind, FrameKind::ack);
    for (uint32_t length : {1u, 16u, 0xFFFFFFFFu}) {
        encode(FrameHeader{FrameKind::ack, allreduce_sig(1, 4), 1, length}, b);
        const std::string m = error_message(Errc::peer_failed, [&] { decode(b, 4096); });
        EXPECT_TRUE(contains(m, std::to_string(length) + " bytes, more than the 0 allowed")) << m;
    }
}

// A direct frame shorter than 16 bytes is malformed too. Got (a gap in
// src/comm): decode() only bounds a direct frame's length from above
// (length <= kDirectPayload), so lengths 0..15 pass, and
// Engine::read_direct then reads 16 bytes whatever the header said, taking
// the missing bytes from the next frame's header. Disabled until decode()
// requires length == kDirectPayload.
TEST(Frame, ShortDirectPayloadsAreRejected) {
    for (uint32_t length : {0u, 8u, 15u}) {
        FrameBytes b;
        encode(FrameHeader{FrameKind::direct, allreduce_sig(1, 4), 1, length}, b);
        error_message(Errc::peer_failed, [&] { decode(b, 4096); });
    }
}

TEST(Frame, Describe) {
    OpSignature op{OpKind::allreduce, static_cast<uint8_t>(DataType::float32), static_cast<uint8_t>(ReduceOp::sum),
                   static_cast<uint8_t>(Algorithm::ring), 0, 12, 1000, 0};
    EXPECT_EQ(describe(op), "allreduce #12 (ring, 1000 float32, sum)");
    EXPECT_EQ(describe(OpSignature{OpKind::broadcast, 0, 0, 0, 2, 3, 10, 0}), "broadcast #3 (10 bytes, root 2)");
    EXPECT_EQ(describe(OpSignature{OpKind::barrier, 0, 0, 0, 0, 4, 0, 0}), "barrier #4");
    EXPECT_EQ(describe(OpSignature{OpKind::allgather, 0, 0, 0, 0, 5, 7, 0}), "allgather #5 (7 bytes)");
    EXPECT_EQ(describe(OpSignature{OpKind::reduce_scatter, static_cast<uint8_t>(DataType::int64),
                                   static_cast<uint8_t>(ReduceOp::max), static_cast<uint8_t>(Algorithm::ring), 0, 6, 3,
                                   0}),
              "reduce_scatter #6 (ring, 3 int64, max)");
    // Values a peer made up still describe without crashing.
    const std::string odd = describe(OpSignature{OpKind::allreduce, 200, 200, 200, 0, 1, 1, 0});
    EXPECT_TRUE(contains(odd, "unknown")) << odd;
}

TEST(Frame, MismatchTexts) {
    const OpSignature mine = allreduce_sig(2, 100);
    EXPECT_EQ(mismatch(mine, mine), "");

    OpSignature later = mine;
    later.seq = 3;
    std::string m = mismatch(mine, later);
    EXPECT_TRUE(contains(m, "it is at allreduce #3")) << m;
    EXPECT_TRUE(contains(m, "this rank is at allreduce #2")) << m;

    OpSignature tensors = mine;
    tensors.aux = 99;
    m = mismatch(mine, tensors);
    EXPECT_TRUE(contains(m, "other tensor names, sizes or types")) << m;

    OpSignature count = mine;
    count.count = 101;
    m = mismatch(mine, count);
    EXPECT_TRUE(contains(m, "it called allreduce #2 (doubling, 101 float32, sum)")) << m;
    EXPECT_TRUE(contains(m, "this rank called allreduce #2 (doubling, 100 float32, sum)")) << m;

    const OpSignature broadcast{OpKind::broadcast, 0, 0, 0, 1, 2, 400, 0};
    m = mismatch(mine, broadcast);
    EXPECT_TRUE(contains(m, "it called broadcast #2 (400 bytes, root 1) while this rank called allreduce #2")) << m;

    OpSignature op = mine;
    op.reduce_op = static_cast<uint8_t>(ReduceOp::max);
    m = mismatch(mine, op);
    EXPECT_TRUE(contains(m, "max")) << m;
}

// ------------------------------------------------------------- handshake

Hello hello(uint32_t rank, uint32_t size, std::string job = "job", uint64_t generation = 7, bool secret = false) {
    Hello h;
    h.rank = rank;
    h.size = size;
    h.job_id = std::move(job);
    h.generation = generation;
    h.has_secret = secret;
    h.nonce = fresh_nonce();
    return h;
}

TEST(Handshake, HelloRoundTrip) {
    Hello h = hello(3, 8, "training-run-42", 0x0102030405060708ull, true);
    h.pid = 0x61626364;
    h.boot = 0x7172737475767778ull;
    h.direct_socket = "cohortdc0123456789abcdef";
    const auto bytes = encode_hello(h);
    ASSERT_EQ(bytes.size(), kHelloFixedBytes + h.job_id.size());
    EXPECT_EQ(std::vector<unsigned char>(bytes.begin(), bytes.begin() + 4),
              (std::vector<unsigned char>{'C', 'O', 'H', 'S'}));
    Hello back;
    const std::size_t job = decode_hello_fixed(bytes.data(), back);
    EXPECT_EQ(job, h.job_id.size());
    back.job_id.assign(reinterpret_cast<const char*>(bytes.data()) + kHelloFixedBytes, job);
    EXPECT_EQ(back.version, kProtocolVersion);
    EXPECT_TRUE(back.has_secret);
    EXPECT_EQ(back.rank, 3u);
    EXPECT_EQ(back.size, 8u);
    EXPECT_EQ(back.generation, 0x0102030405060708ull);
    EXPECT_EQ(back.nonce, h.nonce);
    EXPECT_EQ(back.pid, 0x61626364u);
    EXPECT_EQ(back.boot, 0x7172737475767778ull);
    EXPECT_EQ(back.direct_socket, "cohortdc0123456789abcdef");
    EXPECT_EQ(back.job_id, "training-run-42");
    // The fixed part: magic, version, flags, rank, size, generation, nonce,
    // pid, boot, direct socket name (24 bytes, zero-padded), job id length.
    // The same 78 bytes as version 1, so a version 1 peer is refused for
    // its version.
    EXPECT_EQ(kHelloFixedBytes, 78u);
    EXPECT_EQ(kProtocolVersion, 3u);
    EXPECT_EQ(bytes[40], 0x64);  // pid, after the 16-byte nonce at 24
    EXPECT_EQ(bytes[44], 0x78);  // boot
    EXPECT_EQ(bytes[52], 'c');   // direct socket
    EXPECT_EQ(bytes[76], 15);    // job id length
    // A shorter name (or none) is padded with zeros and comes back as it was.
    h.direct_socket = "";
    auto none = encode_hello(h);
    EXPECT_EQ(decode_hello_fixed(none.data(), back), h.job_id.size());
    EXPECT_EQ(back.direct_socket, "");
}

// A claim of a connection round-trips, and is judged on the kernel's word
// about its sender, the nonce, and a probe that reads back.
TEST(DirectProof, ClaimsAreJudgedOnTheKernelsWord) {
    const auto nonce = fresh_nonce();
    const DirectClaim claim = claim_for(nonce, connection_key("127.0.0.1:1", "127.0.0.1:2"));
    EXPECT_EQ(claim.connection, "127.0.0.1:1>127.0.0.1:2");
    const auto bytes = encode_claim(claim);
    ASSERT_EQ(bytes.size(), kClaimFixedBytes + claim.connection.size());
    DirectClaim back;
    ASSERT_EQ(decode_claim_fixed(bytes.data(), back), claim.connection.size());
    EXPECT_EQ(back.nonce, nonce);
    EXPECT_EQ(back.probe_address, claim.probe_address);
    EXPECT_EQ(back.probe, claim.probe);
    auto bad = bytes;
    bad[0] = 'X';
    EXPECT_TRUE(contains(error_message(Errc::peer_failed, [&] { decode_claim_fixed(bad.data(), back); }),
                         "not a cohort claim"));
    bad = bytes;
    bad[kClaimFixedBytes - 1] = 0x10;  // 4096 + a few
    EXPECT_TRUE(
        contains(error_message(Errc::peer_failed, [&] { decode_claim_fixed(bad.data(), back); }), "more than 256"));

    const ucred me{getpid(), geteuid(), getegid()};
    EXPECT_TRUE(contains(judge_claim(std::nullopt, claim, nonce), "SO_PEERCRED"));
    EXPECT_TRUE(contains(judge_claim(ucred{0, geteuid(), getegid()}, claim, nonce), "PID namespace"));
    EXPECT_TRUE(contains(judge_claim(ucred{getpid(), geteuid() + 1, getegid()}, claim, nonce), "uid"));
    EXPECT_TRUE(contains(judge_claim(me, claim, fresh_nonce()), "another nonce"));
    DirectClaim lying = claim;
    lying.probe[0] ^= 1;
    EXPECT_TRUE(contains(judge_claim(me, lying, nonce), "does not hold the probe")) << judge_claim(me, lying, nonce);
    if (!read_probe(getpid(), claim.probe_address, claim.probe).empty())
        GTEST_SKIP() << "process_vm_readv is not allowed here: "
                     << read_probe(getpid(), claim.probe_address, claim.probe);
    EXPECT_EQ(judge_claim(me, claim, nonce), "");
}

TEST(Handshake, DecodeRejectsStrangers) {
    auto bytes = encode_hello(hello(1, 2));
    Hello out;
    bytes[0] = 'G';  // "GET / HTTP/1.1"
    std::string m = error_message(Errc::peer_failed, [&] { decode_hello_fixed(bytes.data(), out); });
    EXPECT_TRUE(contains(m, "not a cohort peer")) << m;
    // A refusal where a hello was expected.
    const auto refusal_bytes = encode_refusal("go away");
    std::vector<unsigned char> padded(refusal_bytes);
    padded.resize(kHelloFixedBytes);
    error_message(Errc::unavailable, [&] { decode_hello_fixed(padded.data(), out); });
    // A job id longer than allowed.
    bytes = encode_hello(hello(1, 2));
    bytes[kHelloFixedBytes - 2] = 0x01;  // 257
    bytes[kHelloFixedBytes - 1] = 0x01;
    m = error_message(Errc::peer_failed, [&] { decode_hello_fixed(bytes.data(), out); });
    EXPECT_TRUE(contains(m, "257")) << m;
}

TEST(Handshake, RefusalSaysWhatDiffered) {
    const Hello self = hello(0, 4);
    EXPECT_EQ(refusal(self, hello(2, 4), -1), "");
    EXPECT_EQ(refusal(hello(3, 4), hello(2, 4), 2), "");

    Hello v = hello(1, 4);
    v.version = kProtocolVersion + 1;
    EXPECT_TRUE(contains(refusal(self, v, -1), "protocol version differs"));
    // A version 2 peer runs hierarchical with the leaders alone across hosts.
    v.version = 2;
    std::string old = refusal(self, v, -1);
    EXPECT_TRUE(contains(old, "protocol version differs (this rank 3, peer 2)")) << old;
    std::string m = refusal(self, hello(1, 4, "other"), -1);
    EXPECT_TRUE(contains(m, "job id differs (this rank 'job', peer 'other')")) << m;
    m = refusal(self, hello(1, 4, "job", 8), -1);
    EXPECT_TRUE(contains(m, "generation differs (this rank 7, peer 8)")) << m;
    m = refusal(self, hello(1, 5), -1);
    EXPECT_TRUE(contains(m, "world size differs (this rank 4, peer 5)")) << m;
    m = refusal(hello(3, 4), hello(1, 4), 2);
    EXPECT_TRUE(contains(m, "dialled rank 2, answered by rank 1")) << m;
    m = refusal(self, hello(0, 4), -1);
    EXPECT_TRUE(contains(m, "claims rank 0")) << m;
    m = refusal(self, hello(9, 4), -1);
    EXPECT_TRUE(contains(m, "claims rank 9")) << m;
    m = refusal(hello(0, 4, "job", 7, true), hello(1, 4), -1);
    EXPECT_TRUE(contains(m, "this rank requires a shared secret")) << m;
    m = refusal(self, hello(1, 4, "job", 7, true), -1);
    EXPECT_TRUE(contains(m, "the peer requires a shared secret")) << m;
}

// Found by tests/fuzz/transport_hello: the peer's job id went into the
// refusal (logged, and sent back on the wire) byte for byte.
TEST(Handshake, RefusalEscapesThePeersBytes) {
    const std::string m = refusal(hello(0, 4), hello(1, 4, std::string("a\x01\xff\0b", 5)), -1);
    EXPECT_TRUE(contains(m, "peer 'a\\x01\\xff\\x00b'")) << m;
    for (const char c : m) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << m;
}

TEST(Handshake, EncodedRefusal) {
    const auto bytes = encode_refusal("job id differs");
    ASSERT_EQ(bytes.size(), 4u + 2u + 14u);
    EXPECT_EQ(std::vector<unsigned char>(bytes.begin(), bytes.begin() + 4),
              (std::vector<unsigned char>{'C', 'O', 'H', 'R'}));
    EXPECT_EQ(bytes[4], 14);
    EXPECT_EQ(bytes[5], 0);
    EXPECT_EQ(std::string(bytes.begin() + 6, bytes.end()), "job id differs");
    const auto cut = encode_refusal(std::string(5000, 'x'));
    EXPECT_EQ(cut.size(), 4u + 2u + 1024u);
}

TEST(Handshake, ProofsDependOnDirectionSecretAndNonces) {
    const Hello a = hello(0, 2), b = hello(1, 2);
    const auto ab = proof("secret", a, b);
    EXPECT_TRUE(proofs_equal(ab, proof("secret", a, b)));
    EXPECT_FALSE(proofs_equal(ab, proof("secret", b, a))) << "a proof must not be reflected back";
    EXPECT_FALSE(proofs_equal(ab, proof("Secret", a, b)));
    EXPECT_FALSE(proofs_equal(ab, proof("", a, b)));
    Hello fresh = a;
    fresh.nonce = fresh_nonce();
    EXPECT_FALSE(proofs_equal(ab, proof("secret", fresh, b))) << "a recorded proof must not be replayed";
    Hello other_gen = a;
    other_gen.generation = 8;
    EXPECT_FALSE(proofs_equal(ab, proof("secret", other_gen, b)));
    EXPECT_NE(fresh_nonce(), fresh_nonce());
}

// ------------------------------------------------------------- fake peer

// The real rank's operation timeout: far more than any exchange here takes
// on a loaded machine, short enough that a test waiting it out stays cheap.
// Failures the peer's bytes cause must come in well under it.
constexpr std::chrono::milliseconds kOpTimeout{3000};

// A blocking socket with a receive timeout, so a test never hangs on it; the
// timeout is longer than the real rank's, so that rank gives up first.
class Socket {
public:
    Socket(const std::string& host, uint16_t port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        timeval tv{5, 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        int one = 1;
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
            throw std::runtime_error("cannot connect to the real rank: " + std::string(std::strerror(errno)));
    }
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;
    ~Socket() { close(); }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    void send(const void* data, std::size_t n) {
        const auto* p = static_cast<const unsigned char*>(data);
        while (n > 0) {
            const ssize_t put = ::send(fd_, p, n, MSG_NOSIGNAL);
            if (put <= 0) throw std::runtime_error("send to the real rank failed");
            p += put;
            n -= static_cast<std::size_t>(put);
        }
    }
    template <typename Bytes>
    void send(const Bytes& bytes) {
        send(bytes.data(), bytes.size());
    }
    // Reads exactly n bytes; false on EOF or timeout.
    bool recv(void* data, std::size_t n) {
        auto* p = static_cast<unsigned char*>(data);
        while (n > 0) {
            const ssize_t got = ::recv(fd_, p, n, 0);
            if (got <= 0) return false;
            p += got;
            n -= static_cast<std::size_t>(got);
        }
        return true;
    }

    // "ip:port" of this end, as rank 0 sees its peer.
    std::string local_address() const {
        sockaddr_in mine{};
        socklen_t n = sizeof mine;
        if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&mine), &n) != 0) return "?";
        char text[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &mine.sin_addr, text, sizeof text);
        return std::string(text) + ":" + std::to_string(ntohs(mine.sin_port));
    }

    // Rank 0 runs in this process: its end of this connection is one of
    // the process's descriptors, the one whose peer is our local address.
    int peer_fd() const {
        sockaddr_in mine{};
        socklen_t n = sizeof mine;
        if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&mine), &n) != 0) return -1;
        for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
            const int fd = std::atoi(entry.path().filename().c_str());
            sockaddr_in theirs{};
            socklen_t m = sizeof theirs;
            if (fd != fd_ && ::getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &m) == 0 &&
                theirs.sin_family == AF_INET && theirs.sin_port == mine.sin_port &&
                theirs.sin_addr.s_addr == mine.sin_addr.s_addr)
                return fd;
        }
        return -1;
    }

private:
    int fd_ = -1;
};

// The header of the real rank's allreduce #1 (doubling's round 1 of two
// ranks), as it sends and expects it.
FrameHeader allreduce_frame(uint32_t length = 16) {
    return FrameHeader{FrameKind::data, allreduce_sig(1, 4), 1, length};
}

// What the real rank's call ended with.
struct Outcome {
    bool constructed = false;
    bool ok = false;
    Errc code = Errc::ok;
    std::string message;
    std::chrono::milliseconds took{0};
    bool broken = false;
    float result[4] = {};
    Transport transport = Transport::self;  // to rank 1
    std::string describe;
};

// Rank 0 of 2 runs for real in a thread: it constructs its Communicator,
// then calls allreduce (doubling, 4 float32, sum). The test is rank 1: it
// registers in the store under the keys bootstrap.cpp uses, dials rank 0 and
// shakes hands with the internal encoders, then sends whatever it likes.
class FakePeer : public ::testing::Test {
protected:
    static constexpr const char* kJob = "cohort";  // CommOptions' defaults
    static constexpr uint64_t kGeneration = 0;

    void SetUp() override {
        server_.emplace("127.0.0.1", 0);
        store_ = open_store(server_->url());
    }

    void TearDown() override {
        socket_.reset();  // unblocks the real rank if a test bailed out early
        if (real_.joinable()) real_.join();
    }

    // `count` floats: 4 fit one frame; more make rank 0 send for a while.
    void start_real_rank(std::chrono::milliseconds connect_timeout = kOpTimeout, std::size_t count = 4) {
        real_ = std::thread([this, connect_timeout, count] {
            CommOptions o;
            o.rank = 0;
            o.size = 2;
            o.store = open_store(server_->url());  // a tcp:// URL would make rank 0 host
            o.address = "127.0.0.1";
            o.timeout = kOpTimeout;
            o.connect_timeout = connect_timeout;
            auto& out = outcome_;
            try {
                Communicator comm(o);
                out.constructed = true;
                out.transport = comm.transports()[1];
                out.describe = comm.describe();
                std::vector<float> data(std::max<std::size_t>(count, 4), 0.0f);
                for (int i = 0; i < 4; ++i) data[i] = static_cast<float>(i + 1);
                const auto start = Clock::now();
                try {
                    comm.allreduce(data.data(), count, DataType::float32, ReduceOp::sum, {Algorithm::doubling, {}});
                    out.ok = true;
                } catch (const Error& e) {
                    out.code = e.code();
                    out.message = e.what();
                }
                out.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
                out.broken = comm.broken();
                std::memcpy(out.result, data.data(), sizeof out.result);
            } catch (const Error& e) {
                out.code = e.code();
                out.message = e.what();
            }
        });
    }

    // Registers rank 1 and returns rank 0's address, as bootstrap.cpp keeps
    // them: cohort/JOB/GENERATION/INSTANCE/rank/R = "ADDRESS\nPORT\nHOST".
    std::pair<std::string, uint16_t> meet_in_store() {
        const std::string job = std::string("cohort/") + kJob + "/" + std::to_string(kGeneration) + "/";
        const int64_t instance = store_->add(job + "instances/1", 1);
        const std::string scope = job + std::to_string(instance) + "/";
        // Rank 0 never dials rank 1 (higher ranks dial lower ones); the port
        // only has to parse.
        store_->set(scope + "rank/1", "127.0.0.1\n1\nfake-host");
        std::istringstream text(store_->get(scope + "rank/0", 5s));
        std::string address, port;
        std::getline(text, address);
        std::getline(text, port);
        return {address, static_cast<uint16_t>(std::stoul(port))};
    }

    // Dials rank 0 and sends `hello`; returns the first 4 bytes of the answer.
    std::array<unsigned char, 4> dial(const Hello& self) {
        const auto [address, port] = meet_in_store();
        rank0_ = address + ":" + std::to_string(port);
        socket_.emplace(address, port);
        socket_->send(encode_hello(self));
        std::array<unsigned char, 4> magic{};
        EXPECT_TRUE(socket_->recv(magic.data(), 4)) << "rank 0 answered nothing";
        return magic;
    }

    // Reads the rest of rank 0's hello after its first 4 bytes.
    Hello read_hello(const std::array<unsigned char, 4>& magic) {
        std::array<unsigned char, kHelloFixedBytes> fixed{};
        std::copy(magic.begin(), magic.end(), fixed.begin());
        Hello peer;
        EXPECT_TRUE(socket_->recv(fixed.data() + 4, fixed.size() - 4)) << "rank 0's hello was cut off";
        peer.job_id.assign(decode_hello_fixed(fixed.data(), peer), '\0');
        EXPECT_TRUE(socket_->recv(peer.job_id.data(), peer.job_id.size())) << "rank 0's job id was cut off";
        // Rank 0 runs in this process: its hello describes it for direct copies.
        EXPECT_EQ(peer.pid, static_cast<uint32_t>(getpid()));
        EXPECT_EQ(peer.direct_socket.rfind(kDirectSocketPrefix, 0), 0u) << peer.direct_socket;
        return peer;
    }

    // Ends the handshake after the hellos (no secret here): each side may
    // claim the connection on the other's local socket, then writes one byte
    // saying it is done and reads the other's; then each writes one byte
    // saying whether it may read the other's memory and reads the other's.
    // Returns rank 0's say. By default the fake says no.
    unsigned char agree_direct(unsigned char mine = 0) {
        const unsigned char done = 1;
        socket_->send(&done, 1);
        unsigned char theirs = 0xFF;
        EXPECT_TRUE(socket_->recv(&theirs, 1)) << "rank 0 never said its claim was done";
        EXPECT_EQ(theirs, 1);
        socket_->send(&mine, 1);
        theirs = 0xFF;
        EXPECT_TRUE(socket_->recv(&theirs, 1)) << "rank 0 sent no direct-copy byte";
        return theirs;
    }
    // Rank 0 cannot read a fake that proved nothing (and whose boot id is 0).
    void agree_no_direct() { EXPECT_EQ(agree_direct(), 0); }

    // A full handshake as rank 1; rank 0's constructor returns after it.
    void connect_as_rank1() {
        self_ = hello(1, 2, kJob, kGeneration);
        const auto magic = dial(self_);
        const Hello peer = read_hello(magic);
        EXPECT_EQ(peer.rank, 0u);
        EXPECT_EQ(peer.size, 2u);
        EXPECT_EQ(peer.job_id, kJob);
        EXPECT_EQ(refusal(self_, peer, 0), "");
        agree_no_direct();
    }

    void send_header(const FrameHeader& h) {
        FrameBytes b;
        encode(h, b);
        socket_->send(b);
    }

    // Waits for the real rank's allreduce to end; the socket stays open so
    // that only what was sent can have failed it.
    const Outcome& finish() {
        real_.join();
        return outcome_;
    }

    std::optional<StoreServer> server_;
    std::shared_ptr<Store> store_;
    std::optional<Socket> socket_;
    std::string rank0_;  // "ip:port" rank 0 listens on
    Hello self_;
    std::thread real_;
    Outcome outcome_;
};

// The fake plays by the rules: the real rank reduces with it. This pins the
// wire format of doubling's one round between two ranks.
TEST_F(FakePeer, FollowingTheProtocolWorks) {
    start_real_rank();
    connect_as_rank1();
    FrameBytes b;
    ASSERT_TRUE(socket_->recv(b.data(), b.size()));
    const FrameHeader got = decode(b, 4096);
    EXPECT_EQ(got.kind, FrameKind::data);
    EXPECT_EQ(got.op, allreduce_sig(1, 4));
    EXPECT_EQ(got.tag, 1u);
    ASSERT_EQ(got.length, 16u);
    float theirs[4];
    ASSERT_TRUE(socket_->recv(theirs, sizeof theirs));
    EXPECT_EQ(theirs[3], 4.0f);
    send_header(allreduce_frame());
    const float mine[4] = {10, 20, 30, 40};
    socket_->send(mine, sizeof mine);
    const Outcome& out = finish();
    ASSERT_TRUE(out.ok) << out.message;
    EXPECT_EQ(out.result[0], 11.0f);
    EXPECT_EQ(out.result[3], 44.0f);
    EXPECT_FALSE(out.broken);
}

struct Garbage {
    const char* name;
    std::function<void(Socket&)> send;
    Errc code;
    std::string words;
};

void PrintTo(const Garbage& g, std::ostream* os) { *os << g.name; }

class FakePeerGarbage : public FakePeer, public ::testing::WithParamInterface<Garbage> {};

// Whatever the peer sends, the real rank's allreduce fails with an Error
// naming rank 1, long before its timeout, and allocates nothing the size a
// peer announced.
TEST_P(FakePeerGarbage, RealRankFailsNamingThePeer) {
    const Garbage& g = GetParam();
    start_real_rank();
    connect_as_rank1();
    // Take rank 0's own frame first: it is then inside its allreduce, and
    // closing our end cannot reset the connection over unread bytes.
    FrameBytes header;
    ASSERT_TRUE(socket_->recv(header.data(), header.size()));
    float theirs[4];
    ASSERT_TRUE(socket_->recv(theirs, sizeof theirs));
    g_largest_allocation = 0;
    g.send(*socket_);
    const Outcome& out = finish();
    ASSERT_TRUE(out.constructed) << out.message;
    ASSERT_FALSE(out.ok);
    EXPECT_EQ(out.code, g.code) << out.message;
    EXPECT_TRUE(contains(out.message, "rank 1")) << out.message;
    // Every failure names this rank's call, a peer's abort included.
    EXPECT_TRUE(contains(out.message, "allreduce #1")) << out.message;
    EXPECT_TRUE(contains(out.message, g.words)) << out.message;
    EXPECT_LT(out.took, kOpTimeout / 2) << "failed on the timeout rather than on what the peer sent";
    EXPECT_TRUE(out.broken);
#ifndef COHORT_TEST_TSAN
    EXPECT_LT(g_largest_allocation.load(), std::size_t(64) << 20) << "a peer's length sized an allocation";
#endif
}

FrameBytes encoded(const FrameHeader& h) {
    FrameBytes b;
    encode(h, b);
    return b;
}

INSTANTIATE_TEST_SUITE_P(
    Frames, FakePeerGarbage,
    ::testing::Values(
        Garbage{"bad_magic",
                [](Socket& s) {
                    auto b = encoded(allreduce_frame());
                    b[0] ^= 0xFF;
                    s.send(b);
                },
                Errc::peer_failed, "malformed frame"},
        Garbage{"http",
                [](Socket& s) {
                    const std::string get = "GET / HTTP/1.1\r\nHost: cohort\r\nAccept: */*\r\nUser-Agent: curl\r\n\r\n";
                    s.send(get);
                },
                Errc::peer_failed, "malformed frame"},
        Garbage{"data_of_1GiB",
                [](Socket& s) { s.send(encoded(allreduce_frame(1u << 30))); },
                Errc::peer_failed, "1073741824 bytes"},
        Garbage{"abort_of_1GiB",
                [](Socket& s) {
                    auto h = allreduce_frame(1u << 30);
                    h.kind = FrameKind::abort;
                    s.send(encoded(h));
                },
                Errc::peer_failed, "1073741824 bytes"},
        Garbage{"unknown_kind",
                [](Socket& s) {
                    auto b = encoded(allreduce_frame());
                    b[4] = 9;
                    s.send(b);
                },
                Errc::peer_failed, "unknown kind 9"},
        Garbage{"direct_of_17",
                [](Socket& s) {
                    auto h = allreduce_frame(17);
                    h.kind = FrameKind::direct;
                    s.send(encoded(h));
                },
                Errc::peer_failed, "17 bytes, more than the 16 allowed"},
        // Direct copies were not agreed in the handshake.
        Garbage{"direct_over_tcp",
                [](Socket& s) {
                    auto h = allreduce_frame(static_cast<uint32_t>(kDirectPayload));
                    h.kind = FrameKind::direct;
                    s.send(encoded(h));
                    const std::array<unsigned char, kDirectPayload> where{};
                    s.send(where);
                },
                Errc::mismatch, "for a direct copy, this rank expected step 1 over TCP"},
        Garbage{"ack_with_payload",
                [](Socket& s) {
                    auto h = allreduce_frame(1);
                    h.kind = FrameKind::ack;
                    s.send(encoded(h));
                },
                Errc::peer_failed, "1 bytes, more than the 0 allowed"},
        Garbage{"ack_nothing_waited_for",
                [](Socket& s) {
                    auto h = allreduce_frame(0);
                    h.kind = FrameKind::ack;
                    s.send(encoded(h));
                },
                Errc::peer_failed, "acknowledgement nothing waited for"},
        Garbage{"other_sequence",
                [](Socket& s) {
                    auto h = allreduce_frame();
                    h.op.seq = 7;
                    s.send(encoded(h));
                },
                Errc::mismatch, "it is at allreduce #7"},
        Garbage{"other_step_length",
                [](Socket& s) { s.send(encoded(allreduce_frame(8))); }, Errc::mismatch,
                "with 8 bytes"},
        Garbage{"abort",
                [](Socket& s) {
                    const std::string text = "the fake ran out of patience";
                    auto h = allreduce_frame(static_cast<uint32_t>(text.size()));
                    h.kind = FrameKind::abort;
                    h.op.aux = static_cast<uint64_t>(Errc::timeout);
                    s.send(encoded(h));
                    s.send(text);
                },
                Errc::timeout, "rank 1 gave up: the fake ran out of patience"},
        Garbage{"abort_with_code_ok",
                [](Socket& s) {
                    const std::string text = "nothing went wrong";
                    auto h = allreduce_frame(static_cast<uint32_t>(text.size()));
                    h.kind = FrameKind::abort;
                    h.op.aux = 0;
                    s.send(encoded(h));
                    s.send(text);
                },
                Errc::peer_failed, "rank 1 gave up: nothing went wrong"},
        Garbage{"goodbye",
                [](Socket& s) {
                    auto h = allreduce_frame(0);
                    h.kind = FrameKind::goodbye;
                    s.send(encoded(h));
                },
                Errc::closed, "closed its communicator"},
        Garbage{"hang_up", [](Socket& s) { s.close(); }, Errc::peer_failed, "without saying goodbye"},
        Garbage{"half_a_frame",
                [](Socket& s) {
                    s.send(encoded(allreduce_frame()));
                    const float two[2] = {1, 2};
                    s.send(two, sizeof two);
                    s.close();
                },
                Errc::peer_failed, "in the middle of a frame"}),
    [](const ::testing::TestParamInfo<Garbage>& p) { return std::string(p.param.name); });

// An abort whose code is not an Errc: the real rank's error must still carry
// a code the C ABI and Python know (read_abort maps codes outside the
// enumeration to peer_failed; code 0, ok, is in the Frames cases).
TEST_F(FakePeer, AbortWithAnUnknownCodeStillGivesAKnownOne) {
    start_real_rank();
    connect_as_rank1();
    FrameBytes header;
    ASSERT_TRUE(socket_->recv(header.data(), header.size()));
    float theirs[4];
    ASSERT_TRUE(socket_->recv(theirs, sizeof theirs));
    const std::string text = "made-up code";
    auto h = allreduce_frame(static_cast<uint32_t>(text.size()));
    h.kind = FrameKind::abort;
    h.op.aux = 0xDEADBEEF;
    send_header(h);
    socket_->send(text);
    const Outcome& out = finish();
    ASSERT_FALSE(out.ok);
    EXPECT_EQ(out.code, Errc::peer_failed) << out.message;
    EXPECT_TRUE(contains(out.message, "allreduce #1")) << out.message;
    EXPECT_TRUE(contains(out.message, "on rank 0: rank 1 gave up: made-up code")) << out.message;
    EXPECT_TRUE(out.broken);
}

// The peer's mismatching frame is already there when rank 0's engine starts
// (sent right behind the handshake), so rank 0 detects the mismatch before
// the completion of its own first send has run. Rank 0 must still tell the
// peer why it gives up (an abort frame after its data frame, code
// mismatch), as engine.hpp promises: break_and_throw runs the completed
// write's handler first, so the peer is not left mid-frame.
TEST_F(FakePeer, AbortIsSentWhenTheMismatchIsSeenBeforeTheFirstSendCompletes) {
    start_real_rank();
    const auto [address, port] = meet_in_store();
    self_ = hello(1, 2, kJob, kGeneration);
    socket_.emplace(address, port);
    auto bytes = encode_hello(self_);
    bytes.push_back(1);  // its claim is done (it made none)
    bytes.push_back(0);  // no direct copies
    auto wrong = allreduce_frame();
    wrong.op.seq = 7;
    const auto frame = encoded(wrong);
    bytes.insert(bytes.end(), frame.begin(), frame.end());
    const float payload[4] = {};
    const auto* p = reinterpret_cast<const unsigned char*>(payload);
    bytes.insert(bytes.end(), p, p + sizeof payload);
    socket_->send(bytes);  // the handshake, then at once a frame of another operation
    std::array<unsigned char, 4> magic{};
    ASSERT_TRUE(socket_->recv(magic.data(), magic.size()));
    read_hello(magic);
    unsigned char done = 0xFF, direct = 0xFF;
    ASSERT_TRUE(socket_->recv(&done, 1));
    EXPECT_EQ(done, 1);
    ASSERT_TRUE(socket_->recv(&direct, 1));
    EXPECT_EQ(direct, 0);
    const Outcome& out = finish();
    EXPECT_EQ(out.code, Errc::mismatch) << out.message;
    // What rank 0 sent after the handshake: its data frame, then an abort.
    FrameBytes header;
    ASSERT_TRUE(socket_->recv(header.data(), header.size()));
    FrameHeader h = decode(header, kMaxAbortText);
    ASSERT_EQ(h.kind, FrameKind::data);
    std::vector<unsigned char> skip(h.length);
    ASSERT_TRUE(socket_->recv(skip.data(), skip.size()));
    ASSERT_TRUE(socket_->recv(header.data(), header.size()))
        << "rank 0 closed the connection without sending an abort frame";
    h = decode(header, kMaxAbortText);
    EXPECT_EQ(h.kind, FrameKind::abort);
    EXPECT_EQ(h.op.aux, static_cast<uint64_t>(Errc::mismatch));
    std::string text(h.length, '\0');
    ASSERT_TRUE(socket_->recv(text.data(), text.size()));
    EXPECT_TRUE(contains(text, "it is at allreduce #7")) << text;
}

// The peer gives up while rank 0 is still sending it a large message: it
// sends an abort frame saying why (header and text in one piece, as a real
// rank's break_and_throw writes it) and closes without reading rank 0's data,
// so its kernel resets the connection.
void abort_and_reset(Socket& socket) {
    const std::string text = "the fake gave up on purpose";
    auto h = allreduce_frame(static_cast<uint32_t>(text.size()));
    h.op.count = std::size_t(8) << 20;
    h.kind = FrameKind::abort;
    h.op.aux = static_cast<uint64_t>(Errc::timeout);
    const auto abort = encoded(h);
    std::vector<unsigned char> bytes(abort.begin(), abort.end());
    bytes.insert(bytes.end(), text.begin(), text.end());
    socket.send(bytes);
    socket.close();  // unread data: a reset, not a FIN
}

// Here the peer stopped reading a while ago (it gave up on something
// else), so rank 0's write is parked in the reactor when the abort and
// the reset come. Rank 0's write then fails with the reset while its
// header read is posted; the failure must wait for that read, which gets
// the abort: rank 0 reports the peer's reason and code (timeout here),
// not "sending to it failed".
TEST_F(FakePeer, AbortWinsOverTheResetThatFollowsIt) {
    start_real_rank(kOpTimeout, std::size_t(8) << 20);  // 32 MiB: more than the socket buffers hold
    connect_as_rank1();
    FrameBytes header;
    ASSERT_TRUE(socket_->recv(header.data(), header.size()));  // rank 0 is sending now
    // Let rank 0 fill its socket's send buffer: from then on its write waits
    // for the socket to drain, which it never does.
    const int theirs = socket_->peer_fd();
    ASSERT_GE(theirs, 0) << "rank 0's end of the connection is not in this process";
    for (const auto until = Clock::now() + 2s;;) {
        pollfd p{theirs, POLLOUT, 0};
        if (::poll(&p, 1, 0) == 0) break;
        ASSERT_LT(Clock::now(), until) << "rank 0's socket never filled up";
        std::this_thread::sleep_for(1ms);
    }
    std::this_thread::sleep_for(20ms);  // its last write attempt finds no room and waits
    abort_and_reset(*socket_);
    const Outcome& out = finish();
    ASSERT_FALSE(out.ok);
    EXPECT_EQ(out.code, Errc::timeout) << out.message;
    EXPECT_TRUE(contains(out.message, "rank 1 gave up: the fake gave up on purpose")) << out.message;
    EXPECT_LT(out.took, kOpTimeout / 2) << out.message;
}

// The same while rank 0 is still actively writing: the peer resets the
// connection right after reading rank 0's first frame header. Expected: the
// abort wins as above. Got (a race in src/comm/engine.cpp, in 15 to 27 runs
// of 30 here): peer_failed "sending to it failed: Connection reset by peer".
// asio's async_write sends in 64 KiB pieces, each continuation trying the
// next sendmsg at once (speculatively). The losing sequence:
//  1. The abort (one segment) and the reset reach rank 0's socket. The
//     reactor's poll queues the socket's read readiness behind the
//     completion of the previous 64 KiB piece.
//  2. That completion's continuation calls sendmsg: ECONNRESET. Its handler
//     is queued at the back, behind the socket's read readiness.
//  3. The posted header read takes the abort header, its handler runs at
//     once: header_read_posted = false, on_header -> read_abort, whose
//     read of the text completes at once (the text is in the socket); that
//     handler is queued behind the failed write's.
//  4. The failed write's handler: wrote() sees an error and
//     header_read_posted false (what is outstanding is the abort text's
//     read, which wrote() does not count), so it calls peer_gone at once:
//     socket closed, fail(peer_failed, "sending to it failed: ...").
//  5. The abort text's handler runs with the text read, but fail() keeps
//     the first failure: the abort is lost.
// A payload read in flight is not counted either, so an abort behind a
// data frame loses the same way. Disabled until wrote() defers a failure
// while any read on the peer (header, payload, abort text) is outstanding
// and those reads report send_error when they fail.
TEST_F(FakePeer, AbortWinsOverTheResetWhileRank0IsStillWriting) {
    start_real_rank(kOpTimeout, std::size_t(8) << 20);
    connect_as_rank1();
    FrameBytes header;
    ASSERT_TRUE(socket_->recv(header.data(), header.size()));  // rank 0 is sending now
    abort_and_reset(*socket_);
    const Outcome& out = finish();
    ASSERT_FALSE(out.ok);
    EXPECT_EQ(out.code, Errc::timeout) << out.message;
    EXPECT_TRUE(contains(out.message, "rank 1 gave up: the fake gave up on purpose")) << out.message;
}

// A hello of another job: rank 0 refuses it with the reason, then fails its
// set-up when the connect timeout runs out, saying what it refused.
TEST_F(FakePeer, HelloOfAnotherJobIsRefused) {
    start_real_rank(1000ms);
    const auto magic = dial(hello(1, 2, "another-job", kGeneration));
    const uint32_t m = uint32_t(magic[0]) | uint32_t(magic[1]) << 8 | uint32_t(magic[2]) << 16 | uint32_t(magic[3]) << 24;
    EXPECT_EQ(m, kRefuseMagic);
    unsigned char length[2];
    ASSERT_TRUE(socket_->recv(length, 2));
    std::string text(length[0] | length[1] << 8, '\0');
    ASSERT_TRUE(socket_->recv(text.data(), text.size()));
    EXPECT_TRUE(contains(text, "job id differs (this rank 'cohort', peer 'another-job')")) << text;
    const Outcome& out = finish();
    EXPECT_FALSE(out.constructed);
    EXPECT_EQ(out.code, Errc::timeout) << out.message;
    EXPECT_TRUE(contains(out.message, "rank(s) 1 never connected")) << out.message;
    EXPECT_TRUE(contains(out.message, "job id differs")) << out.message;
}

// Something that is not a cohort peer connects first; rank 0 drops it and
// still meets the real rank 1.
TEST_F(FakePeer, StrangerBeforeThePeerIsIgnored) {
    start_real_rank();
    const auto [address, port] = meet_in_store();
    {
        Socket stranger(address, port);
        stranger.send(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n") + std::string(64, ' '));
        unsigned char byte;
        EXPECT_FALSE(stranger.recv(&byte, 1)) << "rank 0 answered a stranger";
    }
    self_ = hello(1, 2, kJob, kGeneration);
    socket_.emplace(address, port);
    socket_->send(encode_hello(self_));
    std::array<unsigned char, 4> magic{};
    ASSERT_TRUE(socket_->recv(magic.data(), magic.size()));
    EXPECT_EQ(read_hello(magic).rank, 0u);
    agree_no_direct();
    // Now behave: exchange the allreduce's data.
    FrameBytes b;
    ASSERT_TRUE(socket_->recv(b.data(), b.size()));
    float theirs[4];
    ASSERT_TRUE(socket_->recv(theirs, sizeof theirs));
    send_header(allreduce_frame());
    const float mine[4] = {1, 1, 1, 1};
    socket_->send(mine, sizeof mine);
    const Outcome& out = finish();
    ASSERT_TRUE(out.ok) << out.message;
    EXPECT_EQ(out.result[1], 3.0f);
}

// ------------------------------------------------------ forged hellos
// Direct copies read the memory of the process that holds the other end of
// the connection, proven on rank 0's local socket; a pid in a hello is only
// the peer's word (issue 19, defect 7).

// A third process of this machine with a canary where this process has
// other values: fork copies the address space, so &g_canary names the canary
// there and this process's values here. A rank that copied from the third
// process would add the canary.
alignas(16) float g_canary[4] = {};

class ThirdProcess {
public:
    ThirdProcess() {
        for (int i = 0; i < 4; ++i) g_canary[i] = 1000.0f * static_cast<float>(i + 1);
        pid_ = ::fork();
        if (pid_ == 0) {
            ::alarm(60);  // never outlives a test that lost it
            for (;;) ::pause();
        }
        for (int i = 0; i < 4; ++i) g_canary[i] = 10.0f * static_cast<float>(i + 1);
    }
    ThirdProcess(const ThirdProcess&) = delete;
    ThirdProcess& operator=(const ThirdProcess&) = delete;
    ~ThirdProcess() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    pid_t pid() const { return pid_; }

private:
    pid_t pid_ = -1;
};

class ForgedHello : public FakePeer {
protected:
    // Rank 1's hello on rank 0's machine, naming the third process as its own.
    Hello forged(pid_t pid) {
        Hello h = hello(1, 2, kJob, kGeneration);
        describe_process(h);  // the same boot id as rank 0
        h.pid = static_cast<uint32_t>(pid);
        h.direct_socket = std::string(kDirectSocketPrefix) + "0000000000000000";  // where nothing listens
        return h;
    }

    // Claims `connection` on rank 0's local socket from this process (the
    // kernel names it, whatever the claim says); true once rank 0 answered.
    bool claim(const Hello& rank0, const std::string& connection) {
        const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        timeval tv{5, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::memcpy(address.sun_path + 1, rank0.direct_socket.data(), rank0.direct_socket.size());
        const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + rank0.direct_socket.size());
        bool answered = false;
        if (::connect(fd, reinterpret_cast<sockaddr*>(&address), length) == 0) {
            const auto bytes = encode_claim(claim_for(rank0.nonce, connection));
            unsigned char done = 0;
            answered = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size()) &&
                       ::recv(fd, &done, 1, 0) == 1 && done == 1;
        }
        ::close(fd);
        return answered;
    }

    // Reads rank 0's data frame of the allreduce, then answers with a direct
    // frame naming &g_canary.
    void answer_with_canary() {
        FrameBytes b;
        ASSERT_TRUE(socket_->recv(b.data(), b.size()));
        ASSERT_EQ(decode(b, 4096).kind, FrameKind::data);
        float theirs[4];
        ASSERT_TRUE(socket_->recv(theirs, sizeof theirs));
        send_header(FrameHeader{FrameKind::direct, allreduce_sig(1, 4), 1, static_cast<uint32_t>(kDirectPayload)});
        std::array<unsigned char, kDirectPayload> payload{};
        const auto address = reinterpret_cast<uintptr_t>(&g_canary[0]);
        const uint64_t bytes = sizeof g_canary;
        for (int i = 0; i < 8; ++i) {
            payload[i] = static_cast<unsigned char>(uint64_t(address) >> (8 * i));
            payload[8 + i] = static_cast<unsigned char>(bytes >> (8 * i));
        }
        socket_->send(payload);
    }
};

// The forger names the third process in its hello and proves nothing: rank
// 0 refuses direct copies (before, it read the probe the hello pointed at in
// the third process, and then the canary), says why, and a direct frame
// sent anyway fails the operation without a byte of the canary.
TEST_F(ForgedHello, APidInAHelloIsNotEnough) {
    ThirdProcess third;
    ASSERT_GT(third.pid(), 0);
    start_real_rank();
    read_hello(dial(forged(third.pid())));
    EXPECT_EQ(agree_direct(1), 0) << "rank 0 would copy from a pid it only read in a hello";
    answer_with_canary();
    const Outcome& out = finish();
    ASSERT_TRUE(out.constructed) << out.message;
    EXPECT_EQ(out.transport, Transport::tcp);
    EXPECT_TRUE(contains(out.describe, "\"direct_unavailable\":{\"1\":\"rank 1 (pid " + std::to_string(third.pid()) +
                                           " by its word) did not prove"))
        << out.describe;
    EXPECT_FALSE(out.ok);
    EXPECT_EQ(out.code, Errc::mismatch) << out.message;
    EXPECT_TRUE(contains(out.message, "over TCP")) << out.message;
    for (int i = 0; i < 4; ++i) EXPECT_LT(out.result[i], 1000.0f) << "rank 0 copied the third process's canary";
}

// The forger claims its connection: the kernel names the forger, so rank 0
// copies from the forger's memory (its own to give), never the third
// process's, whatever the hello said.
TEST_F(ForgedHello, AClaimProvesTheClaimantNotTheHello) {
    ThirdProcess third;
    ASSERT_GT(third.pid(), 0);
    start_real_rank();
    const Hello rank0 = read_hello(dial(forged(third.pid())));
    ASSERT_TRUE(claim(rank0, connection_key(rank0_, socket_->local_address())));
    EXPECT_EQ(agree_direct(1), 1) << "rank 0 did not accept a proven claim";
    answer_with_canary();
    const Outcome& out = finish();
    ASSERT_TRUE(out.ok) << out.message;
    EXPECT_EQ(out.transport, Transport::direct_copy);
    EXPECT_TRUE(contains(out.describe, "\"direct_unavailable\":null")) << out.describe;
    const float from_this_process[4] = {11, 22, 33, 44};  // rank 0's 1..4 + this process's 10..40
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.result[i], from_this_process[i]) << "at " << i;
}

// A claim of another connection (an honest rank's claim relayed, or a
// guess) proves nothing about this one.
TEST_F(ForgedHello, AClaimOfAnotherConnectionProvesNothing) {
    start_real_rank();
    const Hello rank0 = read_hello(dial(forged(getpid())));
    ASSERT_TRUE(claim(rank0, connection_key(rank0_, "127.0.0.1:1")));
    EXPECT_EQ(agree_direct(1), 0);
    FrameBytes b;
    ASSERT_TRUE(socket_->recv(b.data(), b.size()));
    float theirs[4];
    ASSERT_TRUE(socket_->recv(theirs, sizeof theirs));
    send_header(allreduce_frame());
    const float mine[4] = {1, 1, 1, 1};
    socket_->send(mine, sizeof mine);
    const Outcome& out = finish();
    ASSERT_TRUE(out.ok) << out.message;
    EXPECT_EQ(out.transport, Transport::tcp);
    EXPECT_TRUE(contains(out.describe, "did not prove which process")) << out.describe;
}

// A TLS record where a hello should be (a plain rank meeting a TLS one,
// which answers with an alert) is named as such, not as garbage; a hello
// is never mistaken for a TLS record.
TEST(Handshake, TlsRecordInsteadOfAHello) {
    const Hello h = hello(1, 2, "job", 0, false);
    auto bytes = encode_hello(h);
    EXPECT_TRUE(looks_like_hello(bytes.data()));
    EXPECT_FALSE(looks_like_tls(bytes.data()));
    std::vector<unsigned char> alert(kHelloFixedBytes, 0);
    const unsigned char record[] = {21, 3, 3, 0, 2, 2, 70};  // alert: protocol_version
    std::copy(std::begin(record), std::end(record), alert.begin());
    EXPECT_TRUE(looks_like_tls(alert.data()));
    Hello out;
    try {
        decode_hello_fixed(alert.data(), out);
        ADD_FAILURE() << "a TLS alert was read as a hello";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::permission_denied);
        EXPECT_NE(std::string(e.what()).find("the peer speaks TLS and this rank does not"), std::string::npos)
            << e.what();
    }
    const unsigned char client_hello[] = {22, 3, 1, 2};
    EXPECT_TRUE(looks_like_tls(client_hello));
    EXPECT_FALSE(looks_like_hello(client_hello));
}

}  // namespace
}  // namespace cohort::comm
