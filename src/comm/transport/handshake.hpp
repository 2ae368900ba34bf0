// The first bytes on every data connection. Both sides state who they are
// (job, generation, world size, rank, protocol version); when a secret is
// configured each proves it knows it with an HMAC-SHA256 over both sides'
// fresh nonces, so a recorded handshake cannot be replayed. A mismatch is
// refused with a message that says what differed.
#pragma once

#include <cohort/error.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace cohort::comm {

inline constexpr uint32_t kHelloMagic = 0x53484F43;   // "COHS"
inline constexpr uint32_t kRefuseMagic = 0x52484F43;  // "COHR"
// 2: the hello names a local socket for direct copies instead of a probe
// that anyone could quote (see direct_proof.hpp).
// 3: hierarchical's steps changed (one ring per local rank across hosts,
// with the same algorithm byte): a version 2 peer would wait for messages
// this version no longer sends, so it is refused here instead.
inline constexpr uint16_t kProtocolVersion = 3;
inline constexpr std::size_t kMaxJobId = 256;
inline constexpr std::size_t kNonceBytes = 16;
inline constexpr std::size_t kMacBytes = 32;
inline constexpr std::size_t kDirectSocketBytes = 24;

struct Hello {
    uint16_t version = kProtocolVersion;
    bool has_secret = false;
    uint32_t rank = 0;
    uint32_t size = 0;
    uint64_t generation = 0;
    std::array<unsigned char, kNonceBytes> nonce{};
    // For direct copies between processes of one machine: the process (its
    // own word, for messages only), its kernel's boot id, and the abstract
    // Unix socket where the peer proves which process it is ("" for none).
    uint32_t pid = 0;
    uint64_t boot = 0;
    std::string direct_socket;  // at most kDirectSocketBytes
    std::string job_id;
};

// The same size as version 1's, so that a version 1 peer is refused for
// its version rather than misread.
inline constexpr std::size_t kHelloFixedBytes = 4 + 2 + 2 + 4 + 4 + 8 + kNonceBytes + 4 + 8 + kDirectSocketBytes + 2;

// This process's pid and boot id hash (0: unknown).
void describe_process(Hello& hello);
// Where Yama's ptrace_scope is 1, lets any process of this user read this
// one (PR_SET_PTRACER), as a peer rank's direct copies need; once per process.
void allow_peer_reads();

// The first bytes of a TLS record (a handshake or an alert): a TLS peer
// talking to a plain one.
bool looks_like_tls(const unsigned char* first4);
inline constexpr const char* kPlainMeetsTls =
    "the peer speaks TLS and this rank does not: set COHORT_TLS_CA, COHORT_TLS_CERT and COHORT_TLS_KEY (or the "
    "tls options) on every rank, or on none";

inline constexpr const char* kTlsMeetsPlain =
    "this rank uses TLS and the peer does not: set COHORT_TLS_CA, COHORT_TLS_CERT and COHORT_TLS_KEY (or the tls "
    "options) on every rank, or on none";
// The first four bytes of a hello, as they are on the wire.
bool looks_like_hello(const unsigned char* first4);

std::vector<unsigned char> encode_hello(const Hello& hello);
// Parses the fixed part; returns the job id's length still to read.
// Error(peer_failed) for bytes that are not a cohort hello;
// Error(permission_denied) for a TLS record (kPlainMeetsTls).
std::size_t decode_hello_fixed(const unsigned char* bytes, Hello& out);

// Why a peer's hello cannot be accepted by `self`, or "". `expected_rank`
// is the rank this side dialled, or -1 when accepting.
std::string refusal(const Hello& self, const Hello& peer, int expected_rank);

// A refusal on the wire: magic, u16 length, text.
std::vector<unsigned char> encode_refusal(const std::string& text);

std::array<unsigned char, kNonceBytes> fresh_nonce();
// HMAC-SHA256 proving knowledge of `secret`, bound to both nonces, both
// ranks and the direction, so a proof cannot be reflected back.
std::array<unsigned char, kMacBytes> proof(const std::string& secret, const Hello& from, const Hello& to);
bool proofs_equal(const std::array<unsigned char, kMacBytes>& a, const std::array<unsigned char, kMacBytes>& b);

}  // namespace cohort::comm
