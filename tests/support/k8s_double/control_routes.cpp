// The /_double/ routes: a test's hand on the pods and the faults.
#include "control_routes.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <map>
#include <string_view>

namespace cohort::k8s_double {

namespace json = boost::json;

namespace {

std::map<std::string, std::string> query_of(const std::string& target, std::string& path) {
    std::map<std::string, std::string> q;
    const auto at = target.find('?');
    path = target.substr(0, at);
    if (at == std::string::npos) return q;
    std::string_view rest(target);
    rest.remove_prefix(at + 1);
    while (!rest.empty()) {
        const auto amp = rest.find('&');
        const std::string_view kv = rest.substr(0, amp);
        const auto eq = kv.find('=');
        q[std::string(kv.substr(0, eq))] = eq == std::string_view::npos ? "" : std::string(kv.substr(eq + 1));
        if (amp == std::string_view::npos) break;
        rest.remove_prefix(amp + 1);
    }
    return q;
}

int number(const std::map<std::string, std::string>& q, const char* key, int otherwise) {
    const auto it = q.find(key);
    if (it == q.end() || it->second.empty()) return otherwise;
    try {
        return std::stoi(it->second);
    } catch (const std::exception&) {
        return otherwise;
    }
}

const std::map<std::string, PodFate> fates = {
    {"running", PodFate::running},
    {"succeeded", PodFate::succeeded},
    {"failed", PodFate::failed},
    {"oom_killed", PodFate::oom_killed},
    {"evicted", PodFate::evicted},
    {"preempted", PodFate::preempted},
    {"node_lost", PodFate::node_lost},
    {"unschedulable", PodFate::unschedulable},
    {"image_pull_error", PodFate::image_pull_error},
};

}  // namespace

ApiServer::Control control_routes(PodStore& store, ApiServer& server, PodRunner* runner) {
    return [&store, &server, runner](const std::string& target) -> std::pair<int, std::string> {
        std::string path;
        const auto q = query_of(target, path);
        const std::string pods = "/_double/pods/";
        if (path.rfind(pods, 0) == 0) {
            const std::string rest = path.substr(pods.size());
            const auto slash = rest.find('/');
            if (slash == std::string::npos) return {400, "expected /_double/pods/NAME/FATE"};
            const std::string name = rest.substr(0, slash), what = rest.substr(slash + 1);
            if (what == "oom") {
                if (runner == nullptr) return {400, "no pod runner: start the double with --run-pods"};
                return runner->oom_kill(name) ? std::pair{200, std::string("ok")}
                                              : std::pair{404, "pod " + name + " runs no process here"};
            }
            const auto fate = fates.find(what);
            if (fate == fates.end()) return {400, "unknown fate '" + what + "'"};
            const auto reason = q.find("reason");
            if (!store.set_fate(name, fate->second, number(q, "exitCode", 1), reason == q.end() ? "" : reason->second))
                return {404, "no pod " + name};
            return {200, "ok"};
        }
        if (path == "/_double/pods") {
            std::string out;
            for (const std::string& name : store.names()) {
                const auto pod = store.pod(name);
                const json::value* status = pod ? pod->if_contains("status") : nullptr;
                const json::value* phase =
                    status && status->is_object() ? status->as_object().if_contains("phase") : nullptr;
                out += name + " " + (phase && phase->is_string() ? std::string(phase->as_string()) : "?") + "\n";
            }
            if (!out.empty()) out.pop_back();
            return {200, out};
        }
        if (path == "/_double/capacity") {
            if (runner == nullptr) return {400, "no pod runner: start the double with --run-pods"};
            runner->set_capacity(number(q, "pods", 1 << 20));
            return {200, "ok"};
        }
        if (path == "/_double/compact") {
            store.compact();
            return {200, "ok"};
        }
        if (path == "/_double/drop-watches") {
            server.drop_watches();
            return {200, "ok"};
        }
        if (path == "/_double/expire-watches") {
            server.expire_watches();
            return {200, "ok"};
        }
        if (path == "/_double/delay") {
            server.set_delay(std::chrono::milliseconds(number(q, "ms", 0)));
            return {200, "ok"};
        }
        if (path == "/_double/drop-next") {
            server.drop_next(number(q, "count", 1));
            return {200, "ok"};
        }
        if (path == "/_double/gone-as-http") {
            server.set_gone_as_http(number(q, "on", 1) != 0);
            return {200, "ok"};
        }
        if (path == "/_double/stats") {
            const ServerCounts c = server.counts();
            json::object o;
            o["creates"] = c.creates;
            o["deletes"] = c.deletes;
            o["patches"] = c.patches;
            o["gets"] = c.gets;
            o["lists"] = c.lists;
            o["watches"] = c.watches;
            o["conflicts"] = c.conflicts;
            o["open_watches"] = server.open_watches();
            return {200, json::serialize(o)};
        }
        return {404, "unknown control route " + path};
    };
}

}  // namespace cohort::k8s_double
