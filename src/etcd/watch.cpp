// watch(): the gateway's /v3/watch stream, one create_request per POST; and
// WatchStream, which keeps one open across member failures.
#include "etcd/watch.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>

#include <boost/json/array.hpp>

#include <fmt/format.h>

namespace cohort::etcd {

namespace json = boost::json;

StreamEnd watch(EtcdClient& client, const WatchRequest& request, Clock::time_point deadline,
                Clock::time_point connect_deadline, const std::function<bool(const WatchBatch&)>& on_batch, const std::atomic<bool>* cancel) {
    json::object create{{"key", base64_encode(request.key)}};
    if (!request.range_end.empty()) create["range_end"] = base64_encode(request.range_end);
    if (request.start_revision > 0) create["start_revision"] = std::to_string(request.start_revision);
    if (request.prev_kv) create["prev_kv"] = true;
    const std::string what = fmt::format("a watch on {} {}", request.range_end.empty() ? "key" : "the keys under",
                                         detail::quote(request.key));
    std::optional<Error> refused;
    const auto end = client.http().stream(
        "/v3/watch", json::object{{"create_request", std::move(create)}}, deadline, connect_deadline,
        [&](const json::object& message) {
            const auto* result = message.if_contains("result");
            if (result == nullptr || !result->is_object()) {
                const auto* error = message.if_contains("error");
                std::string text = "a message without a result";
                if (error != nullptr && error->is_object()) {
                    if (const auto* m = error->get_object().if_contains("message"); m && m->is_string())
                        text = m->get_string();
                }
                refused.emplace(Errc::unavailable, fmt::format("etcd ended {}: {}", what, text));
                return false;
            }
            const auto& r = result->get_object();
            WatchBatch batch;
            batch.revision = read_revision(r, what);
            if (const auto* c = r.if_contains("created")) batch.created = c->is_bool() && c->get_bool();
            batch.compact_revision = read_int64(r, "compact_revision", what);
            if (const auto* events = r.if_contains("events"); events != nullptr && events->is_array()) {
                for (const auto& e : events->get_array()) {
                    if (e.is_object()) batch.events.push_back(read_event(e.get_object(), what));
                }
            }
            return on_batch(batch);
        },
        cancel, what);
    if (refused) throw *refused;
    return end;
}

WatchStream::WatchStream(std::shared_ptr<EtcdClient> client, WatchRequest request,
                         std::function<void(const WatchBatch&)> on_batch, std::function<void(const Error&)> on_error)
    : client_(std::move(client)),
      request_(std::move(request)),
      on_batch_(std::move(on_batch)),
      on_error_(std::move(on_error)),
      thread_([this] { run(); }) {}

WatchStream::~WatchStream() {
    stop_.store(true);
    thread_.join();
}

void WatchStream::run() {
    auto backoff = std::chrono::milliseconds(50);
    while (!stop_.load()) {
        try {
            // Bounded so that a member that stopped answering without closing
            // the connection is left within a minute.
            const auto end = watch(*client_, request_, Clock::now() + std::chrono::minutes(1),
                                   Clock::now() + std::chrono::seconds(10),
                                   [&](const WatchBatch& batch) {
                                       backoff = std::chrono::milliseconds(50);
                                       if (batch.compact_revision > 0) {
                                           request_.start_revision = batch.compact_revision;
                                       } else if (!batch.events.empty()) {
                                           request_.start_revision = batch.events.back().kv.mod_revision + 1;
                                       } else if (batch.created && request_.start_revision == 0) {
                                           request_.start_revision = batch.revision + 1;
                                       }
                                       if (batch.created && batch.events.empty()) return !stop_.load();
                                       on_batch_(batch);
                                       return !stop_.load() && batch.compact_revision == 0;
                                   },
                                   &stop_);
            if (end == StreamEnd::cancelled) return;
        } catch (const Error& e) {
            if (on_error_) on_error_(e);
        }
        for (auto waited = std::chrono::milliseconds(0); waited < backoff && !stop_.load();
             waited += std::chrono::milliseconds(10)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
}

}  // namespace cohort::etcd
