// Encoding and bounds-checked decoding of the tcp:// store's frames
// (protocol.hpp): a peer's bytes are never trusted for a size or a count.
#include "comm/store/protocol.hpp"

#include <fmt/format.h>

namespace cohort::detail::store_protocol {

namespace {

class FrameWriter {
public:
    FrameWriter() { out_.resize(kHeaderBytes); }
    void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
    void u32(uint32_t v) {
        for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
    void i64(int64_t v) {
        const auto u = static_cast<uint64_t>(v);
        for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
    }
    void str(std::string_view s) {
        u32(static_cast<uint32_t>(s.size()));
        out_.append(s);
    }
    std::string finish() {
        const std::size_t body = out_.size() - kHeaderBytes;
        if (body > kMaxFrame) throw ProtocolError(fmt::format("frame of {} bytes exceeds {} bytes", body, kMaxFrame));
        for (std::size_t i = 0; i < 4; ++i) out_[i] = static_cast<char>((body >> (8 * i)) & 0xff);
        return std::move(out_);
    }

private:
    std::string out_;
};

class FrameReader {
public:
    explicit FrameReader(std::span<const uint8_t> in) : in_(in) {}
    uint8_t u8(const char* what) {
        need(1, what);
        return in_[pos_++];
    }
    uint32_t u32(const char* what) {
        need(4, what);
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(in_[pos_++]) << (8 * i);
        return v;
    }
    int64_t i64(const char* what) {
        need(8, what);
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(in_[pos_++]) << (8 * i);
        return static_cast<int64_t>(v);
    }
    // The length is checked against both the bound and the bytes present
    // before anything is allocated.
    std::string str(const char* what, std::size_t min, std::size_t max) {
        const uint32_t n = u32(what);
        if (n < min || n > max) throw ProtocolError(fmt::format("{} of {} bytes (allowed {}..{})", what, n, min, max));
        need(n, what);
        std::string s(reinterpret_cast<const char*>(in_.data() + pos_), n);
        pos_ += n;
        return s;
    }
    std::string key() { return str("key", 1, kMaxKey); }
    std::size_t remaining() const { return in_.size() - pos_; }
    void end() const {
        if (pos_ != in_.size())
            throw ProtocolError(fmt::format("{} unexpected bytes at the end of a frame", remaining()));
    }

private:
    void need(std::size_t n, const char* what) const {
        if (n > remaining()) throw ProtocolError(fmt::format("frame truncated in {}", what));
    }
    std::span<const uint8_t> in_;
    std::size_t pos_ = 0;
};

std::vector<std::string> read_keys(FrameReader& r) {
    const uint32_t count = r.u32("key count");
    // Each key takes at least 5 bytes, so a count the frame cannot hold is
    // rejected before the vector reserves anything.
    if (count == 0 || count > r.remaining() / 5) throw ProtocolError(fmt::format("bad key count {}", count));
    std::vector<std::string> keys;
    keys.reserve(count);
    for (uint32_t i = 0; i < count; ++i) keys.push_back(r.key());
    return keys;
}

}  // namespace

const char* command_name(Command command) {
    switch (command) {
        case Command::set:
            return "set";
        case Command::get:
            return "get";
        case Command::try_get:
            return "try_get";
        case Command::add:
            return "add";
        case Command::compare_and_set:
            return "compare_and_set";
        case Command::wait:
            return "wait";
        case Command::remove:
            return "remove";
    }
    return "unknown";
}

std::string encode_request(const Request& request) {
    FrameWriter w;
    w.u8(static_cast<uint8_t>(request.command));
    if (request.command == Command::wait) {
        w.u32(static_cast<uint32_t>(request.keys.size()));
        for (const auto& k : request.keys) w.str(k);
        w.i64(request.number);
        return w.finish();
    }
    w.str(request.keys.at(0));
    switch (request.command) {
        case Command::set:
            w.str(request.value);
            break;
        case Command::get:
        case Command::add:
            w.i64(request.number);
            break;
        case Command::compare_and_set:
            w.u8(request.expected ? 1 : 0);
            if (request.expected) w.str(*request.expected);
            w.str(request.value);
            break;
        default:
            break;
    }
    return w.finish();
}

std::string encode_reply(Command command, const Reply& reply) {
    FrameWriter w;
    w.u8(static_cast<uint8_t>(reply.status));
    switch (reply.status) {
        case Status::ok:
            switch (command) {
                case Command::get:
                case Command::try_get:
                case Command::compare_and_set:
                    w.str(reply.value);
                    break;
                case Command::add:
                    w.i64(reply.number);
                    break;
                case Command::remove:
                    w.u8(reply.number != 0 ? 1 : 0);
                    break;
                default:
                    break;
            }
            break;
        case Status::not_found:
            break;
        case Status::timeout:
            w.u32(static_cast<uint32_t>(reply.keys.size()));
            for (const auto& k : reply.keys) w.str(k);
            break;
        case Status::invalid_argument:
            w.str(reply.message);
            break;
    }
    return w.finish();
}

std::size_t frame_length(std::span<const uint8_t, kHeaderBytes> header) {
    uint32_t n = 0;
    for (std::size_t i = 0; i < kHeaderBytes; ++i) n |= static_cast<uint32_t>(header[i]) << (8 * i);
    if (n == 0) throw ProtocolError("empty frame");
    if (n > kMaxFrame) throw ProtocolError(fmt::format("frame of {} bytes exceeds the {}-byte limit", n, kMaxFrame));
    return n;
}

Request decode_request(std::span<const uint8_t> body) {
    FrameReader r(body);
    Request q;
    const uint8_t command = r.u8("command");
    if (command < 1 || command > 7) throw ProtocolError(fmt::format("unknown command {:#04x}", command));
    q.command = static_cast<Command>(command);
    if (q.command == Command::wait) {
        q.keys = read_keys(r);
        q.number = r.i64("timeout");
    } else {
        q.keys.push_back(r.key());
        switch (q.command) {
            case Command::set:
                q.value = r.str("value", 0, kMaxValue);
                break;
            case Command::get:
                q.number = r.i64("timeout");
                break;
            case Command::add:
                q.number = r.i64("delta");
                break;
            case Command::compare_and_set: {
                const uint8_t has_expected = r.u8("expected flag");
                if (has_expected > 1) throw ProtocolError("bad expected flag");
                if (has_expected == 1) q.expected = r.str("expected value", 0, kMaxValue);
                q.value = r.str("desired value", 0, kMaxValue);
                break;
            }
            default:
                break;
        }
    }
    r.end();
    return q;
}

Reply decode_reply(Command command, std::span<const uint8_t> body) {
    FrameReader r(body);
    Reply p;
    const uint8_t status = r.u8("status");
    if (status > 3) throw ProtocolError(fmt::format("unknown status {:#04x}", status));
    p.status = static_cast<Status>(status);
    switch (p.status) {
        case Status::ok:
            switch (command) {
                case Command::get:
                case Command::try_get:
                case Command::compare_and_set:
                    p.value = r.str("value", 0, kMaxValue);
                    break;
                case Command::add:
                    p.number = r.i64("sum");
                    break;
                case Command::remove: {
                    const uint8_t existed = r.u8("existed");
                    if (existed > 1) throw ProtocolError(fmt::format("bad existed flag {:#04x}", existed));
                    p.number = existed;
                    break;
                }
                default:
                    break;
            }
            break;
        case Status::not_found:
            break;
        case Status::timeout:
            p.keys = read_keys(r);
            break;
        case Status::invalid_argument:
            p.message = r.str("message", 0, 4096);
            break;
    }
    r.end();
    return p;
}

}  // namespace cohort::detail::store_protocol
