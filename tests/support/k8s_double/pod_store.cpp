// Pods of one namespace and the history watches replay; each fate's
// status is written by pod_fate.cpp, selectors are parsed by selector.cpp.
#include "pod_store.hpp"

#include "pod_fate.hpp"

#include <boost/json/array.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <stdexcept>

namespace cohort::k8s_double {

namespace json = boost::json;

namespace {

constexpr std::size_t max_history = 20000;

std::string str(const json::object& o, const char* key) {
    if (const auto* v = o.if_contains(key); v != nullptr && v->is_string()) return std::string(v->as_string());
    return {};
}

json::object& child(json::object& o, const char* key) {
    json::value& v = o[key];
    if (!v.is_object()) v = json::object();
    return v.as_object();
}

// A DNS-1123 subdomain, as pod names must be.
bool valid_name(const std::string& name) {
    if (name.empty() || name.size() > 253) return false;
    if (!std::isalnum(static_cast<unsigned char>(name.front())) ||
        !std::isalnum(static_cast<unsigned char>(name.back())))
        return false;
    return std::all_of(name.begin(), name.end(),
                       [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'; });
}

Answer invalid(const std::string& name, const std::string& message) {
    json::object s = status_object(422, "Invalid", "Pod \"" + name + "\" is invalid: " + message, "pods", name);
    return {422, s};
}

void merge_patch(json::value& target, const json::value& patch) {
    if (!patch.is_object()) {
        target = patch;
        return;
    }
    if (!target.is_object()) target = json::object();
    json::object& t = target.as_object();
    for (const auto& [key, value] : patch.as_object()) {
        if (value.is_null()) {
            t.erase(key);
        } else {
            merge_patch(t[key], value);
        }
    }
}

}  // namespace

std::string now_rfc3339() {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

json::object status_object(int code, const std::string& reason, const std::string& message, const std::string& kind,
                           const std::string& name) {
    json::object s;
    s["kind"] = "Status";
    s["apiVersion"] = "v1";
    s["metadata"] = json::object();
    s["status"] = "Failure";
    s["message"] = message;
    s["reason"] = reason;
    json::object details;
    if (!name.empty()) details["name"] = name;
    details["kind"] = kind;
    s["details"] = std::move(details);
    s["code"] = code;
    return s;
}

PodStore::PodStore(std::string ns) : ns_(std::move(ns)) {}

void PodStore::record(const std::string& type, json::object& pod) {
    ++rv_;
    child(pod, "metadata")["resourceVersion"] = std::to_string(rv_);
    history_.push_back({type, pod, rv_});
    while (history_.size() > max_history) {
        compacted_ = history_.front().resource_version;
        history_.pop_front();
    }
}

void PodStore::notify() {
    std::vector<std::function<void()>> callbacks;
    {
        std::lock_guard lock(mu_);
        for (const auto& [id, cb] : callbacks_) callbacks.push_back(cb);
    }
    for (const auto& cb : callbacks) cb();
}

Answer PodStore::create(json::value body) {
    Answer created;
    {
        std::lock_guard lock(mu_);
        if (!body.is_object())
            return {400, status_object(400, "BadRequest", "the body of the request was not a Pod object")};
        json::object& pod = body.as_object();
        if (const std::string kind = str(pod, "kind"); !kind.empty() && kind != "Pod")
            return {400, status_object(400, "BadRequest",
                                       "the API version in the data (" + str(pod, "apiVersion") +
                                           ") does not match the expected API version (v1) or kind "
                                           "(" +
                                           kind + ") is not Pod")};
        pod["kind"] = "Pod";
        pod["apiVersion"] = "v1";
        json::object& meta = child(pod, "metadata");
        std::string name = str(meta, "name");
        if (name.empty() && !str(meta, "generateName").empty()) {
            name = str(meta, "generateName") + std::to_string(100000 + next_uid_ * 7919 % 900000);
            meta["name"] = name;
        }
        if (name.empty()) return invalid(name, "metadata.name: Required value: name or generateName is required");
        if (!valid_name(name))
            return invalid(name, "metadata.name: Invalid value: \"" + name +
                                     "\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                                     "characters, '-' or '.', and must start and end with an alphanumeric character");
        if (const std::string ns = str(meta, "namespace"); !ns.empty() && ns != ns_)
            return {400, status_object(400, "BadRequest",
                                       "the namespace of the provided object does not match the namespace sent on "
                                       "the request")};
        const json::value* spec = pod.if_contains("spec");
        const json::value* containers =
            spec && spec->is_object() ? spec->as_object().if_contains("containers") : nullptr;
        if (containers == nullptr || !containers->is_array() || containers->as_array().empty())
            return invalid(name, "spec.containers: Required value");
        for (const json::value& c : containers->as_array()) {
            if (!c.is_object() || str(c.as_object(), "name").empty())
                return invalid(name, "spec.containers[0].name: Required value");
            if (str(c.as_object(), "image").empty()) return invalid(name, "spec.containers[0].image: Required value");
        }
        if (pods_.contains(name))
            return {409, status_object(409, "AlreadyExists", "pods \"" + name + "\" already exists", "pods", name)};
        meta["namespace"] = ns_;
        meta["uid"] = "5e1c0000-0000-4000-8000-" +
                      std::string(12 - std::min<std::size_t>(12, std::to_string(next_uid_).size()), '0') +
                      std::to_string(next_uid_);
        ++next_uid_;
        meta["creationTimestamp"] = now_rfc3339();
        json::object status;
        status["phase"] = "Pending";
        status["qosClass"] = "BestEffort";
        pod["status"] = std::move(status);
        record("ADDED", pod);
        pods_[name] = pod;
        created = {201, pod};  // as created: a test may change or delete it at once
    }
    notify();
    return created;
}

Answer PodStore::get(const std::string& name) const {
    std::lock_guard lock(mu_);
    const auto it = pods_.find(name);
    if (it == pods_.end())
        return {404, status_object(404, "NotFound", "pods \"" + name + "\" not found", "pods", name)};
    return {200, it->second};
}

Answer PodStore::remove(const std::string& name) {
    Answer answer;
    {
        std::lock_guard lock(mu_);
        const auto it = pods_.find(name);
        if (it == pods_.end())
            return {404, status_object(404, "NotFound", "pods \"" + name + "\" not found", "pods", name)};
        json::object pod = std::move(it->second);
        pods_.erase(it);
        json::object& meta = child(pod, "metadata");
        if (!meta.contains("deletionTimestamp")) meta["deletionTimestamp"] = now_rfc3339();
        meta["deletionGracePeriodSeconds"] = 0;
        record("DELETED", pod);
        answer = {200, pod};
    }
    notify();
    return answer;
}

Answer PodStore::patch(const std::string& name, const json::value& patch) {
    Answer answer;
    {
        std::lock_guard lock(mu_);
        const auto it = pods_.find(name);
        if (it == pods_.end())
            return {404, status_object(404, "NotFound", "pods \"" + name + "\" not found", "pods", name)};
        if (!patch.is_object()) return {400, status_object(400, "BadRequest", "the patch is not a JSON object")};
        json::value pod = it->second;
        const json::object keep = it->second.at("metadata").as_object();
        merge_patch(pod, patch);
        json::object& meta = child(pod.as_object(), "metadata");
        for (const char* key : {"name", "namespace", "uid", "creationTimestamp"}) meta[key] = keep.at(key);
        it->second = pod.as_object();
        record("MODIFIED", it->second);
        answer = {200, it->second};
    }
    notify();
    return answer;
}

Answer PodStore::list(const Selector& labels, const Selector& fields) const {
    std::lock_guard lock(mu_);
    json::array items;
    for (const auto& [name, pod] : pods_)
        if (labels.matches(pod) && fields.matches(pod)) items.push_back(pod);
    json::object list;
    list["kind"] = "PodList";
    list["apiVersion"] = "v1";
    json::object meta;
    meta["resourceVersion"] = std::to_string(rv_);
    list["metadata"] = std::move(meta);
    list["items"] = std::move(items);
    return {200, list};
}

std::optional<std::vector<WatchEvent>> PodStore::events_since(uint64_t resource_version, const Selector& labels,
                                                              const Selector& fields) const {
    std::lock_guard lock(mu_);
    if (resource_version < compacted_) return std::nullopt;
    std::vector<WatchEvent> out;
    // History is in resourceVersion order: find the first newer one.
    auto it = std::upper_bound(history_.begin(), history_.end(), resource_version,
                               [](uint64_t rv, const WatchEvent& e) { return rv < e.resource_version; });
    for (; it != history_.end(); ++it)
        if (labels.matches(it->object) && fields.matches(it->object)) out.push_back(*it);
    return out;
}

uint64_t PodStore::resource_version() const {
    std::lock_guard lock(mu_);
    return rv_;
}

uint64_t PodStore::oldest_resource_version() const {
    std::lock_guard lock(mu_);
    return compacted_;
}

bool PodStore::modify(const std::string& name, const std::function<void(json::object&)>& edit) {
    {
        std::lock_guard lock(mu_);
        const auto it = pods_.find(name);
        if (it == pods_.end()) return false;
        edit(it->second);
        record("MODIFIED", it->second);
    }
    notify();
    return true;
}

bool PodStore::set_fate(const std::string& name, PodFate fate, int exit_code, std::string reason) {
    return modify(name, [&](json::object& pod) { apply_fate(pod, fate, exit_code, reason); });
}

std::vector<std::string> PodStore::names() const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& [name, pod] : pods_) out.push_back(name);
    return out;
}

std::optional<json::object> PodStore::pod(const std::string& name) const {
    std::lock_guard lock(mu_);
    const auto it = pods_.find(name);
    if (it == pods_.end()) return std::nullopt;
    return it->second;
}

void PodStore::compact() {
    std::lock_guard lock(mu_);
    history_.clear();
    compacted_ = rv_;
}

int PodStore::on_change(std::function<void()> callback) {
    std::lock_guard lock(mu_);
    callbacks_[next_callback_] = std::move(callback);
    return next_callback_++;
}

void PodStore::remove_on_change(int id) {
    std::lock_guard lock(mu_);
    callbacks_.erase(id);
}

void PodStore::add_node(const std::string& node) {
    std::vector<std::string> pending;
    {
        std::lock_guard lock(mu_);
        for (const auto& [name, pod] : pods_) {
            const json::value* status = pod.if_contains("status");
            if (status == nullptr || !status->is_object() || str(status->as_object(), "phase") != "Pending") continue;
            const json::value* conditions = status->as_object().if_contains("conditions");
            if (conditions == nullptr || !conditions->is_array()) continue;
            for (const json::value& c : conditions->as_array())
                if (c.is_object() && str(c.as_object(), "reason") == "Unschedulable") pending.push_back(name);
        }
    }
    for (const std::string& name : pending) {
        modify(name, [&](json::object& pod) {
            child(pod, "spec")["nodeName"] = node;
            apply_fate(pod, PodFate::running, 0, {});
        });
    }
}

}  // namespace cohort::k8s_double
