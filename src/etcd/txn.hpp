// A transaction: compares on keys, then the operations to run when all hold
// and those to run when any fails, applied by etcd atomically. Leadership
// fencing, compare-and-set and counters are all built from it.
#pragma once

#include "etcd/wire.hpp"

#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::etcd {

enum class Compare { equal, not_equal, greater, less };

class Txn {
public:
    // The key's value compared with `value`; a missing key fails every
    // value compare.
    Txn& if_value(std::string_view key, Compare op, std::string_view value);
    // Revisions and versions are 0 for a missing key, so if_absent is
    // create_revision == 0.
    Txn& if_version(std::string_view key, Compare op, int64_t version);
    Txn& if_create_revision(std::string_view key, Compare op, int64_t revision);
    Txn& if_mod_revision(std::string_view key, Compare op, int64_t revision);
    Txn& if_lease(std::string_view key, Compare op, int64_t lease);
    Txn& if_absent(std::string_view key) { return if_create_revision(key, Compare::equal, 0); }

    // lease 0: the key is kept until deleted.
    Txn& then_put(std::string_view key, std::string_view value, int64_t lease = 0);
    Txn& then_get(std::string_view key);
    Txn& then_get_prefix(std::string_view prefix);
    // Every key in [key, range_end).
    Txn& then_get_range(std::string_view key, std::string_view range_end);
    Txn& then_delete(std::string_view key);
    // Every key in [key, range_end).
    Txn& then_delete_range(std::string_view key, std::string_view range_end);
    Txn& else_put(std::string_view key, std::string_view value, int64_t lease = 0);
    Txn& else_get(std::string_view key);
    Txn& else_get_prefix(std::string_view prefix);
    Txn& else_delete(std::string_view key);

    std::size_t operations() const { return success_.size() + failure_.size(); }
    boost::json::object to_json() const;

private:
    Txn& compare(std::string_view key, Compare op, const char* target, const char* field, boost::json::value v);

    std::vector<boost::json::object> compares_;
    std::vector<boost::json::object> success_;
    std::vector<boost::json::object> failure_;
};

// One response per operation of the branch that ran, in order: a get's
// keys, a put's nothing, a delete's count.
struct TxnOpResult {
    std::vector<KeyValue> kvs;
    int64_t deleted = 0;
};

struct TxnResult {
    bool succeeded = false;
    int64_t revision = 0;  // the store's revision after the transaction
    std::vector<TxnOpResult> responses;
};

TxnResult read_txn_result(const boost::json::object& reply, std::string_view where);

}  // namespace cohort::etcd
