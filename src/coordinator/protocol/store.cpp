// The store routes' JSON bodies, both ways.
#include "coordinator/protocol/store.hpp"

#include "coordinator/protocol/fields.hpp"

#include <boost/json/array.hpp>

#include <fmt/format.h>

namespace cohort::coord::protocol {

namespace json = boost::json;

json::object add_request(int64_t delta) {
    return single("delta", delta);
}

int64_t add_request_from_json(const json::value& value, std::string_view where, ReadAs as) {
    return read_single<int64_t>(value, where, as, "delta");
}

json::object add_reply(int64_t sum) {
    return single("value", sum);
}

int64_t add_reply_from_json(const json::value& value, std::string_view where, ReadAs as) {
    return read_single<int64_t>(value, where, as, "value");
}

json::object write(const StoreWaitRequest& r) {
    json::object o;
    json::array keys;
    keys.reserve(r.keys.size());
    for (const std::string& k : r.keys) keys.emplace_back(k);
    o["keys"] = std::move(keys);
    o["timeout_ms"] = r.timeout_ms;
    return o;
}

template <>
StoreWaitRequest read<StoreWaitRequest>(const json::value& value, std::string_view where, ReadAs as) {
    const auto reader = reader_for(value, where, as, {"keys", "timeout_ms"});
    StoreWaitRequest r;
    const std::string keys_where = fmt::format("{}: keys", where);
    for (const json::value& k : reader.array("keys")) r.keys.push_back(detail::json_string(k, keys_where, as.code));
    if (r.keys.empty()) reader.fail("keys", "must name at least one key");
    r.timeout_ms = reader.uint_or("timeout_ms", 0);
    return r;
}

json::object ready_reply() {
    return single("ready", true);
}

json::object set_reply(uint64_t version) {
    return single("version", version);
}

json::object remove_reply(bool removed) {
    return single("removed", removed);
}

bool remove_reply_from_json(const json::value& value, std::string_view where, ReadAs as) {
    return read_single<bool>(value, where, as, "removed");
}

}  // namespace cohort::coord::protocol
