// Txn's JSON (etcdserverpb.TxnRequest) and the reader of its response.
#include "etcd/txn.hpp"

#include <cohort/error.hpp>

#include <boost/json/array.hpp>

#include <fmt/format.h>

namespace cohort::etcd {

namespace json = boost::json;

namespace {

const char* result_name(Compare op) {
    switch (op) {
        case Compare::equal: return "EQUAL";
        case Compare::not_equal: return "NOT_EQUAL";
        case Compare::greater: return "GREATER";
        case Compare::less: return "LESS";
    }
    return "EQUAL";
}

json::object put_op(std::string_view key, std::string_view value, int64_t lease) {
    json::object put{{"key", base64_encode(key)}, {"value", base64_encode(value)}};
    if (lease != 0) put["lease"] = std::to_string(lease);
    return json::object{{"request_put", std::move(put)}};
}

json::object get_op(std::string_view key, std::string_view range_end) {
    json::object range{{"key", base64_encode(key)}};
    if (!range_end.empty()) range["range_end"] = base64_encode(range_end);
    return json::object{{"request_range", std::move(range)}};
}

json::object delete_op(std::string_view key, std::string_view range_end = {}) {
    json::object range{{"key", base64_encode(key)}};
    if (!range_end.empty()) range["range_end"] = base64_encode(range_end);
    return json::object{{"request_delete_range", std::move(range)}};
}

json::array to_array(const std::vector<json::object>& ops) {
    json::array out;
    for (const auto& op : ops) out.push_back(op);
    return out;
}

}  // namespace

Txn& Txn::compare(std::string_view key, Compare op, const char* target, const char* field, json::value v) {
    compares_.push_back(json::object{
        {"key", base64_encode(key)}, {"target", target}, {"result", result_name(op)}, {field, std::move(v)}});
    return *this;
}

Txn& Txn::if_value(std::string_view key, Compare op, std::string_view value) {
    return compare(key, op, "VALUE", "value", json::value(base64_encode(value)));
}
Txn& Txn::if_version(std::string_view key, Compare op, int64_t version) {
    return compare(key, op, "VERSION", "version", json::value(std::to_string(version)));
}
Txn& Txn::if_create_revision(std::string_view key, Compare op, int64_t revision) {
    return compare(key, op, "CREATE", "create_revision", json::value(std::to_string(revision)));
}
Txn& Txn::if_mod_revision(std::string_view key, Compare op, int64_t revision) {
    return compare(key, op, "MOD", "mod_revision", json::value(std::to_string(revision)));
}
Txn& Txn::if_lease(std::string_view key, Compare op, int64_t lease) {
    return compare(key, op, "LEASE", "lease", json::value(std::to_string(lease)));
}

Txn& Txn::then_put(std::string_view key, std::string_view value, int64_t lease) {
    success_.push_back(put_op(key, value, lease));
    return *this;
}
Txn& Txn::then_get(std::string_view key) {
    success_.push_back(get_op(key, {}));
    return *this;
}
Txn& Txn::then_get_prefix(std::string_view prefix) {
    success_.push_back(get_op(prefix, prefix_end(prefix)));
    return *this;
}
Txn& Txn::then_get_range(std::string_view key, std::string_view range_end) {
    success_.push_back(get_op(key, range_end));
    return *this;
}
Txn& Txn::then_delete(std::string_view key) {
    success_.push_back(delete_op(key));
    return *this;
}
Txn& Txn::then_delete_range(std::string_view key, std::string_view range_end) {
    success_.push_back(delete_op(key, range_end));
    return *this;
}
Txn& Txn::else_put(std::string_view key, std::string_view value, int64_t lease) {
    failure_.push_back(put_op(key, value, lease));
    return *this;
}
Txn& Txn::else_get(std::string_view key) {
    failure_.push_back(get_op(key, {}));
    return *this;
}
Txn& Txn::else_get_prefix(std::string_view prefix) {
    failure_.push_back(get_op(prefix, prefix_end(prefix)));
    return *this;
}
Txn& Txn::else_delete(std::string_view key) {
    failure_.push_back(delete_op(key));
    return *this;
}

json::object Txn::to_json() const {
    return json::object{{"compare", to_array(compares_)}, {"success", to_array(success_)}, {"failure", to_array(failure_)}};
}

TxnResult read_txn_result(const json::object& reply, std::string_view where) {
    TxnResult out;
    out.revision = read_revision(reply, where);
    if (const auto* s = reply.if_contains("succeeded")) out.succeeded = s->is_bool() && s->get_bool();
    const auto* responses = reply.if_contains("responses");
    if (responses == nullptr) return out;
    if (!responses->is_array()) throw Error(Errc::parse, fmt::format("{}: 'responses' is not an array", where));
    for (const auto& r : responses->get_array()) {
        if (!r.is_object()) throw Error(Errc::parse, fmt::format("{}: a response is not an object", where));
        TxnOpResult op;
        const auto& o = r.get_object();
        if (const auto* range = o.if_contains("response_range"); range != nullptr && range->is_object()) {
            op.kvs = read_kvs(range->get_object(), where);
        } else if (const auto* del = o.if_contains("response_delete_range"); del != nullptr && del->is_object()) {
            op.deleted = read_int64(del->get_object(), "deleted", where);
        }
        out.responses.push_back(std::move(op));
    }
    return out;
}

}  // namespace cohort::etcd
