// Which process holds the other end of a data connection, proven before a
// rank copies out of that process's memory (process_vm_readv) at the
// addresses its direct frames name. A hello's pid is only the peer's word:
// a local process that forged one could make a rank read a third process.
// So each rank listens on an abstract Unix socket named in its hello; the
// peer connects there and sends a claim: the nonce of this rank's hello and
// the TCP connection (both ends' addresses) the claim is for. The kernel
// says who connected (SO_PEERCRED: pid in this rank's PID namespace, uid),
// and the connection's addresses, unique in the network namespace that the
// abstract socket belongs to, tie that process to this one connection: an
// honest rank only ever claims its own connections. A claim also carries a
// probe (an address and the random bytes there) so the reader checks that
// process_vm_readv really works on the proven pid.
#pragma once

#include "comm/transport/handshake.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/socket.h>
#include <sys/types.h>

namespace cohort::comm {

inline constexpr uint32_t kClaimMagic = 0x44484F43;  // "COHD"
inline constexpr std::size_t kClaimFixedBytes = 4 + kNonceBytes + 8 + kNonceBytes + 2;
inline constexpr std::size_t kMaxConnectionText = 256;
inline constexpr const char* kDirectSocketPrefix = "cohortdc";  // + 16 hex digits: kDirectSocketBytes

struct DirectClaim {
    std::array<unsigned char, kNonceBytes> nonce{};  // the nonce of the listener's hello
    uint64_t probe_address = 0;
    std::array<unsigned char, kNonceBytes> probe{};
    std::string connection;  // connection_key() as the listener sees it
};

// "local>remote", both as "ip:port" / "[ip6]:port".
std::string connection_key(const std::string& local, const std::string& remote);

// A claim for `connection` (as the listener sees it), carrying this
// process's probe.
DirectClaim claim_for(const std::array<unsigned char, kNonceBytes>& nonce, const std::string& connection);

std::vector<unsigned char> encode_claim(const DirectClaim& claim);
// Parses the fixed part; returns the connection text's length still to
// read. Error(peer_failed) for bytes that are not a claim.
std::size_t decode_claim_fixed(const unsigned char* bytes, DirectClaim& out);

// Why the process the kernel names (`who`, from SO_PEERCRED) may not be
// read for the connection `claim` names, or "" when it may: same user,
// visible in this PID namespace, the listener's own nonce, and its probe
// reads back.
std::string judge_claim(const std::optional<ucred>& who, const DirectClaim& claim,
                        const std::array<unsigned char, kNonceBytes>& nonce);

// Why process `pid` cannot be read at `address` or holds other bytes
// there than `expected`, or "".
std::string read_probe(pid_t pid, uint64_t address, const std::array<unsigned char, kNonceBytes>& expected);

}  // namespace cohort::comm
