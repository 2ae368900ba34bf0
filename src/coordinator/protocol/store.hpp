// The store routes' JSON bodies (docs/coordinator.md, "Store"): the one
// reader and writer of each, for the client's store calls and the server's
// store routes. Values travel as json_bytes.hpp spells bytes; set and get
// carry raw bytes and have no JSON body.
#pragma once

#include "coordinator/protocol/fields.hpp"

#include <cohort/coordinator_protocol.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord::protocol {

// POST .../KEY/add: {"delta"} -> {"value"}, the sum after the add.
boost::json::object add_request(int64_t delta);
int64_t add_request_from_json(const boost::json::value& value, std::string_view where, ReadAs as);
boost::json::object add_reply(int64_t value);
int64_t add_reply_from_json(const boost::json::value& value, std::string_view where, ReadAs as);

// POST .../KEY/cas: {"expected": bytes or null (the key must be absent),
// "desired"} -> {"value": bytes or null after the call, "stored"}.
struct StoreCasRequest {
    std::optional<std::string> expected;
    std::string desired;
};
template <>
struct Schema<StoreCasRequest> {
    static constexpr auto fields =
        std::tuple{bytes("expected", &StoreCasRequest::expected), bytes("desired", &StoreCasRequest::desired)};
};
template <>
struct Schema<StoreCasResult> {
    static constexpr auto fields =
        std::tuple{bytes("value", &StoreCasResult::value), field("stored", &StoreCasResult::stored)};
};

// POST .../store/GEN/wait: {"keys": [at least one], "timeout_ms"?} ->
// {"ready": true}, or 408 naming the keys still missing.
struct StoreWaitRequest {
    std::vector<std::string> keys;
    uint64_t timeout_ms = 0;
};
boost::json::object write(const StoreWaitRequest& request);
template <>
StoreWaitRequest read<StoreWaitRequest>(const boost::json::value& value, std::string_view where, ReadAs as);
boost::json::object ready_reply();

// PUT .../KEY -> {"version"}: the generation's store version after the set.
boost::json::object set_reply(uint64_t version);
// DELETE .../KEY -> {"removed"}: whether the key existed.
boost::json::object remove_reply(bool removed);
bool remove_reply_from_json(const boost::json::value& value, std::string_view where, ReadAs as);

}  // namespace cohort::coord::protocol
