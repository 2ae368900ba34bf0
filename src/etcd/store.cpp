// EtcdStore: the Store operations as etcd reads, puts and transactions, and
// waits as watches that start at the revision the first read saw.
#include "etcd/store.hpp"

#include "comm/store/backends.hpp"
#include "etcd/client.hpp"
#include "etcd/lease.hpp"
#include "etcd/watch.hpp"

#include <cohort/error.hpp>

#include <charconv>
#include <set>
#include <thread>

#include <fmt/format.h>

namespace cohort::etcd {

namespace {

using std::chrono::milliseconds;

// etcd refuses transactions of more than 128 operations by default
// (--max-txn-ops); reads of many keys go in batches below that.
constexpr std::size_t kReadsPerTxn = 100;
constexpr auto kLongestWatch = std::chrono::seconds(10);

class EtcdStore final : public Store {
public:
    EtcdStore(StoreUrl url, const StoreOptions& options)
        : url_(std::move(url)),
          timeout_(options.timeout),
          client_(std::make_shared<EtcdClient>(url_.config)),
          keys_(url_.prefix + "/") {
        keeper_ = std::make_unique<LeaseKeeper>(client_, join_lease(Clock::now() + timeout_));
    }

    // The lease is left to expire, not revoked: other ranks may still read
    // what this one wrote, and whoever else keeps the lease alive keeps it.
    ~EtcdStore() override = default;

    void set(std::string_view key, std::string_view value) override {
        detail::check_key(url_.address, key);
        detail::check_value(url_.address, key, value);
        guarded([&] { client_->put(full(key), value, lease(), call_deadline()); });
    }

    std::string get(std::string_view key, milliseconds timeout) override {
        detail::check_key(url_.address, key);
        const auto deadline = detail::deadline_after(timeout);
        std::vector<std::string> keys{std::string(key)};
        std::string value;
        if (await(keys, deadline, &value)) return value;
        throw Error(Errc::timeout, fmt::format("store {}: key {} not set after {}", url_.address, detail::quote(key),
                                               detail::format_duration(timeout)));
    }

    std::optional<std::string> try_get(std::string_view key) override {
        detail::check_key(url_.address, key);
        return guarded([&]() -> std::optional<std::string> {
            auto r = client_->get(full(key), call_deadline());
            if (r.kvs.empty()) return std::nullopt;
            return std::move(r.kvs.front().value);
        });
    }

    int64_t add(std::string_view key, int64_t delta) override {
        detail::check_key(url_.address, key);
        const std::string k = full(key);
        const auto deadline = call_deadline();
        return guarded([&] {
            // First as if the key were absent, the common case (a counter's
            // first add): one round trip; the failure branch reads it.
            std::optional<std::vector<KeyValue>> current;
            for (;;) {
                if (!current) {
                    Txn first;
                    first.if_absent(k).then_put(k, std::to_string(delta), lease()).else_get(k);
                    auto result = client_->txn(first, deadline, Replay::unsafe);
                    if (result.succeeded) return delta;
                    current = result.responses.empty() ? std::vector<KeyValue>() : std::move(result.responses[0].kvs);
                    continue;
                }
                const std::string text = current->empty() ? std::string() : current->front().value;
                const auto now = current->empty() ? std::optional<int64_t>(0) : detail::parse_stored_integer(text);
                if (!now) {
                    throw Error(Errc::invalid_argument,
                                fmt::format("store {}: add: the value of key {} is not an integer: {}", url_.address,
                                            detail::quote(key), detail::quote(text.substr(0, 40))));
                }
                int64_t sum = 0;
                if (__builtin_add_overflow(*now, delta, &sum)) {
                    throw Error(Errc::invalid_argument, fmt::format("store {}: add: {} + {} overflows key {}",
                                                                    url_.address, *now, delta, detail::quote(key)));
                }
                Txn txn;
                if (current->empty()) {
                    txn.if_absent(k);
                } else {
                    txn.if_mod_revision(k, Compare::equal, current->front().mod_revision);
                }
                txn.then_put(k, std::to_string(sum), lease()).else_get(k);
                // Unsafe to send twice: a lost reply to a sum that was
                // stored would add delta again.
                auto result = client_->txn(txn, deadline, Replay::unsafe);
                if (result.succeeded) return sum;
                if (Clock::now() >= deadline) {
                    throw Error(Errc::timeout, fmt::format("store {}: add to key {}: other writers kept winning for {}",
                                                           url_.address, detail::quote(key),
                                                           detail::format_duration(timeout_)));
                }
                current = result.responses.empty() ? std::vector<KeyValue>() : std::move(result.responses[0].kvs);
            }
        });
    }

    std::string compare_and_set(std::string_view key, const std::optional<std::string>& expected,
                                std::string_view desired) override {
        detail::check_key(url_.address, key);
        if (expected) detail::check_value(url_.address, key, *expected);
        detail::check_value(url_.address, key, desired);
        const std::string k = full(key);
        return guarded([&] {
            Txn txn;
            if (expected) {
                txn.if_value(k, Compare::equal, *expected);
            } else {
                txn.if_absent(k);
            }
            txn.then_put(k, desired, lease()).else_get(k);
            auto result = client_->txn(txn, call_deadline(), Replay::safe);
            if (result.succeeded) return std::string(desired);
            if (result.responses.empty() || result.responses[0].kvs.empty()) return std::string();
            return std::move(result.responses[0].kvs.front().value);
        });
    }

    void wait(std::span<const std::string> keys, milliseconds timeout) override {
        for (const auto& k : keys) detail::check_key(url_.address, k);
        std::vector<std::string> missing(keys.begin(), keys.end());
        if (await(missing, detail::deadline_after(timeout), nullptr)) return;
        throw Error(Errc::timeout, fmt::format("store {}: {} of {} keys not set after {}: {}", url_.address,
                                               missing.size(), keys.size(), detail::format_duration(timeout),
                                               detail::quote_keys(missing)));
    }

    bool remove(std::string_view key) override {
        detail::check_key(url_.address, key);
        return guarded([&] { return client_->remove(full(key), call_deadline()) > 0; });
    }

    std::string address() const override { return url_.address; }

    std::string host() const override {
        std::string authority = url_.config.endpoints.front();
        authority = authority.substr(authority.find("://") + 3);
        const auto colon = authority.rfind(':');
        std::string host = authority.substr(0, colon);
        if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
        return host;
    }

private:
    std::string full(std::string_view key) const { return keys_ + std::string(key); }
    Clock::time_point call_deadline() const { return detail::deadline_after(timeout_); }

    int64_t lease() const {
        if (keeper_->lost()) throw lease_lost(keeper_->lost_reason());
        return keeper_->id();
    }

    Error lease_lost(const std::string& why) const {
        return Error(Errc::unavailable,
                     fmt::format("store {}: {}, and etcd removed every key under {} with it; open the store again "
                                 "(and raise ttl= if etcd is often unreachable for that long)",
                                 url_.address, why, keys_));
    }

    // Runs an etcd call with this store's name on its errors, and the lease
    // lost said plainly when etcd no longer knows it.
    template <typename F>
    auto guarded(F&& f) -> decltype(f()) {
        try {
            return f();
        } catch (const Error& e) {
            const std::string_view what = e.what();
            if (keeper_ && e.code() == Errc::not_found && what.find("lease not found") != std::string_view::npos) {
                throw lease_lost(fmt::format("its etcd lease {} expired", keeper_->id()));
            }
            if (what.starts_with("store ")) throw;  // this store's own, named already
            throw Error(e.code(), fmt::format("store {}: {}", url_.address, e.what()));
        }
    }

    // Joins the lease that the stores of this prefix share, or grants it when
    // there is none yet; its id lives at the prefix's own key, attached to
    // the lease itself so that it goes with it.
    Lease join_lease(Clock::time_point deadline) {
        const std::string& record = url_.prefix;
        return guarded([&] {
            for (;;) {
                const auto seen = client_->get(record, deadline).kvs;
                if (!seen.empty()) {
                    int64_t id = 0;
                    const auto& text = seen.front().value;
                    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
                    if (ec == std::errc() && end == text.data() + text.size() && id != 0) {
                        const int64_t ttl = client_->keep_alive_once(id, deadline);
                        if (ttl > 0) return Lease{id, ttl};
                    }
                }
                const Lease fresh = client_->grant_lease(url_.ttl, deadline);
                Txn txn;
                if (seen.empty()) {
                    txn.if_absent(record);
                } else {
                    txn.if_mod_revision(record, Compare::equal, seen.front().mod_revision);
                }
                txn.then_put(record, std::to_string(fresh.id), fresh.id);
                if (client_->txn(txn, deadline, Replay::safe).succeeded) return fresh;
                client_->revoke_lease(fresh.id, deadline);  // another store's lease won
                if (Clock::now() >= deadline) {
                    throw Error(Errc::timeout, fmt::format("could not agree on the store's lease within {}",
                                                           detail::format_duration(timeout_)));
                }
            }
        });
    }

    // Waits until every key of `missing` exists, erasing them as they
    // appear; false at the deadline with the ones still missing left. The
    // reads see revision R; the watch starts at R+1, so no write falls
    // between. With one key, *value gets its value.
    bool await(std::vector<std::string>& missing, Clock::time_point deadline, std::string* value) {
        return guarded([&] {
            for (;;) {
                // Reaching etcd is bounded by the store's timeout, whatever
                // the wait's: etcd being down is an error, not a wait, and a
                // slow answer past a short wait is still an answer.
                const auto reach = call_deadline();
                int64_t revision = 0;
                for (std::size_t first = 0; first < missing.size();) {
                    Txn reads;
                    const std::size_t count = std::min(kReadsPerTxn, missing.size() - first);
                    for (std::size_t i = 0; i < count; ++i) reads.then_get(full(missing[first + i]));
                    const auto result = client_->txn(reads, reach, Replay::safe);
                    if (revision == 0) revision = result.revision;
                    std::vector<std::string> still;
                    for (std::size_t i = 0; i < count; ++i) {
                        const auto& kvs = result.responses.at(i).kvs;
                        if (kvs.empty()) {
                            still.push_back(missing[first + i]);
                        } else if (value != nullptr) {
                            *value = kvs.front().value;
                        }
                    }
                    missing.erase(missing.begin() + static_cast<std::ptrdiff_t>(first),
                                  missing.begin() + static_cast<std::ptrdiff_t>(first + count));
                    missing.insert(missing.begin() + static_cast<std::ptrdiff_t>(first), still.begin(), still.end());
                    first += still.size();
                }
                if (missing.empty()) return true;
                if (Clock::now() >= deadline) return false;
                std::set<std::string> waiting;
                for (const auto& k : missing) waiting.insert(full(k));
                // Only the span of the missing keys: the store's other keys
                // (other ranks' counters, say) need not reach this waiter.
                WatchRequest span;
                span.key = *waiting.begin();
                span.range_end = *waiting.rbegin() + std::string(1, '\0');
                span.start_revision = revision + 1;
                // A member that stops answering without closing the stream
                // would hide every event: each watch lasts at most
                // kLongestWatch, then the keys are read again.
                const auto end = watch(
                    *client_, span, std::min(deadline, Clock::now() + kLongestWatch), call_deadline(),
                    [&](const WatchBatch& batch) {
                        for (const auto& event : batch.events) {
                            if (event.type != Event::Type::put) continue;
                            if (waiting.erase(event.kv.key) > 0 && value != nullptr) *value = event.kv.value;
                        }
                        // Compacted past R: read again.
                        return !waiting.empty() && batch.compact_revision == 0;
                    });
                std::erase_if(missing, [&](const std::string& k) { return waiting.count(full(k)) == 0; });
                if (missing.empty()) return true;
                if (end == StreamEnd::deadline && Clock::now() >= deadline) return false;
                std::this_thread::sleep_for(milliseconds(20));
                // The stream broke (a member went away) or was compacted:
                // read again, then watch from there.
            }
        });
    }

    StoreUrl url_;
    milliseconds timeout_;
    std::shared_ptr<EtcdClient> client_;
    std::string keys_;
    std::unique_ptr<LeaseKeeper> keeper_;
};

}  // namespace

std::shared_ptr<Store> open_store(StoreUrl url, const StoreOptions& options) {
    return std::make_shared<EtcdStore>(std::move(url), options);
}

}  // namespace cohort::etcd
