// C ABI: the workload registry (cohort/workloads.hpp). A workload comes in
// as a JSON object and goes out in the same shape, with its live figures.
#include "handles.hpp"
#include "json_fields.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <fmt/format.h>

#include <map>

using cohort::Errc;
using cohort::Error;
using cohort::capi::give_text;
using cohort::capi::guard;
using cohort::capi::JsonFields;
using cohort::capi::require;

namespace json = boost::json;

namespace {

// The workload as cohort_workload_registry_add takes it, and its figures.
json::object workload_json(const cohort::WorkloadState& s) {
    const cohort::Workload& w = s.workload;
    json::array gpus, datasets, models, memory;
    for (uint32_t g : w.gpus) gpus.push_back(g);
    for (const auto& f : w.dataset_files) datasets.push_back(json::string(f.string()));
    for (const auto& f : w.model_files) models.push_back(json::string(f.string()));
    for (const auto& [gpu, bytes] : s.gpu_memory_bytes) memory.push_back({{"gpu", gpu}, {"bytes", bytes}});
    return {{"id", w.id},
            {"pid", w.pid},
            {"gpus", std::move(gpus)},
            {"memory_bytes", w.memory_bytes},
            {"priority", w.priority},
            {"dataset_files", std::move(datasets)},
            {"model_files", std::move(models)},
            {"access", std::string(cohort::to_string(w.access))},
            {"io_bytes_per_second", s.figures.io_bytes_per_second},
            {"batch_size", s.figures.batch_size},
            {"epoch_seconds", s.figures.epoch_seconds},
            {"gpu_memory", std::move(memory)},
            {"gpu_memory_total", s.gpu_memory_total()}};
}

cohort::Workload workload_from_json(const char* text, const char* fn) {
    JsonFields f(text, fn, "workload_json", false);
    f.require("id");
    f.require("pid");
    f.require("memory_bytes");
    cohort::Workload w;
    w.id = *f.text("id");
    w.pid = *f.integer("pid", INT64_MIN, INT64_MAX);
    w.memory_bytes = *f.count("memory_bytes");
    if (auto gpus = f.indices("gpus")) w.gpus = std::move(*gpus);
    if (auto priority = f.integer("priority", INT32_MIN, INT32_MAX)) w.priority = static_cast<int>(*priority);
    if (auto files = f.texts("dataset_files")) w.dataset_files.assign(files->begin(), files->end());
    if (auto files = f.texts("model_files")) w.model_files.assign(files->begin(), files->end());
    if (auto access = f.text("access")) {
        if (*access == "sequential")
            w.access = cohort::AccessPattern::sequential;
        else if (*access == "random")
            w.access = cohort::AccessPattern::random;
        else
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: workload_json field \"access\" must be \"sequential\" or \"random\", got \"{}\"",
                                    fn, *access));
    }
    f.finish();
    return w;
}

}  // namespace

extern "C" {

int cohort_workload_registry_create(cohort_pid_alive_fn alive, void* user_data, cohort_workload_registry** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        cohort::WorkloadRegistryOptions options;
        if (alive != nullptr) options.alive = [alive, user_data](int64_t pid) { return alive(user_data, pid) != 0; };
        *out = new cohort_workload_registry(std::move(options));
    });
}

void cohort_workload_registry_destroy(cohort_workload_registry* registry) {
    delete registry;
}

int cohort_workload_registry_add(cohort_workload_registry* registry, const char* workload_json) {
    return guard(__func__, [&](const char* fn) {
        require(registry, fn, "registry");
        registry->impl.add(workload_from_json(workload_json, fn));
    });
}

int cohort_workload_registry_remove(cohort_workload_registry* registry, const char* id) {
    return guard(__func__, [&](const char* fn) {
        require(registry, fn, "registry");
        require(id, fn, "id");
        registry->impl.remove(id);
    });
}

int cohort_workload_registry_update(cohort_workload_registry* registry, const char* id, double io_bytes_per_second,
                                    uint64_t batch_size, double epoch_seconds) {
    return guard(__func__, [&](const char* fn) {
        require(registry, fn, "registry");
        require(id, fn, "id");
        registry->impl.update(id, {io_bytes_per_second, batch_size, epoch_seconds});
    });
}

int cohort_workload_registry_observe_monitor(cohort_workload_registry* registry, const cohort_gpu_monitor* monitor) {
    return guard(__func__, [&](const char* fn) {
        require(registry, fn, "registry");
        require(monitor, fn, "monitor");
        const auto latest = monitor->impl.latest();
        if (!latest)
            throw Error(Errc::not_found, fmt::format("{}: the monitor has no sample yet (start it or call "
                                                     "cohort_gpu_monitor_sample_now)",
                                                     fn));
        registry->impl.observe_gpu_memory(*latest);
    });
}

int cohort_workload_registry_observe_memory(cohort_workload_registry* registry, const int64_t* pids,
                                            const uint64_t* bytes, size_t count) {
    return guard(__func__, [&](const char* fn) {
        require(registry, fn, "registry");
        if (count > 0) {
            require(pids, fn, "pids");
            require(bytes, fn, "bytes");
        }
        std::map<int64_t, uint64_t> by_pid;
        for (size_t i = 0; i < count; ++i) {
            if (!by_pid.emplace(pids[i], bytes[i]).second)
                throw Error(Errc::invalid_argument,
                            fmt::format("{}: pids[{}] is {}, listed twice; give each process once", fn, i, pids[i]));
        }
        registry->impl.observe_gpu_memory(by_pid);
    });
}

int cohort_workload_registry_find(cohort_workload_registry* registry, const char* id, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(registry, fn, "registry");
        require(id, fn, "id");
        require(json, fn, "json");
        const auto state = registry->impl.find(id);
        if (!state)
            throw Error(Errc::not_found,
                        fmt::format("{}: no workload '{}' is registered (or its process ended)", fn, id));
        give_text(json::serialize(workload_json(*state)), json, length);
    });
}

int cohort_workload_registry_list(cohort_workload_registry* registry, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(registry, fn, "registry");
        require(json, fn, "json");
        json::array out;
        for (const cohort::WorkloadState& s : registry->impl.list()) out.push_back(workload_json(s));
        give_text(json::serialize(out), json, length);
    });
}

int cohort_workload_registry_prune(cohort_workload_registry* registry, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(registry, fn, "registry");
        const std::vector<std::string> dropped = registry->impl.prune();
        if (json == nullptr) return;
        json::array out;
        for (const std::string& id : dropped) out.push_back(json::string(id));
        give_text(json::serialize(out), json, length);
    });
}

int cohort_workload_registry_size(const cohort_workload_registry* registry, uint64_t* size) {
    return guard(__func__, [&](const char* fn) {
        require(registry, fn, "registry");
        require(size, fn, "size");
        *size = registry->impl.size();
    });
}

}  // extern "C"
