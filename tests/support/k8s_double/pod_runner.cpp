// The double's kubelet: a thread that looks at the pods every 10 ms.
#include "pod_runner.hpp"

#include <boost/json/array.hpp>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <map>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace cohort::k8s_double {

namespace json = boost::json;

namespace {

std::string str(const json::object& o, const char* key) {
    if (const auto* v = o.if_contains(key); v != nullptr && v->is_string()) return std::string(v->as_string());
    return {};
}

const json::object* container(const json::object& pod) {
    const json::value* spec = pod.if_contains("spec");
    const json::value* cs = spec && spec->is_object() ? spec->as_object().if_contains("containers") : nullptr;
    if (cs == nullptr || !cs->is_array() || cs->as_array().empty() || !cs->as_array()[0].is_object()) return nullptr;
    return &cs->as_array()[0].as_object();
}

// The pods are processes of this host: their IP is loopback.
constexpr const char* kPodIp = "127.0.0.1";

// $(NAME) replaced by an earlier variable's value; $$ is a literal $; an
// unknown reference stays as written (the kubelet's rules).
std::string expand(const std::string& value, const std::map<std::string, std::string>& defined) {
    std::string out;
    for (std::size_t i = 0; i < value.size(); ++i) {
        if (value[i] == '$' && i + 1 < value.size() && value[i + 1] == '$') {
            out += '$';
            ++i;
            continue;
        }
        const std::size_t close =
            value[i] == '$' && i + 1 < value.size() && value[i + 1] == '(' ? value.find(')', i) : std::string::npos;
        const auto it = close != std::string::npos ? defined.find(value.substr(i + 2, close - i - 2)) : defined.end();
        if (it == defined.end()) {
            out += value[i];
            continue;
        }
        out += it->second;
        i = close;
    }
    return out;
}

bool is_pending_unplaced(const json::object& pod) {
    const json::value* status = pod.if_contains("status");
    if (status == nullptr || !status->is_object() || str(status->as_object(), "phase") != "Pending") return false;
    const json::value* spec = pod.if_contains("spec");
    return spec == nullptr || !spec->is_object() || str(spec->as_object(), "nodeName").empty();
}

}  // namespace

PodRunner::PodRunner(PodStore& store, int capacity) : store_(store), capacity_(capacity) {
    thread_ = std::thread([this] { loop(); });
}

PodRunner::~PodRunner() {
    stop_ = true;
    thread_.join();
    std::lock_guard lock(mu_);
    for (auto& [name, p] : running_) {
        ::killpg(p.pid, SIGKILL);
        ::waitpid(p.pid, nullptr, 0);
    }
}

void PodRunner::set_capacity(int capacity) {
    std::lock_guard lock(mu_);
    capacity_ = capacity;
    // Pods marked Unschedulable may fit now.
    seen_.clear();
    for (const auto& [name, p] : running_) seen_.insert(name);
}

bool PodRunner::oom_kill(const std::string& name) {
    std::lock_guard lock(mu_);
    const auto it = running_.find(name);
    if (it == running_.end() || it->second.deleted) return false;
    it->second.oom = true;
    ::killpg(it->second.pid, SIGKILL);
    return true;
}

void PodRunner::loop() {
    while (!stop_) {
        step();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

void PodRunner::start(const std::string& name, const json::object& pod) {
    const json::object* c = container(pod);
    std::vector<std::string> argv;
    std::vector<std::string> env;
    if (c != nullptr) {
        for (const char* key : {"command", "args"}) {
            if (const json::value* v = c->if_contains(key); v && v->is_array())
                for (const json::value& a : v->as_array())
                    if (a.is_string()) argv.emplace_back(a.as_string());
        }
        for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
        // As the kubelet: the downward API's status.podIP (this host: the
        // pods are its processes), and $(NAME) in a value expanded from the
        // variables listed before it.
        std::map<std::string, std::string> defined;
        if (const json::value* v = c->if_contains("env"); v && v->is_array())
            for (const json::value& e : v->as_array()) {
                if (!e.is_object()) continue;
                const json::object& var = e.as_object();
                std::string value = str(var, "value");
                if (const json::value* from = var.if_contains("valueFrom"); from && from->is_object()) {
                    const json::value* field = from->as_object().if_contains("fieldRef");
                    const std::string path = field && field->is_object() ? str(field->as_object(), "fieldPath") : "";
                    value = path == "status.podIP" ? kPodIp : path == "metadata.name" ? name : "";
                }
                value = expand(value, defined);
                defined[str(var, "name")] = value;
                env.push_back(str(var, "name") + "=" + value);
            }
        env.push_back("HOSTNAME=" + name);
    }
    if (argv.empty() && c != nullptr && str(*c, "image").find("/pause:") != std::string::npos) {
        store_.set_fate(name, PodFate::running);  // the pause image does nothing: nothing to start
        return;
    }
    if (argv.empty()) {
        // An image's entrypoint cannot run here: say so as the kubelet would.
        store_.set_fate(name, PodFate::failed, 128, "StartError");
        return;
    }
    // The sandbox's IP comes before the container starts.
    store_.patch(name, json::object{{"status", json::object{{"podIP", kPodIp}}}});
    std::vector<char*> args, envp;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        std::cerr << "k8s-double: pod " << name << ": cannot start '" << argv[0] << "': " << std::strerror(rc) << "\n";
        store_.set_fate(name, PodFate::failed, 128, "StartError");
        return;
    }
    running_[name] = Process{pid};
    store_.set_fate(name, PodFate::running);
}

void PodRunner::step() {
    std::lock_guard lock(mu_);
    // Processes that ended.
    for (auto it = running_.begin(); it != running_.end();) {
        int status = 0;
        const pid_t r = ::waitpid(it->second.pid, &status, WNOHANG);
        if (r == it->second.pid) {
            ::killpg(it->second.pid, SIGKILL);
            if (!it->second.deleted) {
                if (it->second.oom) {
                    store_.set_fate(it->first, PodFate::oom_killed);
                } else if (WIFEXITED(status)) {
                    const int code = WEXITSTATUS(status);
                    store_.set_fate(it->first, code == 0 ? PodFate::succeeded : PodFate::failed, code);
                } else {
                    store_.set_fate(it->first, PodFate::failed, 128 + WTERMSIG(status));
                }
            }
            it = running_.erase(it);
            continue;
        }
        if (it->second.deleted && std::chrono::steady_clock::now() >= it->second.kill_at)
            ::killpg(it->second.pid, SIGKILL);
        ++it;
    }
    // Pods deleted while their process runs: SIGTERM, SIGKILL 5 s later.
    const std::vector<std::string> names = store_.names();
    const std::set<std::string> present(names.begin(), names.end());
    for (auto& [name, p] : running_) {
        if (!p.deleted && !present.contains(name)) {
            p.deleted = true;
            p.kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(5);
            ::killpg(p.pid, SIGTERM);
        }
    }
    for (auto it = seen_.begin(); it != seen_.end();) it = present.contains(*it) ? std::next(it) : seen_.erase(it);
    int active = 0;
    for (const auto& [name, p] : running_) active += p.deleted ? 0 : 1;
    // Pending pods: start what fits, mark the rest Unschedulable once.
    for (const std::string& name : names) {
        if (seen_.contains(name)) continue;
        const auto pod = store_.pod(name);
        if (!pod || !is_pending_unplaced(*pod)) continue;
        seen_.insert(name);
        if (active < capacity_) {
            start(name, *pod);
            ++active;
        } else {
            store_.set_fate(name, PodFate::unschedulable);
        }
    }
}

}  // namespace cohort::k8s_double
