// C ABI: the launch environment (cohort/launch_env.hpp) and communicators
// made from it.
#include "handles.hpp"

#include <cohort/launch_env.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <string_view>
#include <utility>

struct cohort_launch_env {
    cohort::LaunchEnv impl;
};

using cohort::Errc;
using cohort::Error;
using cohort::capi::guard;
using cohort::capi::require;

namespace {

// The source as static storage, for cohort_comm_from_env's borrowed-forever
// out-parameter.
const char* static_source(std::string_view source) {
    for (const char* name : {"cohort", "torchrun", "openmpi", "slurm"})
        if (source == name) return name;
    return "none";
}

// Runs `read` on the handle's field, checking both pointers.
template <typename T, typename Read>
int get(const char* fn, const cohort_launch_env* env, T* out, const char* what, Read read) {
    return guard(fn, [&](const char* f) {
        require(env, f, "env");
        require(out, f, what);
        *out = read(env->impl);
    });
}

}  // namespace

extern "C" {

int cohort_launch_env_from_env(cohort_launch_env** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        try {
            *out = new cohort_launch_env{cohort::read_launch_env()};
        } catch (const Error& e) {
            throw Error(e.code(), fmt::format("{}: {}", fn, e.what()));
        }
    });
}

void cohort_launch_env_destroy(cohort_launch_env* env) {
    delete env;
}

int cohort_launch_env_rank(const cohort_launch_env* env, int32_t* rank) {
    return get(__func__, env, rank, "rank", [](const cohort::LaunchEnv& e) { return int32_t(e.rank); });
}

int cohort_launch_env_world_size(const cohort_launch_env* env, int32_t* world_size) {
    return get(__func__, env, world_size, "world_size",
               [](const cohort::LaunchEnv& e) { return int32_t(e.world_size); });
}

int cohort_launch_env_local_rank(const cohort_launch_env* env, int32_t* local_rank) {
    return get(__func__, env, local_rank, "local_rank",
               [](const cohort::LaunchEnv& e) { return int32_t(e.local_rank); });
}

int cohort_launch_env_local_world_size(const cohort_launch_env* env, int32_t* local_world_size) {
    return get(__func__, env, local_world_size, "local_world_size",
               [](const cohort::LaunchEnv& e) { return int32_t(e.local_world_size); });
}

int cohort_launch_env_node_rank(const cohort_launch_env* env, int32_t* node_rank) {
    return get(__func__, env, node_rank, "node_rank", [](const cohort::LaunchEnv& e) { return int32_t(e.node_rank); });
}

int cohort_launch_env_store(const cohort_launch_env* env, const char** store) {
    return get(__func__, env, store, "store", [](const cohort::LaunchEnv& e) { return e.store_url.c_str(); });
}

int cohort_launch_env_source(const cohort_launch_env* env, const char** source) {
    return get(__func__, env, source, "source", [](const cohort::LaunchEnv& e) { return e.source.c_str(); });
}

int cohort_launch_env_note_count(const cohort_launch_env* env, uint32_t* count) {
    return get(__func__, env, count, "count",
               [](const cohort::LaunchEnv& e) { return static_cast<uint32_t>(e.notes.size()); });
}

int cohort_launch_env_note(const cohort_launch_env* env, uint32_t index, const char** note) {
    return guard(__func__, [&](const char* fn) {
        require(env, fn, "env");
        require(note, fn, "note");
        const auto& notes = env->impl.notes;
        if (index >= notes.size())
            throw Error(Errc::out_of_range, fmt::format("{}: index {} is past the {} notes", fn, index, notes.size()));
        *note = notes[index].c_str();
    });
}

int cohort_comm_from_env(const cohort_comm_options* options, const char** source, cohort_comm** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        cohort::LaunchEnv env;
        try {
            env = cohort::read_launch_env();
        } catch (const Error& e) {
            throw Error(e.code(), fmt::format("{}: {}", fn, e.what()));
        }
        cohort::CommOptions o = options ? options->impl : cohort::CommOptions{};
        o.rank = -1;  // from the environment
        o.size = 0;
        try {
            *out = new cohort_comm{cohort::communicator_from_env(std::move(o), env)};
        } catch (const Error& e) {
            throw Error(e.code(), fmt::format("{}: {}", fn, e.what()));
        }
        if (source != nullptr) *source = static_source(env.source);
    });
}

}  // extern "C"
