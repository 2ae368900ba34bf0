// JsonFields: typed reads of a caller's JSON object, errors naming the field.
#include "json_fields.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>

#include <boost/json/parse.hpp>

#include <fmt/format.h>

#include <cmath>

namespace cohort::capi {

namespace json = boost::json;

JsonFields::JsonFields(const char* text, const char* fn, const char* param, bool empty_ok) : fn_(fn), param_(param) {
    if (text == nullptr || *text == '\0') {
        if (!empty_ok)
            throw Error(Errc::invalid_argument, fmt::format("{}: {} must be a JSON object, got {}", fn, param,
                                                            text == nullptr ? "NULL" : "\"\""));
        parsed_ = json::object();
        return;
    }
    try {
        parsed_ = json::parse(text);
    } catch (const std::exception& e) {
        throw Error(Errc::invalid_argument, fmt::format("{}: {} is not JSON: {}", fn, param, e.what()));
    }
    if (!parsed_.is_object())
        throw Error(Errc::invalid_argument, fmt::format("{}: {} must be a JSON object", fn, param));
}

void JsonFields::wrong(std::string_view key, std::string_view want) const {
    throw Error(Errc::invalid_argument, fmt::format("{}: {} field \"{}\" must be {}", fn_, param_, key, want));
}

bool JsonFields::has(std::string_view key) const {
    return parsed_.as_object().contains(key);
}

const json::value* JsonFields::find(std::string_view key) {
    read_.emplace(key);
    const json::value* value = parsed_.as_object().if_contains(key);
    return value == nullptr || value->is_null() ? nullptr : value;
}

std::optional<std::string> JsonFields::text(std::string_view key) {
    const json::value* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) wrong(key, "a string");
    return std::string(v->get_string());
}

std::optional<uint64_t> JsonFields::count(std::string_view key, uint64_t largest) {
    const json::value* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_uint64() && v->get_uint64() <= largest) return v->get_uint64();
    if (v->is_int64() && v->get_int64() >= 0 && static_cast<uint64_t>(v->get_int64()) <= largest)
        return static_cast<uint64_t>(v->get_int64());
    // 1e9 is a whole number too.
    if (v->is_double() && v->get_double() >= 0 && std::floor(v->get_double()) == v->get_double() &&
        v->get_double() <= double(largest) && v->get_double() < 18446744073709551616.0)
        return static_cast<uint64_t>(v->get_double());
    wrong(key, fmt::format("a whole number from 0 to {}", largest));
}

std::optional<int64_t> JsonFields::integer(std::string_view key, int64_t smallest, int64_t largest) {
    const json::value* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_int64() && v->get_int64() >= smallest && v->get_int64() <= largest) return v->get_int64();
    if (v->is_uint64() && v->get_uint64() <= uint64_t(largest) && largest >= 0) return int64_t(v->get_uint64());
    if (v->is_double() && std::floor(v->get_double()) == v->get_double() && v->get_double() >= double(smallest) &&
        v->get_double() <= double(largest))
        return static_cast<int64_t>(v->get_double());
    wrong(key, fmt::format("a whole number from {} to {}", smallest, largest));
}

std::optional<double> JsonFields::number(std::string_view key) {
    const json::value* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) wrong(key, "a number");
    return v->to_number<double>();
}

std::optional<bool> JsonFields::flag(std::string_view key) {
    const json::value* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_bool()) wrong(key, "true or false");
    return v->get_bool();
}

std::optional<std::vector<std::string>> JsonFields::texts(std::string_view key) {
    const json::value* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_array()) wrong(key, "an array of strings");
    std::vector<std::string> out;
    for (const json::value& item : v->get_array()) {
        if (!item.is_string()) wrong(key, fmt::format("an array of strings (item {} is not one)", out.size()));
        out.emplace_back(item.get_string());
    }
    return out;
}

std::optional<std::vector<uint32_t>> JsonFields::indices(std::string_view key) {
    const json::value* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_array()) wrong(key, "an array of GPU indices");
    std::vector<uint32_t> out;
    for (const json::value& item : v->get_array()) {
        const bool ok = (item.is_int64() && item.get_int64() >= 0 && item.get_int64() <= INT64_C(4294967295)) ||
                        (item.is_uint64() && item.get_uint64() <= 4294967295u);
        if (!ok) wrong(key, fmt::format("an array of GPU indices from 0 to 4294967295 (item {} is not one)", out.size()));
        out.push_back(static_cast<uint32_t>(item.to_number<uint64_t>()));
    }
    return out;
}

void JsonFields::require(std::string_view key) const {
    const json::value* v = parsed_.as_object().if_contains(key);
    if (v == nullptr || v->is_null())
        throw Error(Errc::invalid_argument, fmt::format("{}: {} lacks the field \"{}\"", fn_, param_, key));
}

void JsonFields::finish() const {
    for (const auto& field : parsed_.as_object()) {
        if (read_.contains(std::string_view(field.key()))) continue;
        std::string known;
        for (const std::string& k : read_) known += (known.empty() ? "" : ", ") + k;
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: {} has an unknown field \"{}\" (expected: {})", fn_, param_,
                                cohort::detail::escape_bytes(std::string_view(field.key()), 60), known));
    }
}

}  // namespace cohort::capi
