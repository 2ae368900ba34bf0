// Where the API server is: the service account's files inside a pod, or a
// kubeconfig file outside one (the fields kubectl reads for a token or a
// client certificate; exec and auth-provider plugins are not run). The
// certificates and keys stay in memory (libcurl takes them as blobs), and
// are checked here so that a bad one is named with its file and field.
#include "elastic/kubernetes/pem.hpp"

#include <cohort/error.hpp>
#include <cohort/kubernetes.hpp>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace cohort {

namespace {

std::string read_file(const std::filesystem::path& path, const std::string& what) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw Error(Errc::not_found,
                    fmt::format("{}: cannot read '{}': {}", what, path.string(), std::strerror(errno)));
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    return s;
}

std::string base64_decode(const std::string& text, const std::string& where) {
    std::string clean;
    for (char c : text)
        if (c != '\n' && c != '\r' && c != ' ') clean += c;
    std::string out(clean.size() / 4 * 3 + 3, '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(clean.data()), static_cast<int>(clean.size()));
    if (n < 0 || clean.size() % 4 != 0) throw Error(Errc::invalid_argument, fmt::format("{}: not base64", where));
    std::size_t padding = 0;
    for (auto it = clean.rbegin(); it != clean.rend() && *it == '='; ++it) ++padding;
    out.resize(static_cast<std::size_t>(n) - padding);
    return out;
}

// A named entry of a kubeconfig list (clusters, contexts, users).
YAML::Node named(const YAML::Node& list, const std::string& name, const std::string& what, const std::string& file) {
    if (list && list.IsSequence()) {
        for (const YAML::Node& item : list)
            if (item["name"] && item["name"].as<std::string>() == name) return item[what];
    }
    throw Error(Errc::invalid_argument,
                fmt::format("{}: no {} named '{}' (kubectl config view shows what the file holds)", file, what, name));
}

std::string text(const YAML::Node& map, const char* key) {
    return map && map.IsMap() && map[key] && map[key].IsScalar() ? map[key].as<std::string>() : std::string();
}

// A path in a kubeconfig is relative to the file's folder.
std::filesystem::path beside(const std::filesystem::path& file, const std::string& path) {
    const std::filesystem::path p(path);
    return p.is_absolute() ? p : file.parent_path() / p;
}

// KEY-data (base64 of the PEM) wins over KEY (a file), as in kubectl.
// `where` names the file and the cluster or user; `field` is set to the
// field the PEM came from, for later messages.
std::string pem(const YAML::Node& map, const std::string& key, const std::filesystem::path& file,
                const std::string& where, std::string& field) {
    if (const std::string data = text(map, (key + "-data").c_str()); !data.empty()) {
        field = fmt::format("{}: {}-data", where, key);
        return base64_decode(data, field);
    }
    if (const std::string path = text(map, key.c_str()); !path.empty()) {
        field = fmt::format("{}: {} '{}'", where, key, path);
        return read_file(beside(file, path), fmt::format("{}: {}", where, key));
    }
    return {};
}

}  // namespace

KubernetesCluster in_cluster_config(const std::filesystem::path& dir) {
    KubernetesCluster c;
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0')
        throw Error(Errc::not_found,
                    "in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
                    "are not set (not inside a pod? give a kubeconfig instead)");
    const std::string h = host;
    c.server = fmt::format("https://{}:{}", h.find(':') != std::string::npos ? "[" + h + "]" : h, port);
    c.token = trim(read_file(dir / "token", "in-cluster configuration: the service account token"));
    if (c.token.empty())
        throw Error(Errc::not_found, fmt::format("in-cluster configuration: the service account token '{}' is empty",
                                                 (dir / "token").string()));
    c.token_file = dir / "token";  // the kubelet rotates it: read again as it ages
    c.ca_pem = read_file(dir / "ca.crt", "in-cluster configuration: the cluster's CA");
    k8s::check_certificates(c.ca_pem, "in-cluster configuration: the cluster's CA '" + (dir / "ca.crt").string() + "'");
    c.origin = "the service account in " + dir.string();
    c.ns = trim(read_file(dir / "namespace", "in-cluster configuration: the namespace"));
    if (c.ns.empty()) c.ns = "default";
    return c;
}

KubernetesCluster kubeconfig_config(const std::filesystem::path& file, const std::string& context) {
    YAML::Node doc;
    try {
        doc = YAML::LoadFile(file.string());
    } catch (const YAML::BadFile&) {
        throw Error(Errc::invalid_argument, fmt::format("kubeconfig '{}': cannot read the file", file.string()));
    } catch (const YAML::Exception& e) {
        throw Error(Errc::invalid_argument,
                    fmt::format("kubeconfig '{}':{}:{}: {}", file.string(), e.mark.line + 1, e.mark.column + 1, e.msg));
    }
    const std::string where = "kubeconfig '" + file.string() + "'";
    if (!doc.IsMap()) throw Error(Errc::invalid_argument, where + ": not a kubeconfig (expected a mapping)");
    std::string name = context.empty() ? text(doc, "current-context") : context;
    if (name.empty())
        throw Error(Errc::invalid_argument,
                    where + ": no current-context; name a context (kubectl config get-contexts)");
    try {
        const YAML::Node ctx = named(doc["contexts"], name, "context", where);
        const std::string cluster_name = text(ctx, "cluster"), user_name = text(ctx, "user");
        if (cluster_name.empty())
            throw Error(Errc::invalid_argument, where + ": context '" + name + "' names no cluster");
        const YAML::Node cluster = named(doc["clusters"], cluster_name, "cluster", where);
        KubernetesCluster c;
        c.server = text(cluster, "server");
        if (c.server.empty())
            throw Error(Errc::invalid_argument, where + ": cluster '" + cluster_name + "' has no server");
        while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
        c.ns = text(ctx, "namespace");
        if (c.ns.empty()) c.ns = "default";
        c.origin = fmt::format("{}, context '{}'", where, name);
        c.insecure_skip_tls_verify = text(cluster, "insecure-skip-tls-verify") == "true";
        const std::string in_cluster = where + ": cluster '" + cluster_name + "'";
        std::string ca_field, cert_field, key_field;
        c.ca_pem = pem(cluster, "certificate-authority", file, in_cluster, ca_field);
        if (!c.ca_pem.empty()) {
            // kubectl refuses the pair too: a CA that is then not used would hide a mistake.
            if (c.insecure_skip_tls_verify)
                throw Error(Errc::invalid_argument,
                            in_cluster +
                                ": insecure-skip-tls-verify with a certificate-authority: give one or "
                                "the other (kubectl refuses the pair as well)");
            k8s::check_certificates(c.ca_pem, ca_field);
        }
        if (!user_name.empty()) {
            const YAML::Node user = named(doc["users"], user_name, "user", where);
            const std::string in_user = where + ": user '" + user_name + "'";
            c.token = text(user, "token");
            if (c.token.empty() && !text(user, "tokenFile").empty()) {
                c.token_file = beside(file, text(user, "tokenFile"));
                c.token = trim(read_file(c.token_file, in_user + ": tokenFile"));
                if (c.token.empty())
                    throw Error(Errc::invalid_argument,
                                fmt::format("{}: tokenFile '{}' is empty", in_user, c.token_file.string()));
            }
            c.cert_pem = pem(user, "client-certificate", file, in_user, cert_field);
            c.key_pem = pem(user, "client-key", file, in_user, key_field);
            if (c.cert_pem.empty() != c.key_pem.empty())
                throw Error(Errc::invalid_argument,
                            in_user +
                                (c.cert_pem.empty() ? ": client-key without a client-certificate(-data)"
                                                    : ": client-certificate without a client-key(-data)") +
                                "; a client certificate needs both");
            if (!c.cert_pem.empty()) k8s::check_key_pair(c.cert_pem, cert_field, c.key_pem, key_field);
            if (c.token.empty() && c.cert_pem.empty() && user && (user["exec"] || user["auth-provider"]))
                throw Error(Errc::invalid_argument,
                            where + ": user '" + user_name +
                                "' authenticates through an exec or auth-provider "
                                "plugin, which cohort does not run; give it a token or a client certificate");
        }
        return c;
    } catch (const YAML::Exception& e) {
        throw Error(Errc::invalid_argument, fmt::format("{}: {}", where, e.msg));
    }
}

}  // namespace cohort
