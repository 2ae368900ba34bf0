// An etcd v3 client over the JSON gateway: key-value reads and writes,
// transactions and leases. Thread-safe; calls from several threads each get
// their own connection. Every call is bounded by the caller's deadline and
// fails over across the config's endpoints (etcd/http.hpp).
#pragma once

#include "etcd/config.hpp"
#include "etcd/http.hpp"
#include "etcd/txn.hpp"
#include "etcd/wire.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::etcd {

struct RangeResult {
    std::vector<KeyValue> kvs;
    int64_t revision = 0;  // the store's revision the read saw
};

struct Lease {
    int64_t id = 0;
    int64_t ttl = 0;  // seconds, as etcd granted it
};

class EtcdClient {
public:
    explicit EtcdClient(EtcdConfig config);

    RangeResult get(std::string_view key, Clock::time_point deadline);
    RangeResult get_prefix(std::string_view prefix, Clock::time_point deadline);
    // Every key in [key, range_end), in key order.
    RangeResult get_range(std::string_view key, std::string_view range_end, Clock::time_point deadline);
    // Returns the revision of the write. lease 0: kept until deleted.
    int64_t put(std::string_view key, std::string_view value, int64_t lease, Clock::time_point deadline);
    // How many keys it deleted.
    int64_t remove(std::string_view key, Clock::time_point deadline);
    int64_t remove_prefix(std::string_view prefix, Clock::time_point deadline);
    // `replay`: whether the transaction may be sent again after an endpoint
    // failed mid-call (etcd/http.hpp).
    TxnResult txn(const Txn& txn, Clock::time_point deadline, Replay replay);

    // etcd may grant a longer TTL than asked (its minimum is about 1.5 times
    // the election timeout).
    Lease grant_lease(std::chrono::seconds ttl, Clock::time_point deadline);
    // The lease's remaining TTL after refreshing it, in seconds: 0 when
    // etcd no longer has the lease (it expired or was revoked).
    int64_t keep_alive_once(int64_t lease, Clock::time_point deadline);
    // Deletes the lease and every key attached to it; a lease already gone
    // is not an error.
    void revoke_lease(int64_t lease, Clock::time_point deadline);

    EtcdHttp& http() { return http_; }
    const EtcdConfig& config() const { return http_.config(); }

private:
    EtcdHttp http_;
};

}  // namespace cohort::etcd
