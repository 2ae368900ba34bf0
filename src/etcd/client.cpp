// EtcdClient: each call is one POST to the gateway (etcdserverpb's KV and
// Lease services).
#include "etcd/client.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

namespace cohort::etcd {

namespace json = boost::json;

namespace {

std::string about(std::string_view op, std::string_view key) {
    return fmt::format("{} of key {}", op, detail::quote(key));
}

}  // namespace

EtcdClient::EtcdClient(EtcdConfig config) : http_(std::move(config)) {}

RangeResult EtcdClient::get(std::string_view key, Clock::time_point deadline) {
    const std::string what = about("read", key);
    const auto reply = http_.call("/v3/kv/range", json::object{{"key", base64_encode(key)}}, deadline, Replay::safe, what);
    return RangeResult{read_kvs(reply, what), read_revision(reply, what)};
}

RangeResult EtcdClient::get_prefix(std::string_view prefix, Clock::time_point deadline) {
    const std::string what = fmt::format("read of the keys under {}", detail::quote(prefix));
    const auto reply =
        http_.call("/v3/kv/range",
                   json::object{{"key", base64_encode(prefix)}, {"range_end", base64_encode(prefix_end(prefix))}},
                   deadline, Replay::safe, what);
    return RangeResult{read_kvs(reply, what), read_revision(reply, what)};
}

RangeResult EtcdClient::get_range(std::string_view key, std::string_view range_end, Clock::time_point deadline) {
    const std::string what = fmt::format("read of the keys from {}", detail::quote(key));
    const auto reply = http_.call(
        "/v3/kv/range", json::object{{"key", base64_encode(key)}, {"range_end", base64_encode(range_end)}}, deadline,
        Replay::safe, what);
    return RangeResult{read_kvs(reply, what), read_revision(reply, what)};
}

int64_t EtcdClient::put(std::string_view key, std::string_view value, int64_t lease, Clock::time_point deadline) {
    const std::string what = about("write", key);
    json::object body{{"key", base64_encode(key)}, {"value", base64_encode(value)}};
    if (lease != 0) body["lease"] = std::to_string(lease);
    return read_revision(http_.call("/v3/kv/put", body, deadline, Replay::safe, what), what);
}

int64_t EtcdClient::remove(std::string_view key, Clock::time_point deadline) {
    const std::string what = about("delete", key);
    const auto reply =
        http_.call("/v3/kv/deleterange", json::object{{"key", base64_encode(key)}}, deadline, Replay::safe, what);
    return read_int64(reply, "deleted", what);
}

int64_t EtcdClient::remove_prefix(std::string_view prefix, Clock::time_point deadline) {
    const std::string what = fmt::format("delete of the keys under {}", detail::quote(prefix));
    const auto reply =
        http_.call("/v3/kv/deleterange",
                   json::object{{"key", base64_encode(prefix)}, {"range_end", base64_encode(prefix_end(prefix))}},
                   deadline, Replay::safe, what);
    return read_int64(reply, "deleted", what);
}

TxnResult EtcdClient::txn(const Txn& txn, Clock::time_point deadline, Replay replay) {
    const std::string what = "a transaction";
    return read_txn_result(http_.call("/v3/kv/txn", txn.to_json(), deadline, replay, what), what);
}

Lease EtcdClient::grant_lease(std::chrono::seconds ttl, Clock::time_point deadline) {
    const std::string what = fmt::format("grant of a {} s lease", ttl.count());
    const auto reply =
        http_.call("/v3/lease/grant", json::object{{"TTL", std::to_string(ttl.count())}}, deadline, Replay::safe, what);
    Lease lease{read_int64(reply, "ID", what), read_int64(reply, "TTL", what)};
    if (lease.id == 0) throw Error(Errc::parse, fmt::format("etcd's answer to the {} has no lease ID", what));
    return lease;
}

int64_t EtcdClient::keep_alive_once(int64_t lease, Clock::time_point deadline) {
    const std::string what = fmt::format("keep-alive of lease {}", lease);
    // The gateway serves the keep-alive stream one request per POST: the
    // reply is {"result": LeaseKeepAliveResponse}.
    const auto reply = http_.call("/v3/lease/keepalive", json::object{{"ID", std::to_string(lease)}}, deadline,
                                  Replay::safe, what);
    const auto* result = reply.if_contains("result");
    if (result == nullptr || !result->is_object()) {
        throw Error(Errc::parse, fmt::format("etcd's answer to the {} has no result", what));
    }
    return read_int64(result->get_object(), "TTL", what);
}

void EtcdClient::revoke_lease(int64_t lease, Clock::time_point deadline) {
    try {
        http_.call("/v3/lease/revoke", json::object{{"ID", std::to_string(lease)}}, deadline, Replay::safe,
                   fmt::format("revoke of lease {}", lease));
    } catch (const Error& e) {
        if (e.code() != Errc::not_found) throw;
    }
}

}  // namespace cohort::etcd
