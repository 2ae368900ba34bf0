// The tcp:// store's frames (src/comm/store/protocol.hpp), as the server
// reads a request and the client reads a reply: the 4-byte header first,
// then the body it announces. A frame that decodes is encoded again and
// must decode to the same message.
#include "fuzz_input.hpp"

#include "comm/store/protocol.hpp"

#include <cstring>

namespace {

using namespace cohort::detail::store_protocol;

std::span<const uint8_t> bytes(std::string_view text) {
    return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

// The body of a whole encoded frame.
std::span<const uint8_t> body_of(const std::string& frame) {
    std::array<uint8_t, kHeaderBytes> header{};
    std::memcpy(header.data(), frame.data(), kHeaderBytes);
    if (frame_length(header) != frame.size() - kHeaderBytes) cohort::fuzz::defect("store", "encoded length differs");
    return bytes(frame).subspan(kHeaderBytes);
}

void same(bool equal, const char* what) {
    if (!equal) cohort::fuzz::defect("store: a frame encoded again decodes differently", what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    cohort::fuzz::Input in(data, size);
    const uint8_t selector = in.byte();
    const std::string_view frame = in.rest();
    if (frame.size() < kHeaderBytes) return 0;
    std::array<uint8_t, kHeaderBytes> header{};
    std::memcpy(header.data(), frame.data(), kHeaderBytes);
    std::size_t length = 0;
    try {
        length = frame_length(header);
    } catch (const ProtocolError&) {
        return 0;
    }
    // The reader waits for `length` bytes; a shorter input is a torn frame.
    const std::string_view body = frame.substr(kHeaderBytes, length);
    try {
        if ((selector & 0x80) == 0) {
            const Request request = decode_request(bytes(body));
            const Request again = decode_request(body_of(encode_request(request)));
            same(again.command == request.command && again.keys == request.keys && again.value == request.value &&
                     again.expected == request.expected && again.number == request.number,
                 "request");
        } else {
            const auto command = static_cast<Command>(selector % 7 + 1);
            const Reply reply = decode_reply(command, bytes(body));
            const Reply again = decode_reply(command, body_of(encode_reply(command, reply)));
            same(again.status == reply.status && again.value == reply.value && again.number == reply.number &&
                     again.keys == reply.keys && again.message == reply.message,
                 "reply");
        }
    } catch (const ProtocolError&) {
    }
    return 0;
}
