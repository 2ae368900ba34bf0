// C ABI: the transfer scheduler (cohort/transfers.hpp). Options and
// requests come in as JSON objects; a policy is a GPU monitor or a C
// callback that adds actions through a cohort_transfer_actions; results and
// decisions go out as JSON.
#include "handles.hpp"
#include "json_fields.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cmath>

using cohort::Errc;
using cohort::Error;
using cohort::capi::give_text;
using cohort::capi::guard;
using cohort::capi::JsonFields;
using cohort::capi::require;

namespace json = boost::json;

namespace {

constexpr double kYear = 365.0 * 24 * 3600;

// A JSON number; NaN and the infinities (a rule may see them) become null.
json::value number(double x) {
    if (!std::isfinite(x)) return nullptr;
    return x;
}

json::array decisions_json(const std::vector<cohort::TransferDecision>& decisions) {
    json::array out;
    for (const cohort::TransferDecision& d : decisions) {
        json::object values;
        for (const auto& [name, value] : d.values) values[name] = number(value);
        out.push_back({{"at_seconds", number(d.at_seconds)},
                       {"rule", d.rule},
                       {"action", d.action},
                       {"values", std::move(values)},
                       {"effect", d.effect},
                       {"delay_seconds", number(d.delay_seconds)}});
    }
    return out;
}

std::string result_json(const cohort::TransferResult& r) {
    json::object out{{"id", r.id},
                     {"status", cohort::capi::to_status(r.code)},
                     {"error", r.error},
                     {"bytes", r.bytes},
                     {"staged", r.staged.string()},
                     {"missed_deadline", r.missed_deadline},
                     {"waited_seconds", number(r.waited_seconds)},
                     {"seconds", number(r.seconds)},
                     {"decisions", decisions_json(r.decisions)}};
    return json::serialize(out);
}

cohort::TransferOptions options_from_json(const char* text, const char* fn) {
    JsonFields f(text, fn, "options_json", true);
    cohort::TransferOptions o;
    if (auto v = f.count("workers", UINT32_MAX)) o.workers = *v;
    if (auto v = f.count("prefetch_depth", UINT32_MAX)) o.prefetch_depth = *v;
    if (auto v = f.number("aging_per_second")) o.aging_per_second = *v;
    if (auto v = f.integer("prioritize_boost", INT32_MIN, INT32_MAX)) o.prioritize_boost = static_cast<int>(*v);
    if (auto v = f.text("staging_dir")) o.staging_dir = *v;
    if (auto v = f.count("explain_history", UINT32_MAX)) o.explain_history = *v;
    f.finish();
    return o;
}

cohort::TransferRequest request_from_json(const char* text, const char* fn) {
    JsonFields f(text, fn, "request_json", false);
    f.require("id");
    f.require("path");
    f.require("length");
    cohort::TransferRequest r;
    r.id = *f.text("id");
    if (auto v = f.text("workload")) r.workload = *v;
    r.path = *f.text("path");
    if (auto v = f.count("offset")) r.offset = *v;
    r.length = *f.count("length");
    if (auto v = f.integer("priority", INT32_MIN, INT32_MAX)) r.priority = static_cast<int>(*v);
    if (auto v = f.text("kind")) r.kind = *v;
    if (auto v = f.flag("prefetch")) r.prefetch = *v;
    if (auto v = f.flag("stage")) r.stage = *v;
    if (auto v = f.number("deadline_seconds")) {
        if (!std::isfinite(*v) || *v < 0 || *v > kYear)
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: request_json field \"deadline_seconds\" (seconds after submit) must be from 0 "
                                    "to a year, got {}",
                                    fn, *v));
        r.deadline = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(*v));
    }
    f.finish();
    return r;
}

// A C policy as a TransferPolicy: the callback fills a cohort_transfer_actions.
cohort::TransferPolicy callback_policy(cohort_transfer_policy_fn policy, void* user_data) {
    return [policy, user_data](const cohort::TransferFacts& facts) {
        const std::string id(facts.id), workload(facts.workload), kind(facts.kind);
        cohort_transfer_actions sink;
        const int32_t rc = policy(user_data, id.c_str(), workload.c_str(), kind.c_str(), facts.bytes, facts.priority,
                                  facts.prefetch ? 1 : 0, &sink);
        if (rc != 0)
            throw Error(Errc::callback, sink.error.empty() ? fmt::format("the policy callback returned {}", rc)
                                                           : fmt::format("the policy callback returned {}: {}", rc,
                                                                         sink.error));
        return std::move(sink.actions);
    };
}

const cohort::TransferResult* finished(const cohort_transfer& t) {
    if (t.future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return nullptr;
    return &t.future.get();
}

}  // namespace

extern "C" {

int cohort_transfer_actions_add(cohort_transfer_actions* actions, const char* rule, const char* type,
                                const char* category, double factor, double delay_seconds, const int32_t* boost) {
    return guard(__func__, [&](const char* fn) {
        require(actions, fn, "actions");
        require(type, fn, "type");
        const std::string_view t(type);
        if (t != "reduce_prefetch" && t != "delay_transfer" && t != "prioritize" && t != "stage_transfer")
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: type '{}' is not an action the scheduler takes (reduce_prefetch, "
                                    "delay_transfer, prioritize, stage_transfer)",
                                    fn, type));
        if (t == "reduce_prefetch" && !(std::isfinite(factor) && factor >= 0))
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: factor must be a finite number >= 0 for reduce_prefetch, got {}", fn, factor));
        if (t == "delay_transfer" && !(std::isfinite(delay_seconds) && delay_seconds >= 0 && delay_seconds <= kYear))
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: delay_seconds must be from 0 to a year for delay_transfer, got {}", fn,
                                    delay_seconds));
        cohort::PolicyAction a;
        a.rule = rule != nullptr && *rule != '\0' ? rule : "policy";
        a.type = type;
        a.category = category != nullptr ? category : "";
        a.factor = factor;
        a.delay_seconds = delay_seconds;
        if (boost != nullptr) a.boost = *boost;
        actions->actions.push_back(std::move(a));
    });
}

int cohort_transfer_actions_add_value(cohort_transfer_actions* actions, const char* name, double value) {
    return guard(__func__, [&](const char* fn) {
        require(actions, fn, "actions");
        require(name, fn, "name");
        if (actions->actions.empty())
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: no action to add value '{}' to; call cohort_transfer_actions_add first", fn,
                                    name));
        actions->actions.back().values.emplace_back(name, value);
    });
}

int cohort_transfer_actions_set_error(cohort_transfer_actions* actions, const char* message) {
    return guard(__func__, [&](const char* fn) {
        require(actions, fn, "actions");
        actions->error = message != nullptr ? message : "";
    });
}

int cohort_transfer_scheduler_create(const char* options_json, cohort_workload_registry* registry,
                                     cohort_gpu_monitor* monitor, cohort_transfer_policy_fn policy, void* user_data,
                                     cohort_transfer_scheduler** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        cohort::TransferOptions options = options_from_json(options_json, fn);
        if (monitor != nullptr && policy != nullptr)
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: give a monitor or a policy callback, not both (a callback may ask the "
                                    "monitor itself)",
                                    fn));
        if (monitor != nullptr) options.policy = cohort::monitor_policy(monitor->impl);
        if (policy != nullptr) options.policy = callback_policy(policy, user_data);
        if (registry != nullptr) options.registry = &registry->impl;
        *out = new cohort_transfer_scheduler(std::move(options));
    });
}

void cohort_transfer_scheduler_destroy(cohort_transfer_scheduler* scheduler) {
    delete scheduler;
}

int cohort_transfer_submit(cohort_transfer_scheduler* scheduler, const char* request_json, void* buffer,
                           uint64_t buffer_length, cohort_transfer_done_fn on_done, void* user_data,
                           cohort_transfer** out) {
    return guard(__func__, [&](const char* fn) {
        require(scheduler, fn, "scheduler");
        require(out, fn, "out");
        cohort::TransferRequest request = request_from_json(request_json, fn);
        if (buffer == nullptr && buffer_length > 0)
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: transfer '{}': buffer is NULL but buffer_length is {}", fn, request.id,
                                    buffer_length));
        if (buffer != nullptr && buffer_length == 0)
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: transfer '{}': buffer_length is 0; give the buffer's size", fn, request.id));
        if (buffer != nullptr)
            request.buffer = std::span<std::byte>(static_cast<std::byte*>(buffer), static_cast<size_t>(buffer_length));
        if (on_done != nullptr) {
            request.on_done = [on_done, user_data](const cohort::TransferResult& r) {
                const std::string text = result_json(r);
                on_done(user_data, r.id.c_str(), cohort::capi::to_status(r.code), text.c_str(), text.size());
            };
        }
        std::string id = request.id;
        auto future = scheduler->impl.submit(std::move(request)).share();
        *out = new cohort_transfer{std::move(id), std::move(future)};
    });
}

void cohort_transfer_destroy(cohort_transfer* transfer) {
    delete transfer;
}

int cohort_transfer_id(const cohort_transfer* transfer, const char** id) {
    return guard(__func__, [&](const char* fn) {
        require(transfer, fn, "transfer");
        require(id, fn, "id");
        *id = transfer->id.c_str();
    });
}

int cohort_transfer_test(const cohort_transfer* transfer, int32_t* done) {
    return guard(__func__, [&](const char* fn) {
        require(transfer, fn, "transfer");
        require(done, fn, "done");
        *done = finished(*transfer) != nullptr ? 1 : 0;
    });
}

int cohort_transfer_wait(cohort_transfer* transfer, double limit_seconds) {
    return guard(__func__, [&](const char* fn) {
        require(transfer, fn, "transfer");
        const auto limit = cohort::capi::milliseconds_arg(limit_seconds, fn, "limit_seconds", true);
        if (limit.count() == 0)
            transfer->future.wait();
        else if (transfer->future.wait_for(limit) != std::future_status::ready)
            throw Error(Errc::timeout, fmt::format("{}: transfer '{}' has not finished after {} s; it goes on", fn,
                                                   transfer->id, limit_seconds));
        const cohort::TransferResult& r = transfer->future.get();
        if (r.code != Errc::ok) throw Error(r.code, r.error);
    });
}

int cohort_transfer_result(const cohort_transfer* transfer, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(transfer, fn, "transfer");
        require(json, fn, "json");
        const cohort::TransferResult* r = finished(*transfer);
        if (r == nullptr)
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: transfer '{}' has not finished; cohort_transfer_wait for it first (or "
                                    "cohort_transfer_scheduler_explain for its decisions so far)",
                                    fn, transfer->id));
        give_text(result_json(*r), json, length);
    });
}

int cohort_transfer_scheduler_explain(const cohort_transfer_scheduler* scheduler, const char* id, char** json,
                                      size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(scheduler, fn, "scheduler");
        require(id, fn, "id");
        require(json, fn, "json");
        give_text(json::serialize(decisions_json(scheduler->impl.explain(id))), json, length);
    });
}

int cohort_transfer_scheduler_stats(const cohort_transfer_scheduler* scheduler, cohort_transfer_stats* out) {
    return guard(__func__, [&](const char* fn) {
        require(scheduler, fn, "scheduler");
        require(out, fn, "out");
        const cohort::TransferStats s = scheduler->impl.stats();
        cohort_transfer_stats o{};
        o.queued = s.queued;
        o.held = s.held;
        o.running = s.running;
        o.submitted = s.submitted;
        o.completed = s.completed;
        o.failed = s.failed;
        o.dropped = s.dropped;
        o.delayed = s.delayed;
        o.prioritized = s.prioritized;
        o.staged = s.staged;
        o.prefetch_waits = s.prefetch_waits;
        o.misses = s.misses;
        o.bytes = s.bytes;
        o.memory_pressure_events = s.memory_pressure_events;
        o.temperature_events = s.temperature_events;
        o.prefetch_depth = s.prefetch_depth;
        o.total_delay_seconds = s.total_delay_seconds;
        o.bytes_per_second = s.bytes_per_second;
        o.prefetch_factor = s.prefetch_factor;
        *out = o;
    });
}

}  // extern "C"
