// Merging cohort's worker into the user's pod template.
#include "elastic/kubernetes/pod_template.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>
#include <boost/json/array.hpp>

#include <cctype>
#include <charconv>

namespace cohort::k8s {

namespace json = boost::json;

namespace {

json::value scalar(const YAML::Node& node) {
    const std::string& s = node.Scalar();
    if (node.Tag() == "!") return json::value(s);  // quoted: a string whatever it holds
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    if (s == "null" || s == "~" || s == "Null" || s.empty()) return nullptr;
    int64_t i = 0;
    if (auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), i); ec == std::errc() && p == s.data() + s.size())
        return i;
    double d = 0;
    if (auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), d); ec == std::errc() && p == s.data() + s.size())
        return d;
    return json::value(s);
}

json::value to_json(const YAML::Node& node) {
    switch (node.Type()) {
        case YAML::NodeType::Map: {
            json::object o;
            for (const auto& kv : node) o[kv.first.as<std::string>()] = to_json(kv.second);
            return o;
        }
        case YAML::NodeType::Sequence: {
            json::array a;
            for (const auto& item : node) a.push_back(to_json(item));
            return a;
        }
        case YAML::NodeType::Scalar:
            return scalar(node);
        default:
            return nullptr;
    }
}

json::object& child(json::object& o, const char* key) {
    json::value& v = o[key];
    if (!v.is_object()) v = json::object();
    return v.as_object();
}

}  // namespace

std::string dns_name(std::string_view text, std::size_t limit) {
    std::string out;
    for (char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u)) {
            out += static_cast<char>(std::tolower(u));
        } else if (!out.empty() && out.back() != '-') {
            out += '-';
        }
    }
    if (out.size() > limit) out.resize(limit);
    while (!out.empty() && out.back() == '-') out.pop_back();
    return out.empty() ? std::string("w") : out;
}

json::value yaml_file_to_json(const std::filesystem::path& file) {
    try {
        return to_json(YAML::LoadFile(file.string()));
    } catch (const YAML::BadFile&) {
        throw Error(Errc::invalid_argument, fmt::format("pod template '{}': cannot read the file", file.string()));
    } catch (const YAML::Exception& e) {
        throw Error(Errc::invalid_argument, fmt::format("pod template '{}':{}:{}: {}", file.string(), e.mark.line + 1,
                                                        e.mark.column + 1, e.msg));
    }
}

PodTemplate::PodTemplate(const std::filesystem::path& file, const std::string& image) {
    const std::string where = file.empty() ? std::string("the default pod") : "pod template '" + file.string() + "'";
    if (!file.empty()) {
        json::value v = yaml_file_to_json(file);
        if (!v.is_object())
            throw Error(Errc::invalid_argument, where + ": expected a Pod manifest or a pod spec (a mapping)");
        json::object& o = v.as_object();
        if (o.contains("containers")) {  // a bare pod spec
            pod_["spec"] = std::move(o);
        } else {
            if (const auto* kind = o.if_contains("kind"); kind && (!kind->is_string() || kind->as_string() != "Pod"))
                throw Error(Errc::invalid_argument,
                            where + ": kind must be Pod (or give a bare pod spec with containers)");
            pod_ = std::move(o);
        }
    }
    json::object& spec = child(pod_, "spec");
    json::value& containers = spec["containers"];
    if (containers.is_null()) containers = json::array{json::object{{"name", "worker"}}};
    if (!containers.is_array() || containers.as_array().empty() || !containers.as_array()[0].is_object())
        throw Error(Errc::invalid_argument, where + ": spec.containers must be a list with at least one container");
    json::object& first = containers.as_array()[0].as_object();
    if (!first.contains("name")) first["name"] = "worker";
    const json::value* img = first.if_contains("image");
    if (img == nullptr || !img->is_string() || img->as_string().empty()) {
        if (image.empty())
            throw Error(Errc::invalid_argument,
                        where + ": the first container has no image; set spec.containers[0].image or give an image");
        first["image"] = image;
    }
    if (const auto* env = first.if_contains("env"); env && !env->is_array())
        throw Error(Errc::invalid_argument, where + ": spec.containers[0].env must be a list");
}

json::object PodTemplate::make(const std::string& pod_name, const std::string& ns, const std::string& job,
                               const WorkerSpec& worker, const Owner& owner) const {
    json::object pod = pod_;
    pod["apiVersion"] = "v1";
    pod["kind"] = "Pod";
    json::object& meta = child(pod, "metadata");
    meta.erase("generateName");
    meta.erase("resourceVersion");
    meta.erase("uid");
    meta["name"] = pod_name;
    meta["namespace"] = ns;
    json::object& labels = child(meta, "labels");
    labels[job_label] = dns_name(job);
    labels[worker_label] = dns_name(worker.id);
    labels[role_label] = "worker";
    child(meta, "annotations")[worker_annotation] = worker.id;
    if (!owner.uid.empty()) {
        json::value& refs = meta["ownerReferences"];
        if (!refs.is_array()) refs = json::array();
        refs.as_array().push_back(json::object{{"apiVersion", "v1"},
                                               {"kind", "Pod"},
                                               {"name", owner.name},
                                               {"uid", owner.uid},
                                               {"controller", true},
                                               {"blockOwnerDeletion", true}});
    }
    json::object& spec = pod["spec"].as_object();
    spec["restartPolicy"] = "Never";
    json::object& c = spec["containers"].as_array()[0].as_object();
    if (!worker.argv.empty()) {
        json::array command;
        for (const std::string& a : worker.argv) command.emplace_back(a);
        c["command"] = std::move(command);
        c.erase("args");
    }
    if (!worker.cwd.empty()) c["workingDir"] = worker.cwd.string();
    json::array env;
    if (const auto* old = c.if_contains("env"); old && old->is_array()) {
        for (const json::value& e : old->as_array()) {
            const auto* n = e.is_object() ? e.as_object().if_contains("name") : nullptr;
            if (n && n->is_string() &&
                (worker.env.contains(std::string(n->as_string())) || n->as_string() == kPodIpVariable))
                continue;
            env.push_back(e);
        }
    }
    // The pod's own IP from the downward API, ahead of cohort's variables so
    // that their values can name it as $(COHORT_POD_IP): the kubelet expands
    // references to variables defined earlier in the list.
    env.push_back(json::object{{"name", kPodIpVariable},
                               {"valueFrom", json::object{{"fieldRef", json::object{{"fieldPath", "status.podIP"}}}}}});
    for (const auto& [name, value] : worker.env) env.push_back(json::object{{"name", name}, {"value", value}});
    c["env"] = std::move(env);
    return pod;
}

}  // namespace cohort::k8s
