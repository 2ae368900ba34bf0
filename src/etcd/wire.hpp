// etcd's v3 JSON gateway messages, read and written in one place: keys and
// values travel base64-encoded, 64-bit integers as decimal strings.
#pragma once

#include "core/base64.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::etcd {

inline std::string base64_encode(std::string_view bytes) {
    return detail::base64_encode(bytes);
}
// Lenient, as the gateway may write either alphabet and drop the padding.
// Empty on text that is not base64.
inline std::optional<std::string> base64_decode(std::string_view text) {
    return detail::base64_decode(text, detail::Base64Form::lenient);
}

// mvccpb.KeyValue.
struct KeyValue {
    std::string key;
    std::string value;
    int64_t create_revision = 0;
    int64_t mod_revision = 0;
    int64_t version = 0;
    int64_t lease = 0;
};

// mvccpb.Event: a put or a delete of one key.
struct Event {
    enum class Type { put, remove };
    Type type = Type::put;
    KeyValue kv;
};

// The gateway writes int64 as a string and omits zero values; both forms,
// and absence (0), are accepted. Error(parse) naming `where` otherwise.
int64_t read_int64(const boost::json::object& message, std::string_view field, std::string_view where);
// header.revision of a reply: the store's revision when it was answered.
int64_t read_revision(const boost::json::object& reply, std::string_view where);
KeyValue read_key_value(const boost::json::object& kv, std::string_view where);
std::vector<KeyValue> read_kvs(const boost::json::object& reply, std::string_view where);
Event read_event(const boost::json::object& event, std::string_view where);

// The key just past every key that starts with `prefix`: the range_end that
// makes a range or a watch cover the prefix.
std::string prefix_end(std::string_view prefix);

}  // namespace cohort::etcd
