// The readers of etcd's gateway JSON.
#include "etcd/wire.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>

#include <charconv>

#include <fmt/format.h>

namespace cohort::etcd {

namespace json = boost::json;

namespace {

[[noreturn]] void bad(std::string_view where, std::string_view what) {
    throw Error(Errc::parse, fmt::format("{}: {}", where, what));
}

const json::object& object_field(const json::object& message, std::string_view field, std::string_view where) {
    const auto* v = message.if_contains(field);
    if (v == nullptr || !v->is_object()) bad(where, fmt::format("no object '{}'", field));
    return v->get_object();
}

std::string bytes_field(const json::object& message, std::string_view field, std::string_view where) {
    const auto* v = message.if_contains(field);
    if (v == nullptr) return {};
    if (!v->is_string()) bad(where, fmt::format("'{}' is not a string", field));
    auto bytes = base64_decode(v->get_string());
    if (!bytes) bad(where, fmt::format("'{}' is not base64", field));
    return std::move(*bytes);
}

}  // namespace

int64_t read_int64(const json::object& message, std::string_view field, std::string_view where) {
    const auto* v = message.if_contains(field);
    if (v == nullptr) return 0;
    if (v->is_int64()) return v->get_int64();
    if (v->is_uint64() && v->get_uint64() <= uint64_t(INT64_MAX)) return static_cast<int64_t>(v->get_uint64());
    if (v->is_string()) {
        const std::string_view text = v->get_string();
        int64_t n = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        if (ec == std::errc() && end == text.data() + text.size() && !text.empty()) return n;
    }
    bad(where, fmt::format("'{}' is not a 64-bit integer", field));
}

int64_t read_revision(const json::object& reply, std::string_view where) {
    return read_int64(object_field(reply, "header", where), "revision", where);
}

KeyValue read_key_value(const json::object& kv, std::string_view where) {
    KeyValue out;
    out.key = bytes_field(kv, "key", where);
    out.value = bytes_field(kv, "value", where);
    out.create_revision = read_int64(kv, "create_revision", where);
    out.mod_revision = read_int64(kv, "mod_revision", where);
    out.version = read_int64(kv, "version", where);
    out.lease = read_int64(kv, "lease", where);
    return out;
}

std::vector<KeyValue> read_kvs(const json::object& reply, std::string_view where) {
    std::vector<KeyValue> out;
    const auto* kvs = reply.if_contains("kvs");
    if (kvs == nullptr) return out;
    if (!kvs->is_array()) bad(where, "'kvs' is not an array");
    for (const auto& kv : kvs->get_array()) {
        if (!kv.is_object()) bad(where, "an entry of 'kvs' is not an object");
        out.push_back(read_key_value(kv.get_object(), where));
    }
    return out;
}

Event read_event(const json::object& event, std::string_view where) {
    Event out;
    if (const auto* type = event.if_contains("type")) {
        if (!type->is_string()) bad(where, "an event's 'type' is not a string");
        if (type->get_string() == "DELETE") {
            out.type = Event::Type::remove;
        } else if (type->get_string() != "PUT") {
            bad(where, fmt::format("unknown event type {}", detail::quote(type->get_string())));
        }
    }
    out.kv = read_key_value(object_field(event, "kv", where), where);
    return out;
}

std::string prefix_end(std::string_view prefix) {
    std::string end(prefix);
    while (!end.empty()) {
        if (static_cast<unsigned char>(end.back()) < 0xff) {
            end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
            return end;
        }
        end.pop_back();
    }
    return std::string(1, '\0');  // every key: etcd's "\0" range_end
}

}  // namespace cohort::etcd
