// Role groups: which coordinator job each role of a job is (role_group.hpp).
#include <cohort/error.hpp>
#include <cohort/role_group.hpp>

#include <algorithm>

#include <fmt/format.h>

namespace cohort {

bool is_default_role(std::string_view role) noexcept {
    return role.empty() || role == kDefaultRole || role == "worker";
}

void check_role_name(std::string_view role, std::string_view where) {
    const bool ok = !role.empty() && role.size() <= 64 && std::all_of(role.begin(), role.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
    if (!ok) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: '{}' is not a role name: it must be 1 to 64 letters, digits, '_' or '-' (such "
                                "as worker, evaluator, ps)",
                                where, role));
    }
}

std::string role_job(std::string_view job, std::string_view role) {
    if (is_default_role(role)) return std::string(job);
    check_role_name(role, "role");
    return fmt::format("{}.{}", job, role);
}

std::string role_name(std::string_view role) {
    return role.empty() ? std::string(kDefaultRole) : std::string(role);
}

}  // namespace cohort
