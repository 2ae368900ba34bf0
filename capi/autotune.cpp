// C ABI: a communicator's tuning by field name, and the Autotuner.
#include "handles.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

using cohort::Errc;
using cohort::Error;
using cohort::capi::guard;
using cohort::capi::require;

struct cohort_autotune_options {
    cohort::AutotuneOptions impl;
    std::vector<cohort::TunableParameter> extra;
};
struct cohort_autotuner {
    cohort::Autotuner impl;
};

static_assert(COHORT_AUTOTUNE_BAYESIAN == static_cast<int32_t>(cohort::AutotuneSearch::bayesian));

namespace {

std::size_t cohort::CommTuning::*field(const char* name, const char* fn) {
    const std::string_view n(name);
    if (n == "fusion_threshold") return &cohort::CommTuning::fusion_threshold;
    if (n == "doubling_max") return &cohort::CommTuning::doubling_max;
    if (n == "hierarchical_min") return &cohort::CommTuning::hierarchical_min;
    if (n == "pipeline_chunk") return &cohort::CommTuning::pipeline_chunk;
    if (n == "shm_single_round_max") return &cohort::CommTuning::shm_single_round_max;
    throw Error(Errc::invalid_argument,
                fmt::format("{}: '{}' is no tuning field (fusion_threshold, doubling_max, hierarchical_min, "
                            "pipeline_chunk, shm_single_round_max)",
                            fn, n));
}

int32_t steps_arg(int32_t value, int32_t least, const char* fn, const char* what) {
    if (value < least)
        throw Error(Errc::invalid_argument, fmt::format("{}: {} {} must be at least {}", fn, what, value, least));
    return value;
}

}  // namespace

int cohort_comm_tuning(const cohort_comm* comm, const char* name, uint64_t* value) {
    return guard(__func__, [&](const char* fn) {
        require(comm, fn, "comm");
        require(name, fn, "name");
        require(value, fn, "value");
        *value = comm->impl.tuning().*field(name, fn);
    });
}

int cohort_comm_set_tuning(cohort_comm* comm, const char* name, uint64_t value) {
    return guard(__func__, [&](const char* fn) {
        require(comm, fn, "comm");
        require(name, fn, "name");
        cohort::CommTuning t = comm->impl.tuning();
        t.*field(name, fn) = static_cast<std::size_t>(value);
        try {
            comm->impl.set_tuning(t);
        } catch (const Error& e) {
            throw Error(e.code(), fmt::format("{}: {}", fn, e.what()));
        }
    });
}

int cohort_autotune_options_create(cohort_autotune_options** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        *out = new cohort_autotune_options{};
    });
}

void cohort_autotune_options_destroy(cohort_autotune_options* options) { delete options; }

int cohort_autotune_options_set_job_id(cohort_autotune_options* options, const char* job_id) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        require(job_id, fn, "job_id");
        if (*job_id == '\0') throw Error(Errc::invalid_argument, fmt::format("{}: job_id must not be empty", fn));
        options->impl.job_id = job_id;
    });
}

int cohort_autotune_options_set_search(cohort_autotune_options* options, int32_t search) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        if (search != COHORT_AUTOTUNE_COORDINATE && search != COHORT_AUTOTUNE_BAYESIAN)
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: search {} is not COHORT_AUTOTUNE_COORDINATE (0) or COHORT_AUTOTUNE_BAYESIAN "
                                    "(1)",
                                    fn, search));
        options->impl.search = static_cast<cohort::AutotuneSearch>(search);
    });
}

int cohort_autotune_options_set_steps(cohort_autotune_options* options, int32_t warmup_steps, int32_t settle_steps,
                                      int32_t samples, int32_t max_steps) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        auto& o = options->impl;
        o.warmup_steps = steps_arg(warmup_steps, 0, fn, "warmup_steps");
        o.settle_steps = steps_arg(settle_steps, 0, fn, "settle_steps");
        o.samples = steps_arg(samples, 1, fn, "samples");
        o.max_steps = steps_arg(max_steps, 1, fn, "max_steps");
    });
}

int cohort_autotune_options_set_max_seconds(cohort_autotune_options* options, double seconds) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        options->impl.max_time = cohort::capi::milliseconds_arg(seconds, fn, "seconds", false);
    });
}

int cohort_autotune_options_set_state_file(cohort_autotune_options* options, const char* path) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        options->impl.state_file = path != nullptr ? path : "";
    });
}

int cohort_autotune_options_fix(cohort_autotune_options* options, const char* name, double value) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        require(name, fn, "name");
        if (!std::isfinite(value))
            throw Error(Errc::invalid_argument, fmt::format("{}: the value of '{}' must be finite", fn, name));
        options->impl.fixed[name] = value;
    });
}

int cohort_autotune_options_add_parameter(cohort_autotune_options* options, const char* name,
                                          const double* candidates, size_t count, double initial, int32_t fixed,
                                          cohort_tune_apply_fn apply, void* user_data) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        require(name, fn, "name");
        if (apply == nullptr) throw Error(Errc::invalid_argument, fmt::format("{}: apply must not be NULL", fn));
        if (count > 0) require(candidates, fn, "candidates");
        if (fixed != 0 && fixed != 1)
            throw Error(Errc::invalid_argument, fmt::format("{}: fixed must be 0 or 1, not {}", fn, fixed));
        cohort::TunableParameter p;
        p.name = name;
        p.candidates.assign(candidates, candidates + count);
        p.initial = initial;
        p.fixed = fixed == 1;
        p.apply = [apply, user_data, n = std::string(name)](double v) {
            if (const int rc = apply(n.c_str(), v, user_data); rc != 0)
                throw Error(Errc::callback, fmt::format("the apply callback of '{}' returned {}", n, rc));
        };
        options->extra.push_back(std::move(p));
    });
}

int cohort_autotuner_create(cohort_comm* comm, const cohort_autotune_options* options, cohort_autotuner** out) {
    return guard(__func__, [&](const char* fn) {
        require(comm, fn, "comm");
        require(out, fn, "out");
        cohort::AutotuneOptions o = options != nullptr ? options->impl : cohort::AutotuneOptions{};
        auto extra = options != nullptr ? options->extra : std::vector<cohort::TunableParameter>{};
        try {
            *out = new cohort_autotuner{cohort::Autotuner(comm->impl, std::move(o), std::move(extra))};
        } catch (const Error& e) {
            throw Error(e.code(), fmt::format("{}: {}", fn, e.what()));
        }
    });
}

void cohort_autotuner_destroy(cohort_autotuner* tuner) { delete tuner; }

int cohort_autotuner_step(cohort_autotuner* tuner, double throughput, int32_t* changed, int32_t* frozen) {
    return guard(__func__, [&](const char* fn) {
        require(tuner, fn, "tuner");
        cohort::AutotuneStep r;
        try {
            r = tuner->impl.step(throughput);
        } catch (const Error& e) {
            throw Error(e.code(), fmt::format("{}: {}", fn, e.what()));
        }
        if (changed != nullptr) *changed = r.changed ? 1 : 0;
        if (frozen != nullptr) *frozen = r.frozen ? 1 : 0;
    });
}

int cohort_autotuner_value(const cohort_autotuner* tuner, const char* name, double* value) {
    return guard(__func__, [&](const char* fn) {
        require(tuner, fn, "tuner");
        require(name, fn, "name");
        require(value, fn, "value");
        const auto values = tuner->impl.values();
        const auto it = values.find(name);
        if (it == values.end()) {
            std::string known;
            for (const auto& [n, v] : values) known += (known.empty() ? "" : ", ") + n;
            throw Error(Errc::not_found, fmt::format("{}: no parameter '{}' (parameters: {})", fn, name, known));
        }
        *value = it->second;
    });
}

int cohort_autotuner_step_bound(const cohort_autotuner* tuner, int64_t* steps) {
    return guard(__func__, [&](const char* fn) {
        require(tuner, fn, "tuner");
        require(steps, fn, "steps");
        *steps = tuner->impl.step_bound();
    });
}

int cohort_autotuner_report(const cohort_autotuner* tuner, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(tuner, fn, "tuner");
        require(json, fn, "json");
        cohort::capi::give_text(tuner->impl.report(), json, length);
    });
}
