// Reading one field's value by its C++ type.
#include "coordinator/protocol/fields.hpp"

#include <fmt/format.h>

namespace cohort::coord::protocol {

void read_value(const detail::FieldReader& reader, std::string_view key, bool, uint64_t& out) {
    out = reader.uint(key);
}

void read_value(const detail::FieldReader& reader, std::string_view key, bool, uint32_t& out) {
    const uint64_t v = reader.uint(key);
    if (v > UINT32_MAX) reader.fail(key, fmt::format("{} is past {}", v, UINT32_MAX));
    out = static_cast<uint32_t>(v);
}

void read_value(const detail::FieldReader& reader, std::string_view key, bool, int64_t& out) {
    out = reader.int64(key);
}

void read_value(const detail::FieldReader& reader, std::string_view key, bool non_negative, double& out) {
    out = reader.number(key);
    if (non_negative && out < 0) reader.fail(key, fmt::format("must not be negative, not {}", out));
}

void read_value(const detail::FieldReader& reader, std::string_view key, bool, bool& out) {
    out = reader.boolean(key);
}

void read_value(const detail::FieldReader& reader, std::string_view key, bool, std::string& out) {
    out = reader.string(key);
}

detail::FieldReader reader_for(const boost::json::value& value, std::string_view where, ReadAs as,
                               std::initializer_list<std::string_view> extra) {
    detail::FieldReader reader(value, std::string(where), as.code);
    if (as.strict) reader.allow(extra);
    return reader;
}

}  // namespace cohort::coord::protocol
