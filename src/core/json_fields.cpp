// FieldReader: typed access to a JSON object's fields, and the messages for
// missing, mistyped and unknown ones.
#include "core/json_fields.hpp"

#include "core/text.hpp"

#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace cohort::detail {

namespace json = boost::json;

std::string_view json_kind_name(const json::value& value) {
    switch (value.kind()) {
        case json::kind::null:
            return "null";
        case json::kind::bool_:
            return "a boolean";
        case json::kind::int64:
        case json::kind::uint64:
        case json::kind::double_:
            return "a number";
        case json::kind::string:
            return "a string";
        case json::kind::array:
            return "a list";
        case json::kind::object:
            return "an object";
    }
    return "a value";
}

namespace {

[[noreturn]] void fail_at(Errc code, std::string_view where, std::string_view what) {
    throw Error(code, fmt::format("{}: {}", where, what));
}

}  // namespace

double json_number(const json::value& value, std::string_view where, Errc code) {
    double d = 0;
    if (value.is_int64())
        d = static_cast<double>(value.get_int64());
    else if (value.is_uint64())
        d = static_cast<double>(value.get_uint64());
    else if (value.is_double())
        d = value.get_double();
    else
        fail_at(code, where, fmt::format("must be a number, not {}", json_kind_name(value)));
    if (!std::isfinite(d)) fail_at(code, where, "must be a finite number");
    return d;
}

uint64_t json_uint(const json::value& value, std::string_view where, Errc code) {
    if (value.is_uint64()) return value.get_uint64();
    if (value.is_int64()) {
        if (value.get_int64() < 0) {
            fail_at(code, where, fmt::format("must not be negative, not {}", value.get_int64()));
        }
        return static_cast<uint64_t>(value.get_int64());
    }
    if (value.is_double()) {
        const double d = value.get_double();
        if (d >= 0 && d < 0x1p63 && std::floor(d) == d) return static_cast<uint64_t>(d);
        fail_at(code, where, fmt::format("must be a whole number of at least 0, not {}", d));
    }
    fail_at(code, where, fmt::format("must be a whole number, not {}", json_kind_name(value)));
}

std::string json_string(const json::value& value, std::string_view where, Errc code) {
    if (!value.is_string()) fail_at(code, where, fmt::format("must be a string, not {}", json_kind_name(value)));
    return std::string(value.get_string());
}

FieldReader::FieldReader(const json::value& value, std::string where, Errc code)
    : where_(std::move(where)), code_(code) {
    if (!value.is_object()) fail(fmt::format("expected an object, not {}", json_kind_name(value)));
    object_ = &value.get_object();
}

void FieldReader::allow(std::span<const std::string_view> allowed) {
    for (const auto& entry : *object_) {
        const std::string_view key = entry.key();
        bool known = false;
        for (std::string_view name : allowed) known = known || name == key;
        if (known) continue;
        std::string message = fmt::format("unknown field '{}'", key);
        if (auto near = detail::closest_word(key, allowed)) {
            message += fmt::format(" (did you mean '{}'?)", *near);
        } else {
            message += " (expected one of:";
            for (std::string_view name : allowed) message += fmt::format(" {}", name);
            message += ")";
        }
        fail(message);
    }
}

void FieldReader::fail(std::string_view key, std::string_view what) const {
    throw Error(code_, fmt::format("{}: {}: {}", where_, key, what));
}

void FieldReader::fail(std::string_view what) const {
    throw Error(code_, fmt::format("{}: {}", where_, what));
}

bool FieldReader::has(std::string_view key) const {
    return find(key) != nullptr;
}

const json::value* FieldReader::find(std::string_view key) const {
    const json::value* found = object_->if_contains(key);
    return found != nullptr && !found->is_null() ? found : nullptr;
}

const json::value& FieldReader::value(std::string_view key) const {
    const json::value* found = find(key);
    if (found == nullptr) fail(fmt::format("missing field '{}'", key));
    return *found;
}

std::string FieldReader::string(std::string_view key) const {
    return json_string(value(key), fmt::format("{}: {}", where_, key), code_);
}

std::string FieldReader::string_or(std::string_view key, std::string fallback) const {
    return has(key) ? string(key) : std::move(fallback);
}

double FieldReader::number(std::string_view key) const {
    return json_number(value(key), fmt::format("{}: {}", where_, key), code_);
}

double FieldReader::number_or(std::string_view key, double fallback) const {
    return has(key) ? number(key) : fallback;
}

uint64_t FieldReader::uint(std::string_view key) const {
    return json_uint(value(key), fmt::format("{}: {}", where_, key), code_);
}

uint64_t FieldReader::uint_or(std::string_view key, uint64_t fallback) const {
    return has(key) ? uint(key) : fallback;
}

int64_t FieldReader::int64(std::string_view key) const {
    const json::value& v = value(key);
    if (v.is_int64()) return v.get_int64();
    if (v.is_uint64() && v.get_uint64() <= static_cast<uint64_t>(INT64_MAX))
        return static_cast<int64_t>(v.get_uint64());
    fail(key, fmt::format("must be a whole number, not {}", json_kind_name(v)));
}

bool FieldReader::boolean(std::string_view key) const {
    value(key);  // required
    return boolean_or(key, false);
}

bool FieldReader::boolean_or(std::string_view key, bool fallback) const {
    const json::value* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_bool()) fail(key, fmt::format("must be true or false, not {}", json_kind_name(*v)));
    return v->get_bool();
}

const json::array& FieldReader::array(std::string_view key) const {
    const json::value& v = value(key);
    if (!v.is_array()) fail(key, fmt::format("must be a list, not {}", json_kind_name(v)));
    return v.get_array();
}

const json::object& FieldReader::object(std::string_view key) const {
    const json::value& v = value(key);
    if (!v.is_object()) fail(key, fmt::format("must be an object, not {}", json_kind_name(v)));
    return v.get_object();
}

}  // namespace cohort::detail
