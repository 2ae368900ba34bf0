// The collectives' frame header (src/comm/transport/frame.hpp), as a rank
// reads it off a data connection, and the mismatch message built from a
// peer's operation signature. A header that decodes is encoded again and
// must decode to the same header.
#include "fuzz_input.hpp"

#include "comm/transport/frame.hpp"

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    using namespace cohort::comm;
    if (size < kFrameHeaderBytes + 8) return 0;
    FrameBytes bytes{};
    std::memcpy(bytes.data(), data, kFrameHeaderBytes);
    uint64_t max_payload = 0;
    std::memcpy(&max_payload, data + kFrameHeaderBytes, sizeof max_payload);
    max_payload %= uint64_t{1} << 32;
    cohort::fuzz::expect_named_errors("frame", [&] {
        const FrameHeader header = decode(bytes, max_payload);
        FrameBytes again{};
        encode(header, again);
        const FrameHeader back = decode(again, max_payload);
        if (!(back.op == header.op) || back.kind != header.kind || back.tag != header.tag ||
            back.length != header.length) {
            cohort::fuzz::defect("frame", "a header encoded again decodes differently");
        }
        (void)describe(header.op);
        // Against itself, one field changed: the message names the field.
        OpSignature other = header.op;
        other.seq += 1;
        if (mismatch(header.op, other).empty()) cohort::fuzz::defect("frame", "a different seq is no mismatch");
        if (!mismatch(header.op, header.op).empty()) cohort::fuzz::defect("frame", "a signature differs from itself");
    });
    return 0;
}
