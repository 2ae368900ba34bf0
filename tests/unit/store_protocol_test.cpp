// The tcp:// store's frames: what the decoders refuse.
#include "comm/store/protocol.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>

namespace cohort::detail::store_protocol {
namespace {

std::string decode_error(Command command, std::span<const uint8_t> body) {
    try {
        decode_reply(command, body);
    } catch (const ProtocolError& e) {
        return e.what();
    }
    return "";
}

// Found by tests/fuzz/store_frame: a remove's reply carried any byte as its
// "existed" flag (0xdb read as 219), so a frame no server sends decoded
// and encoded back as another one. Only 0 and 1 are flags.
TEST(StoreProtocol, RemoveReplyFlagIsZeroOrOne) {
    const std::array<uint8_t, 2> bad{0, 0xdb};
    EXPECT_EQ(decode_error(Command::remove, bad), "bad existed flag 0xdb");
    for (const uint8_t flag : {0, 1}) {
        const std::array<uint8_t, 2> body{0, flag};
        const Reply reply = decode_reply(Command::remove, body);
        EXPECT_EQ(reply.status, Status::ok);
        EXPECT_EQ(reply.number, flag);
    }
}

TEST(StoreProtocol, CompareAndSetExpectedFlagIsZeroOrOne) {
    Request request;
    request.command = Command::compare_and_set;
    request.keys = {"k"};
    request.value = "v";
    std::string frame = encode_request(request);
    // header (4), command (1), key length (4) and "k" (1), then the flag
    frame[10] = 2;
    const auto body = std::span(reinterpret_cast<const uint8_t*>(frame.data()) + kHeaderBytes, frame.size() - kHeaderBytes);
    EXPECT_THROW(decode_request(body), ProtocolError);
}

}  // namespace
}  // namespace cohort::detail::store_protocol
