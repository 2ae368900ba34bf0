// The NVML backend: one GpuReading per device from libnvidia-ml, loaded at
// run time. A field NVML cannot report on this GPU ("not supported") stays
// apart from one whose query failed this time ("not available"); a GPU that
// fell off the bus fails the whole read, naming the GPU.
#include "gpu/nvml/library.hpp"

#include <cohort/error.hpp>
#include <cohort/gpu_probe.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace cohort {

namespace {

using nvml::Device;
using nvml::Return;

// The meaning of the Xids an operator most often meets (NVIDIA's Xid
// catalogue), so that a sample says more than a number.
std::string_view xid_meaning(unsigned long long xid) {
    switch (xid) {
        case 13:
            return "graphics engine exception";
        case 31:
            return "GPU memory page fault";
        case 43:
            return "GPU stopped processing";
        case 45:
            return "preemptive cleanup after previous errors";
        case 48:
            return "double-bit ECC error";
        case 63:
            return "ECC page retirement or row remapping recorded";
        case 64:
            return "ECC page retirement or row remapping failed";
        case 74:
            return "NVLink error";
        case 79:
            return "GPU has fallen off the bus";
        case 92:
            return "high single-bit ECC error rate";
        case 94:
            return "contained ECC error";
        case 95:
            return "uncontained ECC error";
        case 119:
            return "GSP RPC timeout";
        case 120:
            return "GSP error";
        default:
            return {};
    }
}

std::string xid_detail(const nvml::EventData& data) {
    std::string detail(xid_meaning(data.eventData));
    if (data.gpuInstanceId != nvml::no_instance) {
        if (!detail.empty()) detail += "; ";
        detail += fmt::format("GPU instance {}, compute instance {}", data.gpuInstanceId, data.computeInstanceId);
    }
    return detail;
}

template <typename T>
Reading<T> reading(FieldState state, T value) {
    return state == FieldState::ok ? Reading<T>::of(std::move(value)) : Reading<T>{state, T{}};
}

// A C string NVML wrote into a fixed buffer, which it may not terminate.
template <std::size_t N>
std::string text(const char (&buffer)[N]) {
    return std::string(buffer, strnlen(buffer, N));
}

// The queries for one device: turns NVML's answers into field states and
// throws when the GPU is lost, naming it and its latest Xids.
class DeviceQuery {
public:
    DeviceQuery(const nvml::Library& lib, const GpuReading& gpu, const std::vector<XidEvent>& xids)
        : lib_(lib), gpu_(gpu), xids_(xids) {}

    FieldState check(Return code, std::string_view function) const {
        switch (code) {
            case nvml::success:
                return FieldState::ok;
            case nvml::error_gpu_is_lost:
                throw lost(code, function);
            // FUNCTION_NOT_FOUND: exported, but this driver cannot do it.
            case nvml::error_not_supported:
            case nvml::error_function_not_found:
                return FieldState::not_supported;
            default:
                return FieldState::not_available;
        }
    }

    // Runs a query that fills one value: not supported when the library
    // lacks the function. (The call is made here, before its value is read:
    // as arguments of one call the two would come in no fixed order.)
    template <typename Out, typename Query>
    std::pair<FieldState, Out> ask(bool present, std::string_view function, Query&& query) const {
        Out out{};
        if (!present) return {FieldState::not_supported, out};
        const FieldState state = check(query(&out), function);
        return {state, out};
    }

private:
    Error lost(Return code, std::string_view function) const {
        std::string who = fmt::format("GPU {}", gpu_.index);
        if (!gpu_.uuid.empty() || !gpu_.pci_bus_id.empty()) {
            who += " (" + gpu_.uuid;
            if (!gpu_.uuid.empty() && !gpu_.pci_bus_id.empty()) who += " at ";
            who += gpu_.pci_bus_id + ")";
        }
        std::string xids;
        for (const XidEvent& xid : xids_) {
            xids += xids.empty() ? "; Xid " : ", Xid ";
            xids += std::to_string(xid.xid);
            if (!xid.detail.empty()) xids += " (" + xid.detail + ")";
        }
        return Error(Errc::unavailable,
                     fmt::format("NVML: {} is lost: {} answered \"{}\"{}; the GPU needs a reset or the node a reboot",
                                 who, function, lib_.error_string(code), xids));
    }

    const nvml::Library& lib_;
    const GpuReading& gpu_;
    const std::vector<XidEvent>& xids_;
};

// Total, used and (given `free`) free memory of a GPU or a MIG instance.
// The _v2 call where the driver has it, so that NVML and nvidia-smi report
// the same `used`; the v1 call (reservation included) where it has not, or
// where it refuses the struct version.
void read_memory(const DeviceQuery& q, const nvml::Functions& f, Device device, Reading<uint64_t>& total,
                 Reading<uint64_t>& used, Reading<uint64_t>* free) {
    if (f.memory_info_v2 != nullptr) {
        nvml::MemoryV2 m{};
        m.version = nvml::memory_v2_version;
        const Return r = f.memory_info_v2(device, &m);
        if (r != nvml::error_argument_version_mismatch && r != nvml::error_not_supported &&
            r != nvml::error_function_not_found) {
            const FieldState s = q.check(r, "nvmlDeviceGetMemoryInfo_v2");
            total = reading<uint64_t>(s, m.total);
            used = reading<uint64_t>(s, m.used);
            if (free != nullptr) *free = reading<uint64_t>(s, m.free);
            return;
        }
    }
    nvml::Memory m{};
    const FieldState s = q.check(f.memory_info(device, &m), "nvmlDeviceGetMemoryInfo");
    total = reading<uint64_t>(s, m.total);
    used = reading<uint64_t>(s, m.used);
    if (free != nullptr) *free = reading<uint64_t>(s, m.free);
}

class NvmlBackend final : public GpuBackend {
public:
    // `lib` has been initialised (nvmlInit succeeded); this backend shuts it down.
    NvmlBackend(nvml::Library lib, ProbeOptions options) : lib_(std::move(lib)), options_(std::move(options)) {
        const nvml::Functions& f = lib_.fn();
        // Xids come through an event set; without one a sample has no Xids.
        if (f.event_set_create != nullptr && f.register_events != nullptr && f.event_set_wait != nullptr &&
            f.event_set_create(&events_) != nvml::success)
            events_ = nullptr;
        // Watch from the start: NVML keeps no Xids from before registration.
        unsigned count = 0;
        std::vector<Device> devices;
        if (f.device_count(&count) == nvml::success) {
            for (unsigned i = 0; i < count; ++i) {
                Device device = nullptr;
                if (f.handle_by_index(i, &device) == nvml::success) devices.push_back(device);
            }
        }
        watch_xids(devices);
    }

    NvmlBackend(const NvmlBackend&) = delete;
    NvmlBackend& operator=(const NvmlBackend&) = delete;

    // NVML's init is reference-counted: every backend shuts down what it
    // started, before lib_ (destroyed after this body) dlcloses the library.
    ~NvmlBackend() override {
        const nvml::Functions& f = lib_.fn();
        if (events_ != nullptr && f.event_set_free != nullptr) f.event_set_free(events_);
        if (f.shutdown != nullptr) f.shutdown();
    }

    std::string name() const override { return "nvml"; }

    // NVML calls take no timeout; GpuProbe bounds this call from outside.
    // Not reentrant: the probe runs one read at a time.
    std::vector<GpuReading> read(double /*deadline_seconds*/) override {
        const nvml::Functions& f = lib_.fn();
        unsigned count = 0;
        if (Return r = f.device_count(&count); r != nvml::success)
            throw Error(Errc::unavailable, fmt::format("NVML cannot count GPUs: {}", lib_.error_string(r)));

        static const std::vector<XidEvent> no_xids;
        std::vector<Device> devices(count, nullptr);
        std::vector<GpuReading> gpus(count);
        for (unsigned i = 0; i < count; ++i) {
            gpus[i].index = i;
            Return r = f.handle_by_index(i, &devices[i]);
            // A GPU this process may not open (a container's cgroup) keeps
            // its index with every field not available.
            if (r != nvml::success) devices[i] = nullptr;
            if (r == nvml::error_gpu_is_lost)
                DeviceQuery(lib_, gpus[i], no_xids).check(r, "nvmlDeviceGetHandleByIndex");
        }
        watch_xids(devices);
        drain_xids();

        std::vector<std::vector<XidEvent>> xids(count);
        for (const auto& [device, xid] : pending_) {
            auto at = std::find(devices.begin(), devices.end(), device);
            if (at != devices.end() && device != nullptr) xids[at - devices.begin()].push_back(xid);
        }
        for (unsigned i = 0; i < count; ++i) {
            if (devices[i] != nullptr) read_device(devices[i], gpus[i], xids[i]);
        }
        // Only a read that succeeded hands the Xids on: after a throw they
        // wait for the next sample.
        for (unsigned i = 0; i < count; ++i) gpus[i].xid_events = std::move(xids[i]);
        pending_.clear();
        return gpus;
    }

private:
    double now() const {
        if (options_.clock) return options_.clock();
        return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    }

    void watch_xids(const std::vector<Device>& devices) {
        if (events_ == nullptr) return;
        for (Device device : devices) {
            if (device == nullptr || std::find(watched_.begin(), watched_.end(), device) != watched_.end()) continue;
            // Consumer GPUs answer NOT_SUPPORTED; they simply report no Xids.
            lib_.fn().register_events(device, nvml::event_xid, events_);
            watched_.push_back(device);
        }
    }

    void drain_xids() {
        if (events_ == nullptr) return;
        // Bounded whatever the library does; a timeout of 0 only polls.
        for (int i = 0; i < 1024; ++i) {
            nvml::EventData data{};
            data.gpuInstanceId = data.computeInstanceId = nvml::no_instance;
            if (lib_.fn().event_set_wait(events_, &data, 0) != nvml::success) break;
            if ((data.eventType & nvml::event_xid) == 0) continue;
            pending_.push_back({data.device, XidEvent{data.eventData, now(), xid_detail(data)}});
            // A GPU that keeps failing every read must not grow this forever.
            if (pending_.size() > max_pending_xids) pending_.pop_front();
        }
    }

    void read_device(Device device, GpuReading& g, const std::vector<XidEvent>& xids) const;
    Reading<double> temperature(const DeviceQuery& q, Device device) const;
    void read_processes(const DeviceQuery& q, Device device, GpuReading& g) const;
    void read_mig(const DeviceQuery& q, Device device, GpuReading& g) const;

    static constexpr std::size_t max_pending_xids = 256;

    nvml::Library lib_;
    ProbeOptions options_;
    nvml::EventSet events_ = nullptr;
    std::vector<Device> watched_;
    std::deque<std::pair<Device, XidEvent>> pending_;
};

void NvmlBackend::read_device(Device device, GpuReading& g, const std::vector<XidEvent>& xids) const {
    const nvml::Functions& f = lib_.fn();
    const DeviceQuery q(lib_, g, xids);

    char buffer[nvml::name_buffer] = {};
    if (f.uuid != nullptr && q.check(f.uuid(device, buffer, sizeof buffer), "nvmlDeviceGetUUID") == FieldState::ok)
        g.uuid = text(buffer);
    if (f.name != nullptr && q.check(f.name(device, buffer, sizeof buffer), "nvmlDeviceGetName") == FieldState::ok)
        g.name = text(buffer);
    if (f.pci_info != nullptr) {
        nvml::PciInfo pci{};
        if (q.check(f.pci_info(device, &pci), "nvmlDeviceGetPciInfo") == FieldState::ok)
            g.pci_bus_id = f.pci_info_legacy ? text(pci.busIdLegacy) : text(pci.busId);
    }

    if (f.memory_info == nullptr) {
        g.memory_total_bytes = g.memory_used_bytes = g.memory_free_bytes = Reading<uint64_t>::unsupported();
    } else {
        read_memory(q, f, device, g.memory_total_bytes, g.memory_used_bytes, &g.memory_free_bytes);
    }

    if (f.utilization == nullptr) {
        g.gpu_utilization_percent = g.memory_busy_percent = Reading<double>::unsupported();
    } else {
        // Memory busy is the memory controller's time share, not memory used.
        nvml::Utilization u{};
        const FieldState s = q.check(f.utilization(device, &u), "nvmlDeviceGetUtilizationRates");
        g.gpu_utilization_percent = reading<double>(s, u.gpu);
        g.memory_busy_percent = reading<double>(s, u.memory);
    }

    g.temperature_celsius = temperature(q, device);

    // NVML reports power in milliwatts.
    auto [draw_state, draw_mw] = q.ask<unsigned>(f.power_usage != nullptr, "nvmlDeviceGetPowerUsage",
                                                 [&](unsigned* mw) { return f.power_usage(device, mw); });
    g.power_draw_watts = reading(draw_state, draw_mw / 1000.0);
    auto [limit_state, limit_mw] = q.ask<unsigned>(f.power_limit != nullptr, "nvmlDeviceGetEnforcedPowerLimit",
                                                   [&](unsigned* mw) { return f.power_limit(device, mw); });
    g.power_limit_watts = reading(limit_state, limit_mw / 1000.0);

    auto clock = [&](unsigned type) {
        auto [state, mhz] = q.ask<unsigned>(f.clock_info != nullptr, "nvmlDeviceGetClockInfo",
                                            [&](unsigned* out) { return f.clock_info(device, type, out); });
        return reading<uint32_t>(state, mhz);
    };
    g.sm_clock_mhz = clock(nvml::clock_sm);
    g.memory_clock_mhz = clock(nvml::clock_mem);

    auto [fan_state, fan] = q.ask<unsigned>(f.fan_speed != nullptr, "nvmlDeviceGetFanSpeed",
                                            [&](unsigned* out) { return f.fan_speed(device, out); });
    g.fan_percent = reading<double>(fan_state, fan);

    auto ecc = [&](unsigned type) {
        auto [state, errors] = q.ask<unsigned long long>(
            f.total_ecc_errors != nullptr, "nvmlDeviceGetTotalEccErrors",
            [&](unsigned long long* out) { return f.total_ecc_errors(device, type, nvml::ecc_volatile, out); });
        return reading<uint64_t>(state, errors);
    };
    g.ecc_corrected_errors = ecc(nvml::ecc_corrected);
    g.ecc_uncorrected_errors = ecc(nvml::ecc_uncorrected);

    read_processes(q, device, g);
    if (f.mig_mode == nullptr) {
        g.mig_enabled = Reading<bool>::unsupported();
    } else {
        read_mig(q, device, g);
    }
}

Reading<double> NvmlBackend::temperature(const DeviceQuery& q, Device device) const {
    const nvml::Functions& f = lib_.fn();
    if (f.temperature_v != nullptr) {
        nvml::TemperatureV1 t{nvml::temperature_v1_version, nvml::temperature_gpu, 0};
        const Return r = f.temperature_v(device, &t);
        // A library that has the call but not this struct version can still
        // answer the old way.
        const bool retry = (r == nvml::error_argument_version_mismatch || r == nvml::error_function_not_found) &&
                           f.temperature != nullptr;
        if (!retry) return reading<double>(q.check(r, "nvmlDeviceGetTemperatureV"), t.temperature);
    }
    auto [state, celsius] = q.ask<unsigned>(f.temperature != nullptr, "nvmlDeviceGetTemperature", [&](unsigned* out) {
        return f.temperature(device, nvml::temperature_gpu, out);
    });
    return reading<double>(state, celsius);
}

void NvmlBackend::read_processes(const DeviceQuery& q, Device device, GpuReading& g) const {
    const nvml::Functions& f = lib_.fn();
    if (f.compute_processes == nullptr) {
        g.processes_state = FieldState::not_supported;
        return;
    }
    const bool v1 = f.process_layout == nvml::ProcessLayout::v1;
    const std::size_t stride = v1 ? sizeof(nvml::ProcessInfoV1) : sizeof(nvml::ProcessInfoV2);
    // Sized in 24-byte entries (aligned for either layout), read by stride.
    std::vector<nvml::ProcessInfoV2> buffer;
    unsigned count = 0;
    Return r = f.compute_processes(device, &count, nullptr);
    // Processes can start between asking for the count and the list.
    for (int attempt = 0; r == nvml::error_insufficient_size && attempt < 4; ++attempt) {
        const unsigned capacity = count + 8;
        buffer.assign(capacity, nvml::ProcessInfoV2{});
        count = capacity;
        r = f.compute_processes(device, &count, buffer.data());
        count = std::min(count, capacity);
    }
    g.processes_state = q.check(r, "nvmlDeviceGetComputeRunningProcesses");
    if (g.processes_state != FieldState::ok) return;

    const auto* bytes = reinterpret_cast<const unsigned char*>(buffer.data());
    for (unsigned i = 0; i < count && !buffer.empty(); ++i) {
        nvml::ProcessInfoV2 info{};
        std::memcpy(&info, bytes + i * stride, stride);  // v1: the first two fields
        GpuProcess p;
        p.pid = info.pid;
        // Windows (WDDM) and some containers cannot attribute memory.
        p.memory_bytes = info.usedGpuMemory == nvml::value_not_available
                             ? Reading<uint64_t>{FieldState::not_available, 0}
                             : Reading<uint64_t>::of(info.usedGpuMemory);
        char name[256] = {};
        // The process may have exited since: then it has no name.
        if (f.process_name != nullptr && f.process_name(info.pid, name, sizeof name) == nvml::success)
            p.name = text(name);
        g.processes.push_back(std::move(p));
    }
}

void NvmlBackend::read_mig(const DeviceQuery& q, Device device, GpuReading& g) const {
    const nvml::Functions& f = lib_.fn();
    unsigned current = 0, pending = 0;
    const FieldState s = q.check(f.mig_mode(device, &current, &pending), "nvmlDeviceGetMigMode");
    g.mig_enabled = reading(s, current == nvml::mig_enabled);
    if (s != FieldState::ok || current != nvml::mig_enabled || f.max_mig_devices == nullptr ||
        f.mig_device_by_index == nullptr)
        return;
    unsigned slots = 0;
    if (q.check(f.max_mig_devices(device, &slots), "nvmlDeviceGetMaxMigDeviceCount") != FieldState::ok) return;
    for (unsigned i = 0; i < slots; ++i) {
        Device mig = nullptr;
        // Slots without an instance answer NOT_FOUND.
        if (q.check(f.mig_device_by_index(device, i, &mig), "nvmlDeviceGetMigDeviceHandleByIndex") != FieldState::ok)
            continue;
        MigInstance m;
        unsigned id = 0;
        if (f.gpu_instance_id != nullptr && f.gpu_instance_id(mig, &id) == nvml::success) m.gpu_instance = id;
        if (f.compute_instance_id != nullptr && f.compute_instance_id(mig, &id) == nvml::success)
            m.compute_instance = id;
        char uuid[nvml::uuid_buffer] = {};
        if (f.uuid != nullptr && q.check(f.uuid(mig, uuid, sizeof uuid), "nvmlDeviceGetUUID") == FieldState::ok)
            m.uuid = text(uuid);
        if (f.memory_info == nullptr) {
            m.memory_total_bytes = m.memory_used_bytes = Reading<uint64_t>::unsupported();
        } else {
            read_memory(q, f, mig, m.memory_total_bytes, m.memory_used_bytes, nullptr);
        }
        g.mig_instances.push_back(std::move(m));
    }
}

}  // namespace

std::unique_ptr<GpuBackend> open_nvml_backend(const ProbeOptions& options) {
    nvml::Library lib = nvml::Library::open(options.nvml_library);
    const nvml::Functions& f = lib.fn();
    if (Return r = f.init(); r != nvml::success)
        throw Error(Errc::unavailable, fmt::format("NVML init failed: {}", lib.error_string(r)));
    // A driver that cannot even count its GPUs is no backend to choose.
    unsigned count = 0;
    if (Return r = f.device_count(&count); r != nvml::success) {
        std::string why = lib.error_string(r);
        if (f.shutdown != nullptr) f.shutdown();
        throw Error(Errc::unavailable, fmt::format("NVML cannot count GPUs: {}", why));
    }
    return std::make_unique<NvmlBackend>(std::move(lib), options);
}

}  // namespace cohort
