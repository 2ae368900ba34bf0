// Pods, their status as the kubelet and scheduler write it, and the history
// watches replay. Status shapes follow the v1 API reference (PodStatus,
// PodCondition, ContainerStatus, ContainerStateTerminated).
#include "pod_store.hpp"

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

json::object condition(const char* type, const char* status, const std::string& reason = {},
                       const std::string& message = {}) {
    json::object c;
    c["type"] = type;
    c["status"] = status;
    c["lastProbeTime"] = nullptr;
    c["lastTransitionTime"] = now_rfc3339();
    if (!reason.empty()) c["reason"] = reason;
    if (!message.empty()) c["message"] = message;
    return c;
}

void set_condition(json::object& status, json::object c) {
    json::value& v = status["conditions"];
    if (!v.is_array()) v = json::array();
    json::array& conditions = v.as_array();
    for (json::value& existing : conditions) {
        if (existing.is_object() && str(existing.as_object(), "type") == str(c, "type")) {
            existing = std::move(c);
            return;
        }
    }
    conditions.push_back(std::move(c));
}

// One container status per container of the spec, each in `state`.
json::array container_statuses(const json::object& pod, const json::object& state, bool ready) {
    json::array out;
    const json::object* spec = pod.if_contains("spec") ? pod.at("spec").if_object() : nullptr;
    const json::array* containers =
        spec != nullptr && spec->if_contains("containers") ? spec->at("containers").if_array() : nullptr;
    if (containers == nullptr) return out;
    for (const json::value& c : *containers) {
        if (!c.is_object()) continue;
        json::object s;
        s["name"] = str(c.as_object(), "name");
        s["image"] = str(c.as_object(), "image");
        s["imageID"] = "";
        s["ready"] = ready;
        s["restartCount"] = 0;
        s["started"] = ready;
        s["state"] = state;
        s["lastState"] = json::object();
        if (!state.contains("waiting")) s["containerID"] = "containerd://" + str(c.as_object(), "name");
        out.push_back(std::move(s));
    }
    return out;
}

json::object terminated(int exit_code, const std::string& reason) {
    json::object t;
    t["exitCode"] = exit_code;
    t["reason"] = reason;
    t["startedAt"] = now_rfc3339();
    t["finishedAt"] = now_rfc3339();
    json::object state;
    state["terminated"] = std::move(t);
    return state;
}

void schedule(json::object& pod, json::object& status, const std::string& node) {
    child(pod, "spec")["nodeName"] = node;
    status["hostIP"] = "10.0.0.1";
    status["startTime"] = now_rfc3339();
    set_condition(status, condition("PodScheduled", "True"));
    set_condition(status, condition("Initialized", "True"));
}

void finish(json::object& pod, json::object& status, int exit_code, const std::string& reason) {
    const bool ok = exit_code == 0;
    status["phase"] = ok ? "Succeeded" : "Failed";
    set_condition(status, condition("Ready", "False", ok ? "PodCompleted" : "PodFailed"));
    set_condition(status, condition("ContainersReady", "False", ok ? "PodCompleted" : "PodFailed"));
    status["containerStatuses"] = container_statuses(pod, terminated(exit_code, reason), false);
}

void apply_fate(json::object& pod, PodFate fate, int exit_code, const std::string& reason) {
    json::object& status = child(pod, "status");
    const std::string node = [&] {
        const json::object& spec = child(pod, "spec");
        const std::string n = str(spec, "nodeName");
        return n.empty() ? std::string("node-1") : n;
    }();
    switch (fate) {
        case PodFate::running: {
            schedule(pod, status, node);
            status["phase"] = "Running";
            status["podIP"] = "10.1.0.7";
            set_condition(status, condition("Ready", "True"));
            set_condition(status, condition("ContainersReady", "True"));
            json::object running;
            running["startedAt"] = now_rfc3339();
            json::object state;
            state["running"] = std::move(running);
            status["containerStatuses"] = container_statuses(pod, state, true);
            break;
        }
        case PodFate::succeeded:
            schedule(pod, status, node);
            finish(pod, status, 0, "Completed");
            break;
        case PodFate::failed:
            schedule(pod, status, node);
            finish(pod, status, exit_code, reason.empty() ? "Error" : reason);
            break;
        case PodFate::oom_killed:
            schedule(pod, status, node);
            finish(pod, status, 137, "OOMKilled");
            break;
        case PodFate::evicted:
            schedule(pod, status, node);
            finish(pod, status, 137, "Error");
            status["reason"] = "Evicted";
            status["message"] = reason.empty() ? "The node was low on resource: memory. Threshold quantity: 100Mi, "
                                                 "available: 51200Ki. "
                                               : reason;
            set_condition(status, condition("DisruptionTarget", "True", "TerminationByKubelet",
                                            "The node was low on resource: memory."));
            break;
        case PodFate::preempted:
            schedule(pod, status, node);
            set_condition(status, condition("DisruptionTarget", "True", "PreemptionByScheduler",
                                            "default-scheduler: preempting to accommodate a higher priority pod"));
            finish(pod, status, 143, "Error");
            child(pod, "metadata")["deletionTimestamp"] = now_rfc3339();
            child(pod, "metadata")["deletionGracePeriodSeconds"] = 30;
            break;
        case PodFate::node_lost:
            schedule(pod, status, node);
            set_condition(status,
                          condition("Ready", "False", "NodeStatusUnknown", "Kubelet stopped posting node status."));
            set_condition(status, condition("DisruptionTarget", "True", "DeletionByTaintManager",
                                            "Taint manager: deleting due to NoExecute taint"));
            child(pod, "metadata")["deletionTimestamp"] = now_rfc3339();
            child(pod, "metadata")["deletionGracePeriodSeconds"] = 30;
            break;
        case PodFate::unschedulable:
            status["phase"] = "Pending";
            set_condition(status, condition("PodScheduled", "False", "Unschedulable",
                                            reason.empty() ? "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. "
                                                             "preemption: 0/3 nodes are available: 3 No preemption "
                                                             "victims found for incoming pod."
                                                           : reason));
            break;
        case PodFate::image_pull_error: {
            schedule(pod, status, node);
            status["phase"] = "Pending";
            json::object waiting;
            waiting["reason"] = reason.empty() ? "ImagePullBackOff" : reason;
            waiting["message"] = "Back-off pulling image \"registry.invalid/trainer:1\"";
            json::object state;
            state["waiting"] = std::move(waiting);
            status["containerStatuses"] = container_statuses(pod, state, false);
            set_condition(
                status, condition("Ready", "False", "ContainersNotReady", "containers with unready status: [worker]"));
            break;
        }
    }
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

std::vector<std::string> split(const std::string& text, char by) {
    std::vector<std::string> out;
    std::string cur;
    int depth = 0;
    for (char c : text) {
        if (c == '(') ++depth;
        if (c == ')') --depth;
        if (c == by && depth == 0) {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

std::string trim(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    std::size_t i = 0;
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    return s.substr(i);
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

Selector Selector::labels(const std::string& text) {
    Selector sel;
    for (std::string part : split(text, ',')) {
        part = trim(part);
        if (part.empty()) continue;
        Term t;
        std::size_t at;
        if (part.front() == '!') {
            t.op = Term::absent;
            t.key = trim(part.substr(1));
        } else if ((at = part.find("!=")) != std::string::npos) {
            t.op = Term::ne;
            t.key = trim(part.substr(0, at));
            t.values = {trim(part.substr(at + 2))};
        } else if ((at = part.find("==")) != std::string::npos) {
            t.key = trim(part.substr(0, at));
            t.values = {trim(part.substr(at + 2))};
        } else if ((at = part.find('=')) != std::string::npos) {
            t.key = trim(part.substr(0, at));
            t.values = {trim(part.substr(at + 1))};
        } else if ((at = part.find(" notin ")) != std::string::npos || (at = part.find(" in ")) != std::string::npos) {
            const bool notin = part.compare(at, 7, " notin ") == 0;
            t.op = notin ? Term::notin : Term::in;
            t.key = trim(part.substr(0, at));
            std::string rest = trim(part.substr(at + (notin ? 7 : 4)));
            if (rest.size() < 2 || rest.front() != '(' || rest.back() != ')')
                throw std::invalid_argument("unable to parse requirement: found '" + rest + "', expected: '('");
            for (const std::string& v : split(rest.substr(1, rest.size() - 2), ',')) t.values.push_back(trim(v));
        } else {
            t.op = Term::exists;
            t.key = part;
        }
        if (t.key.empty() || t.key.find(' ') != std::string::npos)
            throw std::invalid_argument("unable to parse requirement: invalid label key \"" + t.key + "\"");
        sel.terms_.push_back(std::move(t));
    }
    return sel;
}

Selector Selector::fields(const std::string& text) {
    Selector sel = labels(text);
    sel.on_fields_ = true;
    for (const Term& t : sel.terms_) {
        if (t.op != Term::eq && t.op != Term::ne)
            throw std::invalid_argument("invalid selector: '" + text + "'; can't understand '" + t.key + "'");
        if (t.key != "metadata.name" && t.key != "metadata.namespace" && t.key != "status.phase" &&
            t.key != "spec.nodeName")
            throw std::invalid_argument("\"" + t.key +
                                        "\" is not a known field selector: only \"metadata.name\", "
                                        "\"metadata.namespace\", \"spec.nodeName\", \"status.phase\"");
    }
    return sel;
}

bool Selector::matches(const json::object& pod) const {
    for (const Term& t : terms_) {
        std::optional<std::string> value;
        if (on_fields_) {
            const auto dot = t.key.find('.');
            const json::value* section = pod.if_contains(t.key.substr(0, dot));
            value = section != nullptr && section->is_object()
                        ? str(section->as_object(), t.key.substr(dot + 1).c_str())
                        : std::string();
        } else if (const json::value* meta = pod.if_contains("metadata"); meta != nullptr && meta->is_object()) {
            if (const json::value* labels = meta->as_object().if_contains("labels"); labels && labels->is_object()) {
                if (const json::value* v = labels->as_object().if_contains(t.key); v && v->is_string())
                    value = std::string(v->as_string());
            }
        }
        const auto in_values = [&] {
            return value && std::find(t.values.begin(), t.values.end(), *value) != t.values.end();
        };
        switch (t.op) {
            case Term::eq:
            case Term::in:
                if (!in_values()) return false;
                break;
            case Term::ne:
            case Term::notin:
                if (in_values()) return false;
                break;
            case Term::exists:
                if (!value) return false;
                break;
            case Term::absent:
                if (value) return false;
                break;
        }
    }
    return true;
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
    }
    notify();
    std::lock_guard lock(mu_);
    return {201, pods_.at(body.as_object().at("metadata").at("name").as_string().c_str())};
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
