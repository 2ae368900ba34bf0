// Claims of a connection's process: their bytes and how they are judged.
#include "comm/transport/direct_proof.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>
#include <openssl/crypto.h>

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cohort::comm {
namespace {

void put64(std::vector<unsigned char>& out, uint64_t value) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>(value >> (8 * i)));
}

uint64_t get(const unsigned char*& at, int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) value |= uint64_t(at[i]) << (8 * i);
    at += bytes;
    return value;
}

// Random bytes at a fixed place in this process, the same for its life.
const std::array<unsigned char, kNonceBytes>& process_probe() {
    static const std::array<unsigned char, kNonceBytes> probe = fresh_nonce();
    return probe;
}

}  // namespace

std::string connection_key(const std::string& local, const std::string& remote) {
    return local + ">" + remote;
}

DirectClaim claim_for(const std::array<unsigned char, kNonceBytes>& nonce, const std::string& connection) {
    DirectClaim claim;
    claim.nonce = nonce;
    claim.probe_address = reinterpret_cast<uintptr_t>(process_probe().data());
    claim.probe = process_probe();
    claim.connection = connection.substr(0, kMaxConnectionText);
    return claim;
}

std::vector<unsigned char> encode_claim(const DirectClaim& c) {
    std::vector<unsigned char> out;
    out.reserve(kClaimFixedBytes + c.connection.size());
    const uint32_t magic = kClaimMagic;
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<unsigned char>(magic >> (8 * i)));
    out.insert(out.end(), c.nonce.begin(), c.nonce.end());
    put64(out, c.probe_address);
    out.insert(out.end(), c.probe.begin(), c.probe.end());
    const std::string text = c.connection.substr(0, kMaxConnectionText);
    out.push_back(static_cast<unsigned char>(text.size()));
    out.push_back(static_cast<unsigned char>(text.size() >> 8));
    out.insert(out.end(), text.begin(), text.end());
    return out;
}

std::size_t decode_claim_fixed(const unsigned char* p, DirectClaim& c) {
    const auto magic = static_cast<uint32_t>(get(p, 4));
    if (magic != kClaimMagic)
        throw Error(Errc::peer_failed, fmt::format("not a cohort claim (greeting {:#010x})", magic));
    std::memcpy(c.nonce.data(), p, kNonceBytes);
    p += kNonceBytes;
    c.probe_address = get(p, 8);
    std::memcpy(c.probe.data(), p, kNonceBytes);
    p += kNonceBytes;
    const auto length = static_cast<std::size_t>(get(p, 2));
    if (length > kMaxConnectionText)
        throw Error(Errc::peer_failed,
                    fmt::format("a claimed connection of {} bytes, more than {}", length, kMaxConnectionText));
    return length;
}

std::string read_probe(pid_t pid, uint64_t address, const std::array<unsigned char, kNonceBytes>& expected) {
    std::array<unsigned char, kNonceBytes> seen{};
    iovec local{seen.data(), seen.size()};
    iovec remote{reinterpret_cast<void*>(address), seen.size()};
    const ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0)
        return fmt::format(
            "process_vm_readv of pid {} failed: {} (ptrace access: same user, and Yama's "
            "ptrace_scope at most 1)",
            pid, std::strerror(errno));
    if (got != ssize_t(seen.size()) || CRYPTO_memcmp(seen.data(), expected.data(), seen.size()) != 0)
        return fmt::format("pid {} does not hold the probe it claimed", pid);
    return "";
}

std::string judge_claim(const std::optional<ucred>& who, const DirectClaim& claim,
                        const std::array<unsigned char, kNonceBytes>& nonce) {
    if (!who) return "the kernel did not say which process sent the claim (SO_PEERCRED)";
    if (who->uid != geteuid())
        return fmt::format("the claim came from a process of uid {}, and this rank runs as uid {}", who->uid,
                           geteuid());
    if (who->pid == 0)
        return "the claim came from a process in a PID namespace this rank cannot see (pids differ there)";
    if (CRYPTO_memcmp(claim.nonce.data(), nonce.data(), kNonceBytes) != 0)
        return fmt::format("pid {} claimed it with another nonce than this rank's hello", who->pid);
    return read_probe(who->pid, claim.probe_address, claim.probe);
}

}  // namespace cohort::comm
