// Finding NVML's functions by name. Newer drivers export versioned names
// (nvmlInit_v2, ..._v3) next to the old ones, which are kept for binaries
// built against old headers and may behave differently (nvmlInit skips GPUs
// it cannot reach; the old process list has a shorter entry), so each
// lookup tries the newest name first and records which one it got.
#include "gpu/nvml/library.hpp"

#include <cohort/error.hpp>

#include <dlfcn.h>

#include <initializer_list>

#include <fmt/format.h>

namespace cohort::nvml {

namespace {

// The first of `names` the library exports, stored in `slot`; returns its
// position in `names`, or -1 (slot stays null) when it has none of them.
template <typename F>
int bind(void* handle, F& slot, std::initializer_list<const char*> names) {
    int position = 0;
    for (const char* name : names) {
        if (void* symbol = dlsym(handle, name)) {
            // POSIX guarantees a dlsym result converts to a function pointer.
            slot = reinterpret_cast<F>(symbol);
            return position;
        }
        ++position;
    }
    return -1;
}

std::string joined(std::initializer_list<const char*> names) {
    std::string out;
    for (const char* name : names) {
        if (!out.empty()) out += " and ";
        out += name;
    }
    return out;
}

}  // namespace

Library Library::open(const std::string& name) {
    // RTLD_NOW: a library with unresolved symbols fails here, with a message,
    // rather than aborting the process at the first call. RTLD_LOCAL keeps
    // its symbols from interposing on anything else in the program.
    void* raw = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (raw == nullptr) {
        const char* why = dlerror();
        throw Error(Errc::unavailable, fmt::format("{} not found: {}", name, why != nullptr ? why : "dlopen failed"));
    }
    Library lib(name, std::shared_ptr<void>(raw, [](void* h) { dlclose(h); }));
    Functions& f = lib.fn_;

    // Without these three nothing can be read: refuse the library.
    auto required = [&](auto& slot, std::initializer_list<const char*> names) {
        if (bind(raw, slot, names) < 0) throw Error(Errc::unavailable, fmt::format("{} lacks {}", name, joined(names)));
    };
    required(f.init, {"nvmlInit_v2", "nvmlInit"});
    required(f.device_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
    required(f.handle_by_index, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});

    // Everything else is optional: a missing function makes its fields
    // "not supported", as an old driver would answer.
    bind(raw, f.shutdown, {"nvmlShutdown"});
    bind(raw, f.error_string, {"nvmlErrorString"});
    bind(raw, f.name, {"nvmlDeviceGetName"});
    bind(raw, f.uuid, {"nvmlDeviceGetUUID"});
    f.pci_info_legacy =
        bind(raw, f.pci_info, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"}) == 2;
    bind(raw, f.memory_info, {"nvmlDeviceGetMemoryInfo"});
    bind(raw, f.memory_info_v2, {"nvmlDeviceGetMemoryInfo_v2"});
    bind(raw, f.utilization, {"nvmlDeviceGetUtilizationRates"});
    bind(raw, f.temperature_v, {"nvmlDeviceGetTemperatureV"});
    bind(raw, f.temperature, {"nvmlDeviceGetTemperature"});
    bind(raw, f.power_usage, {"nvmlDeviceGetPowerUsage"});
    bind(raw, f.power_limit, {"nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"});
    bind(raw, f.clock_info, {"nvmlDeviceGetClockInfo"});
    bind(raw, f.fan_speed, {"nvmlDeviceGetFanSpeed"});
    bind(raw, f.total_ecc_errors, {"nvmlDeviceGetTotalEccErrors"});
    const int processes = bind(raw, f.compute_processes,
                               {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
                                "nvmlDeviceGetComputeRunningProcesses"});
    f.process_layout = processes == 2 ? ProcessLayout::v1 : ProcessLayout::v2;
    bind(raw, f.process_name, {"nvmlSystemGetProcessName"});
    bind(raw, f.mig_mode, {"nvmlDeviceGetMigMode"});
    bind(raw, f.max_mig_devices, {"nvmlDeviceGetMaxMigDeviceCount"});
    bind(raw, f.mig_device_by_index, {"nvmlDeviceGetMigDeviceHandleByIndex"});
    bind(raw, f.gpu_instance_id, {"nvmlDeviceGetGpuInstanceId"});
    bind(raw, f.compute_instance_id, {"nvmlDeviceGetComputeInstanceId"});
    bind(raw, f.event_set_create, {"nvmlEventSetCreate"});
    bind(raw, f.register_events, {"nvmlDeviceRegisterEvents"});
    bind(raw, f.event_set_wait, {"nvmlEventSetWait_v2", "nvmlEventSetWait"});
    bind(raw, f.event_set_free, {"nvmlEventSetFree"});
    return lib;
}

std::string Library::error_string(Return code) const {
    if (fn_.error_string != nullptr) {
        if (const char* text = fn_.error_string(code)) return text;
    }
    return fmt::format("NVML error {}", code);
}

}  // namespace cohort::nvml
