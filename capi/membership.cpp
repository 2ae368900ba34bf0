// C ABI: this process as a member of an elastic job (cohort/membership.hpp).
#include "coordinator_json.hpp"
#include "handles.hpp"
#include "membership_handle.hpp"

#include <cohort/membership.hpp>
#include <cohort/role_group.hpp>

#include <chrono>
#include <cstdint>
#include <string>


using cohort::Errc;
using cohort::Error;
// The C layer's own helpers (handles.hpp, coordinator_json.hpp).
using namespace cohort::capi;

namespace {

std::string text_or_empty(const char* text) {
    return text != nullptr ? std::string(text) : std::string();
}

}  // namespace

extern "C" {

int cohort_membership_create(const char* coordinator, const char* job, const char* member, const char* host,
                             cohort_membership** out) {
    return guard(__func__, [&](const char* fn) {
        require(coordinator, fn, "coordinator");
        require(job, fn, "job");
        require(out, fn, "out");
        cohort::MembershipOptions options;
        options.coordinator = coordinator;
        options.job = job;
        options.node.id = text_or_empty(member);
        options.node.host = text_or_empty(host);
        *out = new cohort_membership{cohort::Membership(std::move(options))};
    });
}

int cohort_membership_from_role(const char* coordinator, const char* job, const char* role, const char* member,
                                const char* host, cohort_membership** out) {
    return guard(__func__, [&](const char* fn) {
        require(coordinator, fn, "coordinator");
        require(job, fn, "job");
        require(out, fn, "out");
        cohort::MembershipOptions options;
        options.coordinator = coordinator;
        options.job = job;
        options.role = text_or_empty(role);
        options.node.id = text_or_empty(member);
        options.node.host = text_or_empty(host);
        *out = new cohort_membership{cohort::Membership(std::move(options))};
    });
}

int cohort_membership_role(const cohort_membership* membership, const char** role) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        require(role, fn, "role");
        *role = membership->impl.role().c_str();
    });
}

int cohort_role_job(const char* job, const char* role, char** out, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(job, fn, "job");
        require(out, fn, "out");
        give_text(cohort::role_job(job, text_or_empty(role)), out, length);
    });
}

int cohort_membership_from_env(cohort_membership** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        *out = new cohort_membership{cohort::Membership(cohort::Membership::options_from_env())};
    });
}

void cohort_membership_destroy(cohort_membership* membership) {
    delete membership;
}

int cohort_membership_member(const cohort_membership* membership, const char** member) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        require(member, fn, "member");
        *member = membership->impl.member().c_str();
    });
}

int cohort_membership_job(const cohort_membership* membership, const char** job) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        require(job, fn, "job");
        *job = membership->impl.job().c_str();
    });
}

int cohort_membership_next_world(cohort_membership* membership, double timeout_seconds, char** world, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        require(world, fn, "world_json");
        const auto timeout = cohort::capi::milliseconds_arg(timeout_seconds, fn, "timeout_seconds", true);
        give_text(world_json(membership->impl.next_world(timeout), false), world, length);
    });
}

int cohort_membership_round_pending(const cohort_membership* membership, int32_t* pending) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        require(pending, fn, "pending");
        *pending = membership->impl.round_pending() ? 1 : 0;
    });
}

int cohort_membership_request_round(cohort_membership* membership, int32_t* pending) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        const bool open = membership->impl.request_round();
        if (pending != nullptr) *pending = open ? 1 : 0;
    });
}

int cohort_membership_report_dead(cohort_membership* membership, const cohort_comm* comm, int32_t* reported,
                                  int32_t* pending) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        require(comm, fn, "comm");
        const std::vector<std::string> ids = membership->impl.report_dead(comm->impl);
        if (reported != nullptr) *reported = static_cast<int32_t>(ids.size());
        if (pending != nullptr) *pending = membership->impl.round_pending() ? 1 : 0;
    });
}

int cohort_comm_from_membership(const cohort_membership* membership, cohort_comm** out) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        require(out, fn, "out");
        *out = new cohort_comm{membership->impl.communicator()};
    });
}

int cohort_membership_record_step(cohort_membership* membership, uint64_t step, double step_time,
                                  double samples_per_sec, double data_wait, double collective_wait) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        membership->impl.record_step({step, step_time, samples_per_sec, data_wait, collective_wait});
    });
}

int cohort_membership_set_collective(cohort_membership* membership, uint64_t sequence, int32_t inside) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        membership->impl.set_collective(sequence, inside != 0);
    });
}

int cohort_membership_set_gpu_json(cohort_membership* membership, const char* json_text) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        membership->impl.set_gpu_json(text_or_empty(json_text));
    });
}

int cohort_membership_next_shard(cohort_membership* membership, char** json_out, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        require(json_out, fn, "json");
        give_text(lease_json(membership->impl.next_shard()), json_out, length);
    });
}

int cohort_membership_shard_done(cohort_membership* membership, uint64_t lease, int32_t* outcome) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        const int32_t done = cohort::capi::shard_outcome(membership->impl.shard_done(lease));
        if (outcome != nullptr) *outcome = done;
    });
}

int cohort_membership_shard_release(cohort_membership* membership, uint64_t lease, int32_t* outcome) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        const int32_t released = cohort::capi::release_outcome(membership->impl.shard_release(lease));
        if (outcome != nullptr) *outcome = released;
    });
}

int cohort_membership_leave(cohort_membership* membership) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        membership->impl.leave();
    });
}

}  // extern "C"
