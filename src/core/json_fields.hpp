// Reading the coordinator's JSON (settings, join descriptors, dataset plans,
// events, snapshots) field by field, with messages that name where the
// object came from and which field is wrong.
#pragma once

#include <cohort/error.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::detail {

// "a string", "a number", ...: for "must be X, not Y" messages.
std::string_view json_kind_name(const boost::json::value& value);

// Errors are Error(code): invalid_argument for what clients send, parse for
// what the coordinator wrote itself (a journal or a snapshot).
class FieldReader {
public:
    // `where` opens every message: "job settings", "event 12 (member_joined)".
    FieldReader(const boost::json::value& value, std::string where, Errc code);

    const std::string& where() const { return where_; }
    Errc code() const { return code_; }
    // Every field the object may have; call once, before reading.
    void allow(std::span<const std::string_view> names);
    void allow(std::initializer_list<std::string_view> names) { allow(std::span(names.begin(), names.size())); }

    bool has(std::string_view key) const;
    const boost::json::value& value(std::string_view key) const;  // required
    const boost::json::value* find(std::string_view key) const;   // null when absent

    std::string string(std::string_view key) const;
    std::string string_or(std::string_view key, std::string fallback) const;
    double number(std::string_view key) const;
    double number_or(std::string_view key, double fallback) const;
    uint64_t uint(std::string_view key) const;
    uint64_t uint_or(std::string_view key, uint64_t fallback) const;
    int64_t int64(std::string_view key) const;
    bool boolean(std::string_view key) const;
    bool boolean_or(std::string_view key, bool fallback) const;
    const boost::json::array& array(std::string_view key) const;
    const boost::json::object& object(std::string_view key) const;

    // "job settings: min_nodes: must be at least 1"; throws.
    [[noreturn]] void fail(std::string_view key, std::string_view what) const;
    [[noreturn]] void fail(std::string_view what) const;

private:
    const boost::json::object* object_ = nullptr;
    std::string where_;
    Errc code_;
};

// The same conversions for a value that is not a field: array items.
double json_number(const boost::json::value& value, std::string_view where, Errc code);
uint64_t json_uint(const boost::json::value& value, std::string_view where, Errc code);
std::string json_string(const boost::json::value& value, std::string_view where, Errc code);

}  // namespace cohort::detail
