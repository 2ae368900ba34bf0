// The tcp:// store's wire format, shared by the server and the client.
//
// Every message is a frame: a u32 little-endian length (of what follows),
// then a u8 command (request) or status (reply), then fields: strings as a
// u32 little-endian length and that many bytes, integers as i64
// little-endian. Requests carry:
//   set             key, value
//   get             key, i64 timeout_ms        (the server parks the request)
//   try_get         key
//   add             key, i64 delta
//   compare_and_set key, u8 has_expected, [expected], desired
//   wait            u32 count, count keys, i64 timeout_ms
//   remove          key
// A reply starts with a status: ok and the command's result (get, try_get,
// compare_and_set: value; add: i64; remove: u8 existed; set, wait: nothing),
// not_found (try_get), timeout and the keys still missing (u32 count, keys),
// or invalid_argument and a message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail::store_protocol {

inline constexpr std::size_t kMaxKey = 1024;
inline constexpr std::size_t kMaxValue = std::size_t{16} << 20;
// compare_and_set carries two values; the rest is lengths and keys.
inline constexpr std::size_t kMaxFrame = 2 * kMaxValue + (std::size_t{64} << 10);
inline constexpr std::size_t kHeaderBytes = 4;
// A wait or get parks at most this long, so deadlines never overflow.
inline constexpr int64_t kMaxTimeoutMs = int64_t{30} * 24 * 3600 * 1000;

enum class Command : uint8_t { set = 1, get = 2, try_get = 3, add = 4, compare_and_set = 5, wait = 6, remove = 7 };
enum class Status : uint8_t { ok = 0, not_found = 1, timeout = 2, invalid_argument = 3 };

const char* command_name(Command command);

// A frame that breaks the format; the server closes the connection with
// what() as the logged reason, the client reports it as a broken store.
class ProtocolError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct Request {
    Command command = Command::set;
    std::vector<std::string> keys;  // one, or several for wait
    std::string value;              // set: value; compare_and_set: desired
    std::optional<std::string> expected;
    int64_t number = 0;  // add: delta; get, wait: timeout_ms
};

struct Reply {
    Status status = Status::ok;
    std::string value;              // get, try_get, compare_and_set
    int64_t number = 0;             // add: new value; remove: 1 if it existed
    std::vector<std::string> keys;  // timeout: the keys still missing
    std::string message;            // invalid_argument
};

// Whole frames, header included.
std::string encode_request(const Request& request);
std::string encode_reply(Command command, const Reply& reply);

// The length announced by a 4-byte header; throws ProtocolError past kMaxFrame
// (before anything is allocated for it) or for an empty frame.
std::size_t frame_length(std::span<const uint8_t, kHeaderBytes> header);

// A frame's body (after the header). Throws ProtocolError for anything
// malformed: unknown command, truncated or trailing bytes, sizes out of bounds.
Request decode_request(std::span<const uint8_t> body);
Reply decode_reply(Command command, std::span<const uint8_t> body);

}  // namespace cohort::detail::store_protocol
