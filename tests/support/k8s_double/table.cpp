// The pod columns of `kubectl get pods` (and -o wide), computed the way the
// API server's printer does: STATUS is the pod's reason, else a waiting or
// terminated container's reason, else the phase; Terminating once deleted.
#include "table.hpp"

#include "pod_store.hpp"

#include <boost/json/array.hpp>

#include <chrono>
#include <ctime>

namespace cohort::k8s_double {

namespace json = boost::json;

namespace {

const json::object* obj(const json::object& o, const char* key) {
    const json::value* v = o.if_contains(key);
    return v != nullptr && v->is_object() ? &v->as_object() : nullptr;
}

std::string str(const json::object* o, const char* key) {
    if (o == nullptr) return {};
    if (const auto* v = o->if_contains(key); v != nullptr && v->is_string()) return std::string(v->as_string());
    return {};
}

std::string age(const std::string& stamp) {
    std::tm tm{};
    if (stamp.empty() || strptime(stamp.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm) == nullptr) return "<unknown>";
    const long seconds = static_cast<long>(std::time(nullptr) - timegm(&tm));
    if (seconds < 120) return std::to_string(seconds < 0 ? 0 : seconds) + "s";
    if (seconds < 7200) return std::to_string(seconds / 60) + "m";
    return std::to_string(seconds / 3600) + "h";
}

json::object column(const char* name, const char* type, const char* format, const char* description, int priority) {
    json::object c;
    c["name"] = name;
    c["type"] = type;
    c["format"] = format;
    c["description"] = description;
    c["priority"] = priority;
    return c;
}

json::array row(const json::object& pod) {
    const json::object* meta = obj(pod, "metadata");
    const json::object* spec = obj(pod, "spec");
    const json::object* status = obj(pod, "status");
    int ready = 0, total = 0, restarts = 0;
    std::string reason = str(status, "reason");
    if (reason.empty()) reason = str(status, "phase");
    if (const json::value* cs = status ? status->if_contains("containerStatuses") : nullptr; cs && cs->is_array()) {
        for (const json::value& c : cs->as_array()) {
            if (!c.is_object()) continue;
            ++total;
            const json::object& co = c.as_object();
            if (const auto* r = co.if_contains("ready"); r && r->is_bool() && r->as_bool()) ++ready;
            if (const auto* r = co.if_contains("restartCount"); r && r->is_int64())
                restarts += static_cast<int>(r->as_int64());
            const json::object* state = obj(co, "state");
            if (const json::object* w = state ? obj(*state, "waiting") : nullptr;
                w && !str(w, "reason").empty() && str(status, "reason").empty())
                reason = str(w, "reason");
            if (const json::object* t = state ? obj(*state, "terminated") : nullptr; t && str(status, "reason").empty())
                reason = str(t, "reason").empty() ? "Error" : str(t, "reason");
        }
    } else if (const json::value* c = spec ? spec->if_contains("containers") : nullptr; c && c->is_array()) {
        total = static_cast<int>(c->as_array().size());
    }
    if (meta && meta->contains("deletionTimestamp") && str(status, "reason") != "NodeLost") reason = "Terminating";
    auto none = [](std::string s) { return s.empty() ? std::string("<none>") : s; };
    json::array cells;
    cells.emplace_back(str(meta, "name"));
    cells.emplace_back(std::to_string(ready) + "/" + std::to_string(total));
    cells.emplace_back(reason);
    cells.emplace_back(std::to_string(restarts));
    cells.emplace_back(age(str(meta, "creationTimestamp")));
    cells.emplace_back(none(str(status, "podIP")));
    cells.emplace_back(none(str(spec, "nodeName")));
    cells.emplace_back("<none>");
    cells.emplace_back("<none>");
    return cells;
}

}  // namespace

bool wants_table(const std::string& accept) {
    return accept.find("as=Table") != std::string::npos && accept.find("g=meta.k8s.io") != std::string::npos;
}

RowObject row_object(const std::string& include_object) {
    if (include_object == "None") return RowObject::none;
    if (include_object == "Object") return RowObject::object;
    return RowObject::metadata;
}

json::object pod_table(const std::vector<json::object>& pods, const std::string& resource_version, RowObject include) {
    json::object table;
    table["kind"] = "Table";
    table["apiVersion"] = "meta.k8s.io/v1";
    json::object meta;
    meta["resourceVersion"] = resource_version;
    table["metadata"] = std::move(meta);
    json::array columns;
    columns.push_back(column("Name", "string", "name", "Name must be unique within a namespace.", 0));
    columns.push_back(
        column("Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0));
    columns.push_back(column("Status", "string", "", "The aggregate status of the containers in this pod.", 0));
    columns.push_back(
        column("Restarts", "string", "", "The number of times the containers in this pod have been restarted.", 0));
    columns.push_back(column("Age", "string", "",
                             "CreationTimestamp is a timestamp representing the server time when "
                             "this object was created.",
                             0));
    columns.push_back(column("IP", "string", "", "IP address allocated to the pod.", 1));
    columns.push_back(column("Node", "string", "", "Name of the Node this pod is scheduled on.", 1));
    columns.push_back(column("Nominated Node", "string", "", "Name of the node nominated by the scheduler.", 1));
    columns.push_back(column("Readiness Gates", "string", "", "Pod's readiness gates.", 1));
    table["columnDefinitions"] = std::move(columns);
    json::array rows;
    for (const json::object& pod : pods) {
        json::object r;
        r["cells"] = row(pod);
        if (include == RowObject::object) {
            r["object"] = pod;
        } else if (include == RowObject::metadata) {
            json::object partial;
            partial["kind"] = "PartialObjectMetadata";
            partial["apiVersion"] = "meta.k8s.io/v1";
            partial["metadata"] = pod.contains("metadata") ? pod.at("metadata") : json::object();
            r["object"] = std::move(partial);
        }
        rows.push_back(std::move(r));
    }
    table["rows"] = std::move(rows);
    return table;
}

}  // namespace cohort::k8s_double
