// Reading one field's value by its C++ type.
#include "coordinator/protocol/fields.hpp"

#include "coordinator/protocol/json_bytes.hpp"

#include <fmt/format.h>

namespace cohort::coord::protocol {

void read_value(const detail::FieldReader& reader, std::string_view key, Kind, uint64_t& out) {
    out = reader.uint(key);
}

void read_value(const detail::FieldReader& reader, std::string_view key, Kind, uint32_t& out) {
    const uint64_t v = reader.uint(key);
    if (v > UINT32_MAX) reader.fail(key, fmt::format("{} is past {}", v, UINT32_MAX));
    out = static_cast<uint32_t>(v);
}

void read_value(const detail::FieldReader& reader, std::string_view key, Kind, int64_t& out) {
    out = reader.int64(key);
}

void read_value(const detail::FieldReader& reader, std::string_view key, Kind kind, double& out) {
    out = reader.number(key);
    if (kind == Kind::non_negative && out < 0) reader.fail(key, fmt::format("must not be negative, not {}", out));
}

void read_value(const detail::FieldReader& reader, std::string_view key, Kind, bool& out) {
    out = reader.boolean(key);
}

void read_value(const detail::FieldReader& reader, std::string_view key, Kind kind, std::string& out) {
    if (kind == Kind::bytes) {
        out = bytes_from_json(reader.value(key), fmt::format("{}: {}", reader.where(), key), reader.code());
        return;
    }
    out = reader.string(key);
}

boost::json::value bytes_value(std::string_view bytes) {
    return bytes_to_json(bytes);
}

detail::FieldReader reader_for(const boost::json::value& value, std::string_view where, ReadAs as,
                               std::initializer_list<std::string_view> extra) {
    detail::FieldReader reader(value, std::string(where), as.code);
    if (as.strict) reader.allow(extra);
    return reader;
}

}  // namespace cohort::coord::protocol
