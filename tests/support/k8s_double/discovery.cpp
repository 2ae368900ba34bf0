// Discovery: the resources the double serves (pods) and the ones kubectl
// must be able to map for `apply --dry-run=client` of examples/kubernetes
// (services, service accounts, deployments, roles, role bindings), which
// the double only reports as absent.
#include "discovery.hpp"

#include <boost/json/array.hpp>

#include <initializer_list>
#include <string_view>

namespace cohort::k8s_double {

namespace json = boost::json;

namespace {

struct Resource {
    const char* group_version;
    const char* name;
    const char* kind;
    const char* short_name;
};

constexpr Resource resources[] = {
    {"v1", "pods", "Pod", "po"},
    {"v1", "services", "Service", "svc"},
    {"v1", "serviceaccounts", "ServiceAccount", "sa"},
    {"v1", "configmaps", "ConfigMap", "cm"},
    {"apps/v1", "deployments", "Deployment", "deploy"},
    {"rbac.authorization.k8s.io/v1", "roles", "Role", ""},
    {"rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", ""},
};

json::array strings(std::initializer_list<const char*> items) {
    json::array a;
    for (const char* s : items) a.emplace_back(s);
    return a;
}

json::object resource_list(std::string_view group_version) {
    json::object list;
    list["kind"] = "APIResourceList";
    list["apiVersion"] = "v1";
    list["groupVersion"] = group_version;
    json::array items;
    for (const Resource& r : resources) {
        if (group_version != r.group_version) continue;
        json::object item;
        item["name"] = r.name;
        std::string singular = r.kind;
        for (char& c : singular) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        item["singularName"] = singular;
        item["namespaced"] = true;
        item["kind"] = r.kind;
        item["verbs"] = strings({"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"});
        if (*r.short_name != '\0') item["shortNames"] = strings({r.short_name});
        if (std::string_view(r.name) == "pods" || std::string_view(r.name) == "services" ||
            std::string_view(r.name) == "deployments")
            item["categories"] = strings({"all"});
        items.push_back(std::move(item));
    }
    list["resources"] = std::move(items);
    return list;
}

json::object group(const char* name, const char* version) {
    json::object v;
    v["groupVersion"] = std::string(name) + "/" + version;
    v["version"] = version;
    json::object g;
    g["name"] = name;
    g["versions"] = json::array{v};
    g["preferredVersion"] = v;
    return g;
}

}  // namespace

std::optional<json::object> discovery(const std::string& path, const std::string& server_address) {
    if (path == "/version") {
        json::object v;
        v["major"] = "1";
        v["minor"] = "32";
        v["gitVersion"] = "v1.32.0-cohort-double";
        v["gitCommit"] = "0000000000000000000000000000000000000000";
        v["gitTreeState"] = "clean";
        v["buildDate"] = "2026-01-01T00:00:00Z";
        v["goVersion"] = "go1.23";
        v["compiler"] = "gc";
        v["platform"] = "linux/amd64";
        return v;
    }
    if (path == "/api") {
        json::object cidr;
        cidr["clientCIDR"] = "0.0.0.0/0";
        cidr["serverAddress"] = server_address;
        json::object a;
        a["kind"] = "APIVersions";
        a["versions"] = strings({"v1"});
        a["serverAddressByClientCIDRs"] = json::array{cidr};
        return a;
    }
    if (path == "/apis") {
        json::object a;
        a["kind"] = "APIGroupList";
        a["apiVersion"] = "v1";
        a["groups"] = json::array{group("apps", "v1"), group("rbac.authorization.k8s.io", "v1")};
        return a;
    }
    if (path == "/api/v1") return resource_list("v1");
    if (path == "/apis/apps/v1") return resource_list("apps/v1");
    if (path == "/apis/rbac.authorization.k8s.io/v1") return resource_list("rbac.authorization.k8s.io/v1");
    return std::nullopt;
}

std::string kind_of(const std::string& resource) {
    for (const Resource& r : resources)
        if (resource == r.name) return r.kind;
    return {};
}

}  // namespace cohort::k8s_double
