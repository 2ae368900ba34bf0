// Membership::options_from_env: what a launcher tells a worker through its
// environment, checked so that a mistake names the variable and its value.
#include "membership/membership_impl.hpp"

#include <cohort/role_group.hpp>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string_view>

#include <fmt/format.h>

namespace cohort {

namespace membership {

std::string machine_name() {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
    return name;
}

std::string default_member_id(const std::string& host) {
    return fmt::format("{}-{}", host, static_cast<long>(::getpid()));
}

}  // namespace membership

namespace {

// An empty variable counts as unset, as everywhere in cohort.
std::optional<std::string> variable(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
}

[[noreturn]] void bad(std::string message) {
    throw Error(Errc::invalid_argument, std::move(message));
}

std::string required(const char* name, std::string_view meaning) {
    auto value = variable(name);
    if (!value)
        bad(fmt::format("{} is not set: it must give {} (a launcher sets it for the programs it starts)", name,
                        meaning));
    return *value;
}

// "http://HOST:PORT" or "HOST:PORT" -> "http://HOST:PORT"; a list of
// replicas the same, entry by entry; etcd:// as it is.
std::string coordinator_url(const std::string& value) {
    try {
        return normalize_coordinator_url(value);
    } catch (const Error& e) {
        bad(fmt::format("COHORT_COORDINATOR='{}': {}", value, e.what()));
    }
}

// Job names and member ids, as the coordinator accepts them.
void check_name(const char* name, const std::string& value, std::string_view what) {
    const bool printable =
        std::all_of(value.begin(), value.end(), [](char c) { return c > ' ' && c < 127 && c != '/'; });
    if (value.size() > 256 || !printable) {
        bad(
            fmt::format("{}='{}' is not a valid {}: it must be 1 to 256 printable ASCII characters without spaces "
                        "or '/'",
                        name, value, what));
    }
}

uint64_t generation(const std::string& value) {
    uint64_t g = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), g);
    if (ec == std::errc::result_out_of_range) bad(fmt::format("COHORT_GENERATION={} is too large", value));
    if (ec != std::errc() || end != value.data() + value.size()) {
        bad(
            fmt::format("COHORT_GENERATION='{}' is not a number: it must be a non-negative integer (the generation "
                        "the launcher joined this member in), or unset",
                        value));
    }
    return g;
}

}  // namespace

MembershipOptions Membership::options_from_env() {
    MembershipOptions o;
    o.coordinator = coordinator_url(required("COHORT_COORDINATOR", "the coordinator's http://HOST:PORT, its replicas' list or etcd:// URL"));
    o.job = required("COHORT_JOB", "the name of the job to join");
    check_name("COHORT_JOB", o.job, "job name");
    // The one place $COHORT_ROLE is read: a launcher's role groups (cohort-run --role).
    if (auto role = variable("COHORT_ROLE")) {
        check_role_name(*role, "COHORT_ROLE");
        o.role = std::move(*role);
    }
    o.node.host = variable("COHORT_HOST").value_or(membership::machine_name());
    if (auto id = variable("COHORT_MEMBER")) {
        check_name("COHORT_MEMBER", *id, "member id");
        o.node.id = std::move(*id);
    } else {
        o.node.id = membership::default_member_id(o.node.host);
    }
    if (auto g = variable("COHORT_GENERATION")) o.joined_generation = generation(*g);
    if (auto token = variable("COHORT_COORDINATOR_TOKEN")) o.token = *token;
    return o;
}

}  // namespace cohort
