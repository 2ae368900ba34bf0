// Hello encoding, the checks behind a refusal, and the HMAC proofs.
#include "comm/transport/handshake.hpp"
#include "core/text.hpp"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <random>

namespace cohort::comm {
namespace {

template <typename T>
void put(std::vector<unsigned char>& out, T value) {
    for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<unsigned char>(uint64_t(value) >> (8 * i)));
}

template <typename T>
T get(const unsigned char*& at) {
    uint64_t value = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) value |= uint64_t(at[i]) << (8 * i);
    at += sizeof(T);
    return static_cast<T>(value);
}

// The first line of a small /proc file, "" if it cannot be read. open with
// O_CLOEXEC, not std::ifstream: a child forked meanwhile must not keep it.
std::string first_line(const char* path) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    char buffer[128];
    ssize_t n;
    do n = ::read(fd, buffer, sizeof buffer);
    while (n < 0 && errno == EINTR);
    ::close(fd);
    const std::string text(buffer, n > 0 ? static_cast<std::size_t>(n) : 0);
    return text.substr(0, text.find('\n'));
}

}  // namespace

std::vector<unsigned char> encode_hello(const Hello& h) {
    std::vector<unsigned char> out;
    out.reserve(kHelloFixedBytes + h.job_id.size());
    put<uint32_t>(out, kHelloMagic);
    put<uint16_t>(out, h.version);
    put<uint16_t>(out, h.has_secret ? 1 : 0);
    put<uint32_t>(out, h.rank);
    put<uint32_t>(out, h.size);
    put<uint64_t>(out, h.generation);
    out.insert(out.end(), h.nonce.begin(), h.nonce.end());
    put<uint32_t>(out, h.pid);
    put<uint64_t>(out, h.boot);
    const std::string name = h.direct_socket.substr(0, kDirectSocketBytes);
    out.insert(out.end(), name.begin(), name.end());
    out.insert(out.end(), kDirectSocketBytes - name.size(), 0);
    put<uint16_t>(out, static_cast<uint16_t>(h.job_id.size()));
    out.insert(out.end(), h.job_id.begin(), h.job_id.end());
    return out;
}

bool looks_like_tls(const unsigned char* b) {
    // Content type 21 (alert) or 22 (handshake), then version 3.x.
    return (b[0] == 21 || b[0] == 22) && b[1] == 3 && b[2] <= 4;
}

bool looks_like_hello(const unsigned char* b) {
    const unsigned char* p = b;
    return get<uint32_t>(p) == kHelloMagic;
}

std::size_t decode_hello_fixed(const unsigned char* p, Hello& h) {
    if (looks_like_tls(p)) throw Error(Errc::permission_denied, kPlainMeetsTls);
    const auto magic = get<uint32_t>(p);
    if (magic == kRefuseMagic) throw Error(Errc::unavailable, "refused");  // the caller reads the reason
    if (magic != kHelloMagic)
        throw Error(Errc::peer_failed, fmt::format("not a cohort peer (greeting {:#010x})", magic));
    h.version = get<uint16_t>(p);
    h.has_secret = (get<uint16_t>(p) & 1) != 0;
    h.rank = get<uint32_t>(p);
    h.size = get<uint32_t>(p);
    h.generation = get<uint64_t>(p);
    std::memcpy(h.nonce.data(), p, kNonceBytes);
    p += kNonceBytes;
    h.pid = get<uint32_t>(p);
    h.boot = get<uint64_t>(p);
    h.direct_socket.assign(reinterpret_cast<const char*>(p), kDirectSocketBytes);
    if (const auto end = h.direct_socket.find('\0'); end != std::string::npos) h.direct_socket.resize(end);
    p += kDirectSocketBytes;
    const auto job_length = get<uint16_t>(p);
    if (job_length > kMaxJobId)
        throw Error(Errc::peer_failed, fmt::format("a job id of {} bytes, more than {}", job_length, kMaxJobId));
    return job_length;
}

std::string refusal(const Hello& self, const Hello& peer, int expected_rank) {
    if (peer.version != self.version)
        return fmt::format("protocol version differs (this rank {}, peer {}): run the same cohort version everywhere",
                           self.version, peer.version);
    if (peer.job_id != self.job_id)
        return fmt::format("job id differs (this rank {}, peer {})", cohort::detail::quote(self.job_id),
                           cohort::detail::quote(peer.job_id));  // the peer's bytes, escaped
    if (peer.generation != self.generation)
        return fmt::format("generation differs (this rank {}, peer {}): a rank of an older or newer world",
                           self.generation, peer.generation);
    if (peer.size != self.size)
        return fmt::format("world size differs (this rank {}, peer {})", self.size, peer.size);
    if (expected_rank >= 0 && peer.rank != static_cast<uint32_t>(expected_rank))
        return fmt::format("rank differs (dialled rank {}, answered by rank {})", expected_rank, peer.rank);
    if (peer.rank >= self.size || peer.rank == self.rank)
        return fmt::format("the peer claims rank {}, which is not a valid peer of rank {} in a world of {}", peer.rank,
                           self.rank, self.size);
    if (peer.has_secret != self.has_secret)
        return self.has_secret ? "this rank requires a shared secret and the peer has none (set COHORT_SECRET on every rank)"
                               : "the peer requires a shared secret and this rank has none (set COHORT_SECRET on every rank)";
    return "";
}

std::vector<unsigned char> encode_refusal(const std::string& text) {
    std::vector<unsigned char> out;
    const std::string cut = text.substr(0, 1024);
    put<uint32_t>(out, kRefuseMagic);
    put<uint16_t>(out, static_cast<uint16_t>(cut.size()));
    out.insert(out.end(), cut.begin(), cut.end());
    return out;
}

std::array<unsigned char, kNonceBytes> fresh_nonce() {
    std::array<unsigned char, kNonceBytes> nonce{};
    if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) {
        std::random_device device;  // OpenSSL's pool failing is rare; a weaker nonce still works
        for (auto& b : nonce) b = static_cast<unsigned char>(device());
    }
    return nonce;
}

std::array<unsigned char, kMacBytes> proof(const std::string& secret, const Hello& from, const Hello& to) {
    std::vector<unsigned char> message = {'c', 'o', 'h', 'o', 'r', 't', '/', '1'};
    message.insert(message.end(), from.nonce.begin(), from.nonce.end());
    message.insert(message.end(), to.nonce.begin(), to.nonce.end());
    put<uint32_t>(message, from.rank);
    put<uint32_t>(message, to.rank);
    put<uint64_t>(message, from.generation);
    message.insert(message.end(), from.job_id.begin(), from.job_id.end());
    std::array<unsigned char, kMacBytes> mac{};
    unsigned int length = 0;
    HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), message.data(), message.size(), mac.data(),
         &length);
    return mac;
}

void describe_process(Hello& hello) {
    static const uint64_t boot = [] {
        std::string id = first_line("/proc/sys/kernel/random/boot_id");
        uint64_t h = 1469598103934665603ull;  // FNV-1a; 0 means unknown
        for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
        return id.empty() ? 0 : h;
    }();
    hello.pid = static_cast<uint32_t>(getpid());
    hello.boot = boot;
}

void allow_peer_reads() {
    static const bool done = [] {
        const std::string text = first_line("/proc/sys/kernel/yama/ptrace_scope");
        int scope = -1;
        std::from_chars(text.data(), text.data() + text.size(), scope);
        // Scope 1 lets a process read only its descendants; sibling ranks
        // are not. Scopes 2 and 3 allow nothing this could change.
        if (scope == 1) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
        return true;
    }();
    (void)done;
}

bool proofs_equal(const std::array<unsigned char, kMacBytes>& a, const std::array<unsigned char, kMacBytes>& b) {
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace cohort::comm
