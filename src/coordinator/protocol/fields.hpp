// A message's fields named once, in a table that both its reader and its
// writer walk: `field("step", &StepSample::step)`. Each field's C++ type
// says how it is read (a count, a number, text, true/false) and whether it
// may be absent (std::optional: left out when unset).
#pragma once

#include "coordinator/protocol/read_as.hpp"
#include "core/json_fields.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord::protocol {

enum class Presence {
    required,  // absent: an error
    defaulted  // absent: the member keeps its default; always written
};

// How a value is checked and spelt beyond its C++ type.
enum class Kind {
    plain,
    non_negative,  // a number below 0 is an error (seconds, rates)
    bytes          // a string of bytes as json_bytes.hpp spells it; an empty optional is null
};

template <class T, class M>
struct Field {
    std::string_view name;
    M T::*member;
    Presence presence = Presence::required;  // std::optional members are always optional
    Kind kind = Kind::plain;
};

template <class T, class M>
constexpr Field<T, M> field(std::string_view name, M T::*member, Presence presence = Presence::required) {
    return {name, member, presence, Kind::plain};
}

template <class T, class M>
constexpr Field<T, M> non_negative(std::string_view name, M T::*member, Presence presence = Presence::required) {
    return {name, member, presence, Kind::non_negative};
}

template <class T, class M>
constexpr Field<T, M> bytes(std::string_view name, M T::*member) {
    return {name, member, Presence::required, Kind::bytes};
}

// ---- one value
void read_value(const detail::FieldReader& reader, std::string_view key, Kind kind, uint64_t& out);
void read_value(const detail::FieldReader& reader, std::string_view key, Kind kind, uint32_t& out);
void read_value(const detail::FieldReader& reader, std::string_view key, Kind kind, int64_t& out);
void read_value(const detail::FieldReader& reader, std::string_view key, Kind kind, double& out);
void read_value(const detail::FieldReader& reader, std::string_view key, Kind kind, bool& out);
void read_value(const detail::FieldReader& reader, std::string_view key, Kind kind, std::string& out);

template <class V>
void read_value(const detail::FieldReader& reader, std::string_view key, Kind kind, std::optional<V>& out) {
    const boost::json::value* v = reader.find(key);
    if (v == nullptr || (kind == Kind::bytes && v->is_null())) return;
    V value{};
    read_value(reader, key, kind, value);
    out = std::move(value);
}

boost::json::value bytes_value(std::string_view bytes);

template <class V>
void write_value(boost::json::object& o, std::string_view key, Kind kind, const V& value) {
    if constexpr (std::is_same_v<V, std::string>) {
        if (kind == Kind::bytes) {
            o[key] = bytes_value(value);
            return;
        }
    }
    o[key] = value;
}

template <class V>
void write_value(boost::json::object& o, std::string_view key, Kind kind, const std::optional<V>& value) {
    if (value) {
        write_value(o, key, kind, *value);
    } else if (kind == Kind::bytes) {
        o[key] = nullptr;
    }
}

// ---- a table of fields
template <class... F>
constexpr std::array<std::string_view, sizeof...(F)> names(const std::tuple<F...>& fields) {
    return std::apply([](const auto&... f) { return std::array<std::string_view, sizeof...(F)>{f.name...}; }, fields);
}

template <class T, class... F>
void read_fields(const detail::FieldReader& reader, T& message, const std::tuple<F...>& fields) {
    std::apply(
        [&](const auto&... f) {
            ((f.presence == Presence::defaulted && !reader.has(f.name)
                  ? void()
                  : read_value(reader, f.name, f.kind, message.*(f.member))),
             ...);
        },
        fields);
}

template <class T, class... F>
void write_fields(boost::json::object& o, const T& message, const std::tuple<F...>& fields) {
    std::apply([&](const auto&... f) { (write_value(o, f.name, f.kind, message.*(f.member)), ...); }, fields);
}

// A reader for `value` named `where`; strict readers allow `fields` and the
// `extra` names the caller reads by hand.
detail::FieldReader reader_for(const boost::json::value& value, std::string_view where, ReadAs as,
                               std::initializer_list<std::string_view> extra = {});

template <class... F>
detail::FieldReader reader_for(const boost::json::value& value, std::string_view where, ReadAs as,
                               const std::tuple<F...>& fields, std::initializer_list<std::string_view> extra = {}) {
    detail::FieldReader reader(value, std::string(where), as.code);
    if (as.strict) {
        const auto table = names(fields);
        std::vector<std::string_view> allowed(table.begin(), table.end());
        allowed.insert(allowed.end(), extra.begin(), extra.end());
        reader.allow(allowed);
    }
    return reader;
}

// A message of one field: {"delta": 5}, {"removed": true}.
template <class V>
boost::json::object single(std::string_view name, const V& value) {
    boost::json::object o;
    write_value(o, name, Kind::plain, value);
    return o;
}

template <class V>
V read_single(const boost::json::value& value, std::string_view where, ReadAs as, std::string_view name) {
    V v{};
    read_value(reader_for(value, where, as, {name}), name, Kind::plain, v);
    return v;
}

// The whole message: every field of the table, nothing else.
template <class T, class... F>
T read_message(const boost::json::value& value, std::string_view where, ReadAs as, const std::tuple<F...>& fields) {
    T message{};
    read_fields(reader_for(value, where, as, fields), message, fields);
    return message;
}

template <class T, class... F>
boost::json::object write_message(const T& message, const std::tuple<F...>& fields) {
    boost::json::object o;
    write_fields(o, message, fields);
    return o;
}

// ---- the protocol's entry points
// A message that is all fields gives its table as Schema<T>::fields (in the
// header that declares it); write(m) and read<T>(...) then need nothing
// more. A message with more to it (a nested list, a field that depends on
// another) overloads write and specialises read in its own header.
template <class T>
struct Schema;

template <class T>
boost::json::object write(const T& message) {
    return write_message(message, Schema<T>::fields);
}

// Error(as.code) "<where>: <field>: ..." for a missing field, a wrong type
// and, when as.strict, an unknown field.
template <class T>
T read(const boost::json::value& value, std::string_view where, ReadAs as) {
    return read_message<T>(value, where, as, Schema<T>::fields);
}

}  // namespace cohort::coord::protocol
