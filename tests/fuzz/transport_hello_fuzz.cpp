// The first bytes of a data connection (src/comm/transport/handshake.hpp
// and direct_proof.hpp): a peer's hello and the refusal this rank would
// answer it with, and a direct-copy claim and its verdict. The refusal goes
// to logs and back to the peer, so it must stay printable whatever the
// peer's bytes.
#include "fuzz_input.hpp"

#include "comm/transport/direct_proof.hpp"
#include "comm/transport/handshake.hpp"

#include <cstring>

#include <unistd.h>

namespace {

using namespace cohort::comm;

void check_printable(const std::string& text, const char* what) {
    for (const char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7f) cohort::fuzz::defect(what, "a message holds a raw byte of the peer's");
    }
}

void hello(std::string_view bytes) {
    if (bytes.size() < kHelloFixedBytes) return;
    Hello peer;
    const std::size_t job_length = decode_hello_fixed(reinterpret_cast<const unsigned char*>(bytes.data()), peer);
    peer.job_id = std::string(bytes.substr(kHelloFixedBytes, job_length));
    Hello self;
    self.job_id = "job";
    self.size = 4;
    self.rank = 1;
    for (const int expected : {-1, 0, 2}) check_printable(refusal(self, peer, expected), "hello refusal");
    self = peer;
    self.rank = peer.rank == 0 ? 1 : 0;
    check_printable(refusal(self, peer, static_cast<int>(peer.rank)), "hello refusal");
    const std::vector<unsigned char> encoded = encode_hello(peer);
    Hello back;
    const std::size_t length = decode_hello_fixed(encoded.data(), back);
    back.job_id.assign(reinterpret_cast<const char*>(encoded.data()) + kHelloFixedBytes, length);
    if (back.job_id != peer.job_id || back.rank != peer.rank || back.size != peer.size ||
        back.generation != peer.generation || back.direct_socket != peer.direct_socket) {
        cohort::fuzz::defect("hello", "a hello encoded again decodes differently");
    }
}

void claim(std::string_view bytes) {
    if (bytes.size() < kClaimFixedBytes) return;
    DirectClaim c;
    const std::size_t length = decode_claim_fixed(reinterpret_cast<const unsigned char*>(bytes.data()), c);
    c.connection = std::string(bytes.substr(kClaimFixedBytes, length));
    // Judged as a claim from this very process, so the probe is really read
    // (process_vm_readv of our own memory at the claimed address).
    const ucred self{::getpid(), ::geteuid(), ::getegid()};
    (void)judge_claim(self, c, c.nonce);
    (void)judge_claim(std::nullopt, c, c.nonce);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    cohort::fuzz::Input in(data, size);
    const uint8_t which = in.byte();
    cohort::fuzz::expect_named_errors("hello", [&] {
        if ((which & 1) == 0)
            hello(in.rest());
        else
            claim(in.rest());
    });
    return 0;
}
