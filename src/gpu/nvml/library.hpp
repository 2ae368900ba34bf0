// libnvidia-ml loaded at run time: the handful of NVML types and constants
// cohort needs, declared here with NVML's ABI values so that no NVIDIA
// header is needed to build, and a table of the functions found by name.
#pragma once

#include <memory>
#include <string>

namespace cohort::nvml {

using Return = int;                        // nvmlReturn_t
using Device = struct nvmlDevice_st*;      // nvmlDevice_t
using EventSet = struct nvmlEventSet_st*;  // nvmlEventSet_t

// nvmlReturn_t values this code tells apart.
inline constexpr Return success = 0;
inline constexpr Return error_not_supported = 3;
inline constexpr Return error_insufficient_size = 7;
inline constexpr Return error_function_not_found = 13;
inline constexpr Return error_gpu_is_lost = 15;
inline constexpr Return error_argument_version_mismatch = 25;

inline constexpr unsigned temperature_gpu = 0;                    // NVML_TEMPERATURE_GPU
inline constexpr unsigned clock_sm = 1;                           // NVML_CLOCK_SM
inline constexpr unsigned clock_mem = 2;                          // NVML_CLOCK_MEM
inline constexpr unsigned ecc_corrected = 0;                      // NVML_MEMORY_ERROR_TYPE_CORRECTED
inline constexpr unsigned ecc_uncorrected = 1;                    // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
inline constexpr unsigned ecc_volatile = 0;                       // NVML_VOLATILE_ECC: since the driver loaded
inline constexpr unsigned mig_enabled = 1;                        // NVML_DEVICE_MIG_ENABLE
inline constexpr unsigned long long event_xid = 0x8;              // nvmlEventTypeXidCriticalError
inline constexpr unsigned long long value_not_available = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
inline constexpr unsigned no_instance = 0xFFFFFFFFu;              // gpuInstanceId when MIG is off

inline constexpr unsigned name_buffer = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned uuid_buffer = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

struct Memory {  // nvmlMemory_t (v1): `used` counts the driver's reservation
    unsigned long long total, free, used;
};

// nvmlMemory_v2_t (R510 and later): the reservation apart, so `used` is what
// nvidia-smi prints (on an H100 with R580 the two differ by 480 MiB).
struct MemoryV2 {
    unsigned version;
    unsigned long long total, reserved, free, used;
};
// NVML_STRUCT_VERSION(Memory, 2): the size in the low bits, 2 in the top byte.
inline constexpr unsigned memory_v2_version = static_cast<unsigned>(sizeof(MemoryV2)) | (2u << 24);

struct Utilization {  // nvmlUtilization_t
    unsigned gpu, memory;
};

// nvmlPciInfo_t as _v2/_v3 write it. The unversioned call writes the older
// layout, whose 16-byte busId sits where busIdLegacy is and which is smaller.
struct PciInfo {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
};

// What the unversioned process query writes, 16 bytes an entry.
struct ProcessInfoV1 {
    unsigned pid;
    unsigned long long usedGpuMemory;
};

// What _v2 and _v3 write, 24 bytes an entry. (One CUDA 12.2 nvml.h added a
// fifth field the driver never wrote; bindings that followed it read
// shuffled pids, so the stride here is the driver's, not that header's.)
struct ProcessInfoV2 {
    unsigned pid;
    unsigned long long usedGpuMemory;
    unsigned gpuInstanceId, computeInstanceId;
};

static_assert(sizeof(ProcessInfoV1) == 16 && sizeof(ProcessInfoV2) == 24 && sizeof(PciInfo) == 68);

// nvmlTemperature_v1_t; version = NVML_STRUCT_VERSION(Temperature, 1).
struct TemperatureV1 {
    unsigned version;
    unsigned sensorType;
    int temperature;
};
inline constexpr unsigned temperature_v1_version = sizeof(TemperatureV1) | (1u << 24);

// nvmlEventData_t as nvmlEventSetWait_v2 writes it; the unversioned wait
// stops after eventData, leaving the instance ids as the caller set them.
struct EventData {
    Device device;
    unsigned long long eventType, eventData;
    unsigned gpuInstanceId, computeInstanceId;
};

// Which layout the process query found writes.
enum class ProcessLayout { v1, v2 };

// Each pointer is null when the library lacks every name tried for it.
struct Functions {
    Return (*init)() = nullptr;
    Return (*shutdown)() = nullptr;
    const char* (*error_string)(Return) = nullptr;
    Return (*device_count)(unsigned*) = nullptr;
    Return (*handle_by_index)(unsigned, Device*) = nullptr;
    Return (*name)(Device, char*, unsigned) = nullptr;
    Return (*uuid)(Device, char*, unsigned) = nullptr;
    Return (*pci_info)(Device, PciInfo*) = nullptr;
    bool pci_info_legacy = false;  // unversioned: read busIdLegacy
    Return (*memory_info)(Device, Memory*) = nullptr;
    Return (*memory_info_v2)(Device, MemoryV2*) = nullptr;
    Return (*utilization)(Device, Utilization*) = nullptr;
    Return (*temperature_v)(Device, TemperatureV1*) = nullptr;
    Return (*temperature)(Device, unsigned, unsigned*) = nullptr;
    Return (*power_usage)(Device, unsigned*) = nullptr;  // milliwatts
    Return (*power_limit)(Device, unsigned*) = nullptr;  // milliwatts
    Return (*clock_info)(Device, unsigned, unsigned*) = nullptr;
    Return (*fan_speed)(Device, unsigned*) = nullptr;
    Return (*total_ecc_errors)(Device, unsigned, unsigned, unsigned long long*) = nullptr;
    Return (*compute_processes)(Device, unsigned*, void*) = nullptr;
    ProcessLayout process_layout = ProcessLayout::v2;
    Return (*process_name)(unsigned, char*, unsigned) = nullptr;
    Return (*mig_mode)(Device, unsigned*, unsigned*) = nullptr;
    Return (*max_mig_devices)(Device, unsigned*) = nullptr;
    Return (*mig_device_by_index)(Device, unsigned, Device*) = nullptr;
    Return (*gpu_instance_id)(Device, unsigned*) = nullptr;
    Return (*compute_instance_id)(Device, unsigned*) = nullptr;
    Return (*event_set_create)(EventSet*) = nullptr;
    Return (*register_events)(Device, unsigned long long, EventSet) = nullptr;
    Return (*event_set_wait)(EventSet, EventData*, unsigned) = nullptr;
    Return (*event_set_free)(EventSet) = nullptr;
};

// The dlopen'ed library; dlclose'd when the last copy goes. Only the symbol
// table is loaded here: NVML itself is initialised by the backend.
class Library {
public:
    // Throws Error(unavailable): "<name> not found: <dlerror>" or
    // "<name> lacks nvmlInit_v2 and nvmlInit" for a required function.
    static Library open(const std::string& name);

    const Functions& fn() const { return fn_; }
    const std::string& name() const { return name_; }
    // nvmlErrorString, or the bare code where the library has none.
    std::string error_string(Return code) const;

private:
    Library(std::string name, std::shared_ptr<void> handle) : name_(std::move(name)), handle_(std::move(handle)) {}

    std::string name_;
    std::shared_ptr<void> handle_;
    Functions fn_;
};

}  // namespace cohort::nvml
