// Role groups: a job whose processes play several roles (workers plus
// evaluators, parameter servers, ...). Each role is a world of its own,
// with its own rounds, ranks and collectives, so that one role's failures
// never disturb another's: the role's members form coordinator job
// `JOB.ROLE` (the default role, `default` or `worker`, is `JOB` itself).
// cohort-run (--role) and Membership (MembershipOptions::role,
// $COHORT_ROLE) both map a role to its job here; docs/elastic.md, "Role
// groups", says why the roles are jobs rather than groups inside one job.
#pragma once

#include <cohort/export.hpp>

#include <string>
#include <string_view>

namespace cohort {

// torchelastic's ROLE_NAME when none is given.
inline constexpr std::string_view kDefaultRole = "default";

// True for the role whose job is JOB itself: "", "default" or "worker".
COHORT_API bool is_default_role(std::string_view role) noexcept;

// Throws Error(invalid_argument) "WHERE: 'a.b' is not a role name: ..."
// unless `role` is 1 to 64 letters, digits, '_' or '-' (a '.' would make
// the job names of two roles ambiguous).
COHORT_API void check_role_name(std::string_view role, std::string_view where);

// The coordinator job of role `role` of job `job`: `job` for the default
// role, else `job.role`. Throws what check_role_name throws (with "role"
// as WHERE) for a role that is not empty and not a valid name.
COHORT_API std::string role_job(std::string_view job, std::string_view role);

// The role as processes read it in ROLE_NAME: `role`, or "default" when empty.
COHORT_API std::string role_name(std::string_view role);

}  // namespace cohort
