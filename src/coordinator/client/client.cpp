// CoordinatorClient: construction, jobs and rendezvous (the retry loop is
// client_call.cpp).
#include "coordinator/client/client_call.hpp"
#include "coordinator/protocol/descriptor.hpp"
#include "coordinator/protocol/job_settings.hpp"
#include "coordinator/protocol/metrics.hpp"
#include "coordinator/protocol/replies.hpp"
#include "coordinator/protocol/requests.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>
#include <thread>

#include <fmt/format.h>

namespace cohort {

namespace json = boost::json;
using namespace coord::client;

namespace {

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
}

std::string duration_text(std::chrono::milliseconds d) {
    if (d.count() < 1000) return fmt::format("{} ms", d.count());
    return fmt::format("{:.1f} s", static_cast<double>(d.count()) / 1000.0);
}

}  // namespace

CoordinatorClientOptions::CoordinatorClientOptions()
    : token(env_or_empty("COHORT_COORDINATOR_TOKEN")),
      tls_ca_file(env_or_empty("COHORT_COORDINATOR_CACERT")),
      tls_cert_file(env_or_empty("COHORT_COORDINATOR_CERT")),
      tls_key_file(env_or_empty("COHORT_COORDINATOR_KEY")) {}

namespace {

// A TLS file that cannot be opened is told now, with the system's reason,
// not as a curl error on the first call.
void check_tls_file(const std::string& path, const char* option, const char* env) {
    if (path.empty()) return;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        throw Error(Errc::invalid_argument,
                    fmt::format("coordinator client: cannot read {} '{}' (${}): {}", option, path, env,
                                std::strerror(errno)));
    }
    ::close(fd);
}

}  // namespace

CoordinatorClient::CoordinatorClient(std::string url, CoordinatorClientOptions options)
    : impl_(std::make_unique<Impl>(coord::client::parse_url_set(url), std::move(options))) {
    if (impl_->options.request_timeout.count() <= 0) {
        throw Error(Errc::invalid_argument, "CoordinatorClientOptions::request_timeout must be positive");
    }
    if (impl_->options.retry_deadline.count() < 0) {
        throw Error(Errc::invalid_argument, "CoordinatorClientOptions::retry_deadline must not be negative");
    }
    const auto& o = impl_->options;
    if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
        throw Error(Errc::invalid_argument,
                    "coordinator client: give both tls_cert_file and tls_key_file ($COHORT_COORDINATOR_CERT and "
                    "$COHORT_COORDINATOR_KEY), or neither");
    }
    check_tls_file(o.tls_ca_file, "the CA file tls_ca_file", "COHORT_COORDINATOR_CACERT");
    check_tls_file(o.tls_cert_file, "the certificate tls_cert_file", "COHORT_COORDINATOR_CERT");
    check_tls_file(o.tls_key_file, "the key tls_key_file", "COHORT_COORDINATOR_KEY");
}

CoordinatorClient::CoordinatorClient(CoordinatorClient&&) noexcept = default;
CoordinatorClient& CoordinatorClient::operator=(CoordinatorClient&&) noexcept = default;
CoordinatorClient::~CoordinatorClient() = default;

const std::string& CoordinatorClient::url() const {
    return impl_->url;
}

std::string CoordinatorClient::leader_url() const {
    return impl_->finder.leader();
}

std::string normalize_coordinator_url(std::string_view text) {
    const std::string with_scheme = coord::client::with_http_scheme(text);
    auto set = coord::client::parse_url_set(with_scheme);  // throws for what is malformed
    // etcd:// keeps its query (the TLS files a worker needs too).
    return set.etcd ? with_scheme : set.address;
}

namespace {

// The join message is a cohort::Node; MemberDescriptor is the client's way
// to spell one, with the role as text.
Node node_of(const MemberDescriptor& d) {
    Node node;
    node.id = d.id;
    node.host = d.host;
    node.address = d.address;
    if (!d.role.empty()) {
        const auto role = parse_role(d.role);
        if (!role) {
            throw Error(Errc::invalid_argument,
                        fmt::format("join: node '{}': unknown role '{}' (expected worker, chief, evaluator, "
                                    "parameter_server or coordinator)",
                                    d.id, d.role));
        }
        node.role = *role;
    }
    node.set_label(Level::network_switch, d.switch_label);
    node.set_label(Level::rack, d.rack);
    node.set_label(Level::zone, d.zone);
    node.set_label(Level::region, d.region);
    node.gpu_count = d.gpus.value_or(0);
    node.gpu_memory_bytes = d.gpu_memory.value_or(0);
    return node;
}

json::value parse_argument(std::string_view text, std::string_view what) {
    boost::system::error_code ec;
    json::value v = json::parse(text, ec);
    if (ec) {
        throw Error(Errc::invalid_argument, fmt::format("{}: not JSON ({})", what, ec.message()));
    }
    return v;
}

}  // namespace

std::string CoordinatorClient::create_job(std::string_view name, const JobSettings& settings) {
    json::object body;
    body["name"] = name;
    body["settings"] = coord::protocol::write(settings);
    const json::value b = body;
    return json::serialize(impl_->call_json("POST", "/v1/jobs", &b));
}

std::string CoordinatorClient::create_job_json(std::string_view name, std::string_view settings_json_text) {
    json::object body;
    body["name"] = name;
    if (!settings_json_text.empty()) body["settings"] = parse_argument(settings_json_text, "create_job: settings");
    const json::value b = body;
    return json::serialize(impl_->call_json("POST", "/v1/jobs", &b));
}

std::string CoordinatorClient::job_state(std::string_view name) {
    return json::serialize(impl_->call_json("GET", job_path(name)));
}

JobSettings CoordinatorClient::job_settings(std::string_view name) {
    return coord::protocol::read<JobSettings>(impl_->call_json("GET", job_path(name) + "/settings"),
                                              "coordinator reply to settings", coord::protocol::kReply);
}

void CoordinatorClient::delete_job(std::string_view name) {
    impl_->call_json("DELETE", job_path(name));
}

JoinReply CoordinatorClient::join(std::string_view job, const MemberDescriptor& node) {
    const json::value b = coord::descriptor_to_json(node_of(node));
    return coord::protocol::read<JoinReply>(impl_->call_json("POST", job_path(job) + "/join", &b),
                                            "coordinator reply to join", coord::protocol::kReply);
}

HeartbeatReply CoordinatorClient::heartbeat(std::string_view job, std::string_view member, uint64_t generation,
                                            const std::optional<HeartbeatMetrics>& metrics) {
    const json::value b =
        coord::protocol::write(coord::protocol::HeartbeatRequest{std::string(member), generation, metrics});
    // Not keyed: heartbeats are most of a large job's requests (10,000
    // members at the default 1 s are 10,000 a second) and would push the
    // keys of joins and store calls out of the coordinator's table; one
    // applied twice records the member's time again, and at worst counts a
    // batch of step samples twice in the health window.
    return coord::protocol::read<HeartbeatReply>(impl_->call_json("POST", job_path(job) + "/heartbeat", &b, false),
                                                 "coordinator reply to heartbeat", coord::protocol::kReply);
}

void CoordinatorClient::leave(std::string_view job, std::string_view member, std::string_view failure) {
    coord::protocol::LeaveRequest request{std::string(member), std::nullopt};
    if (!failure.empty()) request.failed = std::string(failure);
    const json::value b = coord::protocol::write(request);
    impl_->call_json("POST", job_path(job) + "/leave", &b);
}

ReportReply CoordinatorClient::report_dead(std::string_view job, std::string_view member, uint64_t generation,
                                           std::string_view dead, std::string_view why) {
    coord::protocol::ReportRequest request{std::string(member), generation, std::string(dead), std::nullopt};
    if (!why.empty()) request.why = std::string(why);
    const json::value b = coord::protocol::write(request);
    return coord::protocol::read<ReportReply>(impl_->call_json("POST", job_path(job) + "/report", &b),
                                              "coordinator reply to report", coord::protocol::kReply);
}

RoundReply CoordinatorClient::request_round(std::string_view job, std::string_view member) {
    const json::value b = coord::protocol::write(coord::protocol::MemberRequest{std::string(member)});
    return coord::protocol::read<RoundReply>(impl_->call_json("POST", job_path(job) + "/round", &b),
                                             "coordinator reply to round", coord::protocol::kReply);
}

MemberWorld CoordinatorClient::world(std::string_view job, std::string_view member, bool with_peers) {
    const json::value r = impl_->call_json(
        "GET", job_path(job) + "/world?member=" + percent_encode(member) + (with_peers ? "" : "&peers=false"));
    return coord::protocol::read<MemberWorld>(r, "coordinator reply to world", coord::protocol::kReply);
}

MemberWorld CoordinatorClient::wait_for_world(std::string_view job, std::string_view member,
                                              std::chrono::milliseconds timeout) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto deadline = start + std::max(timeout, std::chrono::milliseconds::zero());
    const auto interval =
        std::chrono::milliseconds(static_cast<int64_t>(job_settings(job).heartbeat_interval.value_or(1.0) * 1000.0));
    // The world is read more often than the heartbeat is sent, so that a
    // round that closes is seen at once.
    const auto poll = std::clamp(interval, std::chrono::milliseconds(10), std::chrono::milliseconds(100));
    auto next_heartbeat = start;
    for (;;) {
        const auto now = clock::now();
        if (now >= next_heartbeat) {
            try {
                heartbeat(job, member, 0);
            } catch (const Error& e) {
                // Servers before 0.1.1 refused generation 0 from an active
                // member; the world read below settles it either way.
                if (e.code() != Errc::mismatch) throw;
            }
            next_heartbeat = now + interval;
        }
        MemberWorld w = world(job, member);
        if (w.active) return w;
        if (clock::now() + poll > deadline) {
            throw Error(Errc::timeout,
                        fmt::format("coordinator {}: job '{}': node '{}' has no world after {}; the round has not "
                                    "closed (too few nodes? see GET /v1/jobs/{})",
                                    impl_->url, job, member, duration_text(timeout), job));
        }
        std::this_thread::sleep_for(poll);
    }
}

}  // namespace cohort
