// The pod a worker runs in: the user's template (a Pod manifest or a bare
// pod spec, YAML or JSON) with cohort's name, labels, annotation, owner,
// command and environment merged in.
#pragma once

#include <cohort/scheduler.hpp>

#include <boost/json/object.hpp>

#include <filesystem>
#include <string>
#include <string_view>

namespace cohort::k8s {

// Every worker's first container gets the pod's IP in this variable
// (downward API, status.podIP), before cohort's other variables.
inline constexpr std::string_view kPodIpVariable = "COHORT_POD_IP";

inline constexpr const char* job_label = "cohort.dev/job";
inline constexpr const char* worker_label = "cohort.dev/worker";
inline constexpr const char* worker_annotation = "cohort.dev/worker-id";
inline constexpr const char* role_label = "cohort.dev/role";

struct Owner {
    std::string name;  // a pod
    std::string uid;
};

class PodTemplate {
public:
    // Empty path: one container named "worker" running `image`. Throws
    // Error(invalid_argument) naming the file and the field.
    PodTemplate(const std::filesystem::path& file, const std::string& image);

    // The pod for `spec`. The worker's argv replaces the first container's
    // command (and its args), its env overrides the template's variables of
    // the same name, restartPolicy is Never (cohort relaunches, so the
    // kubelet must not restart a failed worker behind the policy's back).
    boost::json::object make(const std::string& pod_name, const std::string& ns, const std::string& job,
                             const WorkerSpec& spec, const Owner& owner) const;

private:
    boost::json::object pod_;
};

// A name Kubernetes accepts (lowercase RFC 1123: [a-z0-9-.]), at most `limit` characters.
std::string dns_name(std::string_view text, std::size_t limit = 63);
// YAML (a superset of JSON) as JSON values: quoted scalars stay strings,
// plain ones become numbers, booleans or null where YAML 1.2 reads them so.
boost::json::value yaml_file_to_json(const std::filesystem::path& file);

}  // namespace cohort::k8s
