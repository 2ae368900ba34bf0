// C ABI: the coordinator hosted in-process and its HTTP client
// (cohort/coordinator.hpp, cohort/coordinator_client.hpp).
#include "coordinator_json.hpp"
#include "handles.hpp"

#include "core/text.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

using cohort::Errc;
using cohort::Error;
// The C layer's own helpers (handles.hpp, coordinator_json.hpp).
using namespace cohort::capi;

namespace {

namespace json = boost::json;

std::string text_or(const char* text, std::string fallback = {}) {
    return text != nullptr ? std::string(text) : std::move(fallback);
}

// The common checks of a client call on a job and member.
void require_call(const cohort_coordinator_client* client, const char* job, const char* fn) {
    require(client, fn, "client");
    require(job, fn, "job");
}

// cohort_coordinator_from_json's options; Error(invalid_argument) naming
// the field.
cohort::CoordinatorOptions coordinator_options_from_json(const std::string& text, const char* fn) {
    cohort::CoordinatorOptions options;
    if (text.empty()) return options;
    json::value parsed;
    try {
        parsed = json::parse(text);
    } catch (const std::exception& e) {
        throw Error(Errc::invalid_argument, fmt::format("{}: options_json is not JSON: {}", fn, e.what()));
    }
    if (!parsed.is_object()) throw Error(Errc::invalid_argument, fmt::format("{}: options_json must be an object", fn));
    const auto wrong = [&](std::string_view key, const char* want) {
        return Error(Errc::invalid_argument,
                     fmt::format("{}: options_json field \"{}\" must be {}", fn, cohort::detail::escape_bytes(key), want));
    };
    // Not a structured binding: clang 14 cannot capture one in the lambdas.
    for (const auto& field : parsed.as_object()) {
        const std::string_view key = field.key();
        const json::value& value = field.value();
        const auto text_of = [&]() -> std::string {
            if (!value.is_string()) throw wrong(key, "a string");
            return std::string(value.get_string());
        };
        const auto count_of = [&](uint64_t largest) -> uint64_t {
            if (value.is_uint64() && value.get_uint64() <= largest) return value.get_uint64();
            if (value.is_int64() && value.get_int64() >= 0 && static_cast<uint64_t>(value.get_int64()) <= largest)
                return static_cast<uint64_t>(value.get_int64());
            throw wrong(key, fmt::format("a whole number from 0 to {}", largest).c_str());
        };
        const auto seconds_of = [&]() -> double {
            if (!value.is_number() || !(value.to_number<double>() > 0)) throw wrong(key, "a positive number of seconds");
            return value.to_number<double>();
        };
        const auto milliseconds_of = [&] {
            return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds_of() * 1000)));
        };
        if (key == "host") options.host = text_of();
        else if (key == "port") options.port = static_cast<uint16_t>(count_of(65535));
        else if (key == "token") options.token = text_of();
        else if (key == "data_dir") options.data_dir = text_of();
        else if (key == "max_members") options.max_members = count_of(UINT32_MAX);
        else if (key == "idempotency_window")
            options.idempotency_window = milliseconds_of();
        else if (key == "idempotency_keys") options.idempotency_keys = count_of(UINT32_MAX);
        else if (key == "etcd") options.etcd = text_of();
        else if (key == "etcd_prefix") options.etcd_prefix = text_of();
        else if (key == "etcd_cacert") options.etcd_ca_file = text_of();
        else if (key == "etcd_cert") options.etcd_cert_file = text_of();
        else if (key == "etcd_key") options.etcd_key_file = text_of();
        else if (key == "etcd_user") options.etcd_user = text_of();
        else if (key == "etcd_password") options.etcd_password = text_of();
        else if (key == "leader_ttl") options.leader_ttl = std::chrono::seconds(count_of(3600));
        else if (key == "advertise_url") options.advertise_url = text_of();
        else if (key == "replica_id") options.replica_id = text_of();
        else if (key == "tls_cert") options.tls_cert_file = text_of();
        else if (key == "tls_key") options.tls_key_file = text_of();
        else if (key == "tls_client_ca") options.tls_client_ca_file = text_of();
        else if (key == "max_connections") options.max_connections = count_of(65536);
        else if (key == "max_connections_per_client") options.max_connections_per_client = count_of(65536);
        else if (key == "idle_timeout") options.idle_timeout = milliseconds_of();
        else if (key == "crowded_idle_timeout") options.crowded_idle_timeout = milliseconds_of();
        else
            throw Error(Errc::invalid_argument, fmt::format("{}: options_json has an unknown field \"{}\" (see cohort.h)",
                                                            fn, cohort::detail::escape_bytes(key)));
    }
    return options;
}

}  // namespace

extern "C" {

int cohort_coordinator_create(const char* host, uint16_t port, const char* token, const char* data_dir,
                              cohort_coordinator** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        cohort::CoordinatorOptions options;
        if (host != nullptr && *host != '\0') options.host = host;
        options.port = port;
        if (token != nullptr) options.token = token;
        if (data_dir != nullptr && *data_dir != '\0') options.data_dir = data_dir;
        auto* c = new cohort_coordinator{cohort::Coordinator(std::move(options)), {}};
        c->url = c->impl.url();
        *out = c;
    });
}

int cohort_coordinator_from_json(const char* options_json, cohort_coordinator** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        cohort::CoordinatorOptions options = coordinator_options_from_json(text_or(options_json), fn);
        auto* c = new cohort_coordinator{cohort::Coordinator(std::move(options)), {}};
        c->url = c->impl.url();
        *out = c;
    });
}

void cohort_coordinator_destroy(cohort_coordinator* coordinator) {
    delete coordinator;
}

int cohort_coordinator_port(const cohort_coordinator* coordinator, uint16_t* port) {
    return guard(__func__, [&](const char* fn) {
        require(coordinator, fn, "coordinator");
        require(port, fn, "port");
        *port = coordinator->impl.port();
    });
}

int cohort_coordinator_url(const cohort_coordinator* coordinator, const char** url) {
    return guard(__func__, [&](const char* fn) {
        require(coordinator, fn, "coordinator");
        require(url, fn, "url");
        *url = coordinator->url.c_str();
    });
}

int cohort_coordinator_client_create(const char* url, const char* token, double request_timeout_seconds,
                                     double retry_deadline_seconds, cohort_coordinator_client** out) {
    return guard(__func__, [&](const char* fn) {
        require(url, fn, "url");
        require(out, fn, "out");
        cohort::CoordinatorClientOptions options;
        if (token != nullptr) options.token = token;
        const auto request_timeout = milliseconds_arg(request_timeout_seconds, fn, "request_timeout_seconds", true);
        if (request_timeout.count() > 0) options.request_timeout = request_timeout;
        // Negative: the default (contract 6 allows no other negative duration).
        if (!(retry_deadline_seconds < 0))
            options.retry_deadline = milliseconds_arg(retry_deadline_seconds, fn, "retry_deadline_seconds", true);
        *out = new cohort_coordinator_client{cohort::CoordinatorClient(url, std::move(options))};
    });
}

void cohort_coordinator_client_destroy(cohort_coordinator_client* client) {
    delete client;
}

int cohort_coordinator_client_ensure_job(cohort_coordinator_client* client, const char* job,
                                         const char* settings_json) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        client->impl.create_job_json(job, text_or(settings_json));
    });
}

int cohort_coordinator_client_job_state(cohort_coordinator_client* client, const char* job, char** json_out,
                                        size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(json_out, fn, "json");
        give_text(client->impl.job_state(job), json_out, length);
    });
}

int cohort_coordinator_client_join(cohort_coordinator_client* client, const char* job, const char* id, const char* host,
                                   const char* address, uint64_t* generation, int32_t* active, int32_t* rank) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(id, fn, "id");
        cohort::MemberDescriptor node;
        node.id = id;
        node.host = text_or(host);
        node.address = text_or(address);
        const cohort::JoinReply r = client->impl.join(job, node);
        if (generation != nullptr) *generation = r.generation;
        if (active != nullptr) *active = r.state == "active" ? 1 : 0;
        if (rank != nullptr) *rank = r.rank ? static_cast<int32_t>(*r.rank) : -1;
    });
}

int cohort_coordinator_client_heartbeat(cohort_coordinator_client* client, const char* job, const char* member,
                                        uint64_t generation, int64_t step, double step_time, double samples_per_sec,
                                        uint64_t* job_generation, int32_t* active, int32_t* rendezvous) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(member, fn, "member");
        std::optional<cohort::HeartbeatMetrics> metrics;
        if (step >= 0 || step_time >= 0 || samples_per_sec >= 0) {
            metrics.emplace();
            if (step >= 0) metrics->step = static_cast<uint64_t>(step);
            if (step_time >= 0) metrics->step_time = step_time;
            if (samples_per_sec >= 0) metrics->samples_per_sec = samples_per_sec;
        }
        const cohort::HeartbeatReply r = client->impl.heartbeat(job, member, generation, metrics);
        if (job_generation != nullptr) *job_generation = r.generation;
        if (active != nullptr) *active = r.state == "active" ? 1 : 0;
        if (rendezvous != nullptr) *rendezvous = r.rendezvous ? 1 : 0;
    });
}

int cohort_coordinator_client_leave(cohort_coordinator_client* client, const char* job, const char* member) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(member, fn, "member");
        client->impl.leave(job, member);
    });
}

int cohort_coordinator_client_leave_failed(cohort_coordinator_client* client, const char* job, const char* member,
                                           const char* failure) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(member, fn, "member");
        require(failure, fn, "failure");
        if (*failure == '\0') {
            throw cohort::Error(cohort::Errc::invalid_argument,
                                fmt::format("{}: failure must say why the member failed (it is empty)", fn));
        }
        client->impl.leave(job, member, failure);
    });
}

int cohort_coordinator_client_world(cohort_coordinator_client* client, const char* job, const char* member,
                                    char** json_out, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(member, fn, "member");
        require(json_out, fn, "json");
        give_text(world_json(client->impl.world(job, member), true), json_out, length);
    });
}

int cohort_coordinator_client_wait_for_world(cohort_coordinator_client* client, const char* job, const char* member,
                                             double timeout_seconds, char** json_out, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(member, fn, "member");
        require(json_out, fn, "json");
        const auto timeout = milliseconds_arg(timeout_seconds, fn, "timeout_seconds", true);
        give_text(world_json(client->impl.wait_for_world(job, member, timeout), true), json_out, length);
    });
}

int cohort_coordinator_client_store_set(cohort_coordinator_client* client, const char* job, uint64_t generation,
                                        const char* key, const void* value, size_t length) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(key, fn, "key");
        if (length > 0) require(value, fn, "value");
        client->impl.store_set(job, generation, key,
                               std::string_view(static_cast<const char*>(value), value != nullptr ? length : 0));
    });
}

int cohort_coordinator_client_store_get(cohort_coordinator_client* client, const char* job, uint64_t generation,
                                        const char* key, double timeout_seconds, char** value, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(key, fn, "key");
        require(value, fn, "value");
        const auto timeout = milliseconds_arg(timeout_seconds, fn, "timeout_seconds", true);
        give_text(client->impl.store_get(job, generation, key, timeout), value, length);
    });
}

int cohort_coordinator_client_store_add(cohort_coordinator_client* client, const char* job, uint64_t generation,
                                        const char* key, int64_t delta, int64_t* value) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(key, fn, "key");
        const int64_t sum = client->impl.store_add(job, generation, key, delta);
        if (value != nullptr) *value = sum;
    });
}

int cohort_coordinator_client_store_compare_and_set(cohort_coordinator_client* client, const char* job,
                                                    uint64_t generation, const char* key, const void* expected,
                                                    size_t expected_length, const void* desired, size_t desired_length,
                                                    int32_t* stored, char** current, size_t* current_length) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(key, fn, "key");
        if (desired == nullptr && desired_length > 0) require(desired, fn, "desired");
        std::optional<std::string> want;
        if (expected != nullptr) want.emplace(static_cast<const char*>(expected), expected_length);
        const std::string_view value(desired_length > 0 ? static_cast<const char*>(desired) : "", desired_length);
        const cohort::StoreCasResult r = client->impl.store_compare_and_set(job, generation, key, want, value);
        if (stored != nullptr) *stored = r.stored ? 1 : 0;
        if (current != nullptr) {
            *current = nullptr;
            if (current_length != nullptr) *current_length = 0;
            if (r.value) give_text(*r.value, current, current_length);
        }
    });
}

int cohort_coordinator_client_store_wait(cohort_coordinator_client* client, const char* job, uint64_t generation,
                                         const char* const* keys, size_t count, double timeout_seconds) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        if (count > 0) require(keys, fn, "keys");
        std::vector<std::string> list;
        list.reserve(count);
        for (size_t i = 0; i < count; ++i) {
            if (keys[i] == nullptr) {
                throw cohort::Error(cohort::Errc::invalid_argument, fmt::format("{}: keys[{}] is NULL", fn, i));
            }
            list.emplace_back(keys[i]);
        }
        client->impl.store_wait(job, generation, list, milliseconds_arg(timeout_seconds, fn, "timeout_seconds", true));
    });
}

int cohort_coordinator_client_store_delete(cohort_coordinator_client* client, const char* job, uint64_t generation,
                                           const char* key, int32_t* deleted) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(key, fn, "key");
        const bool was = client->impl.store_remove(job, generation, key);
        if (deleted != nullptr) *deleted = was ? 1 : 0;
    });
}

int cohort_coordinator_client_heartbeat_json(cohort_coordinator_client* client, const char* job, const char* member,
                                             uint64_t generation, const char* metrics_json, char** reply,
                                             size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(member, fn, "member");
        require(reply, fn, "reply");
        std::optional<cohort::HeartbeatMetrics> metrics;
        if (metrics_json != nullptr && *metrics_json != '\0') metrics = metrics_from_text(metrics_json, fn);
        const cohort::HeartbeatReply r = client->impl.heartbeat(job, member, generation, metrics);
        give_text(cohort::to_json_text(r), reply, length);
    });
}

int cohort_coordinator_client_register_dataset(cohort_coordinator_client* client, const char* job,
                                               const char* plan_json) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(plan_json, fn, "plan_json");
        client->impl.register_dataset(job, plan_json);
    });
}

int cohort_coordinator_client_next_shard(cohort_coordinator_client* client, const char* job, const char* member,
                                         char** json_out, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(member, fn, "member");
        require(json_out, fn, "json");
        give_text(lease_json(client->impl.next_shard(job, member)), json_out, length);
    });
}

int cohort_coordinator_client_shard_done(cohort_coordinator_client* client, const char* job, const char* member,
                                         uint64_t lease, int32_t* outcome) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(member, fn, "member");
        const int32_t done = cohort::capi::shard_outcome(client->impl.shard_done(job, member, lease));
        if (outcome != nullptr) *outcome = done;
    });
}

int cohort_coordinator_client_shard_release(cohort_coordinator_client* client, const char* job, const char* member,
                                            uint64_t lease, int32_t* outcome) {
    return guard(__func__, [&](const char* fn) {
        require_call(client, job, fn);
        require(member, fn, "member");
        const int32_t released = cohort::capi::release_outcome(client->impl.shard_release(job, member, lease));
        if (outcome != nullptr) *outcome = released;
    });
}

}  // extern "C"
