// The NVML backend against fake libnvidia-ml builds (tests/fixtures/fake_nvml):
// exact readings and units, "not supported" kept apart from zero, the
// fallbacks to old entry points, and every way opening or reading can fail.
#include "support.hpp"

#include <cohort/gpu_probe.hpp>

#include <gmock/gmock.h>

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace cohort {
namespace {

using test::error_message;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t gib = 1024ULL * 1024 * 1024;
constexpr uint64_t mib = 1024ULL * 1024;
constexpr double sample_time = 1234.5;

ProbeOptions options_for(const char* library) {
    ProbeOptions options;
    options.nvml_library = library;
    options.clock = [] { return sample_time; };
    return options;
}

// Sets an environment variable the fake reads, for one test.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
    ~ScopedEnv() { unsetenv(name_); }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
};

template <typename T>
void expect_value(const Reading<T>& reading, T value, const char* field) {
    EXPECT_EQ(reading.state, FieldState::ok) << field;
    EXPECT_EQ(reading.value, value) << field;
}

template <typename T>
void expect_state(const Reading<T>& reading, FieldState state, const char* field) {
    EXPECT_EQ(reading.state, state) << field << ": " << to_string(reading.state);
}

TEST(GpuNvml, MissingLibraryIsNotFound) {
    const std::string message =
        error_message(Errc::unavailable, [] { open_nvml_backend(options_for("/nonexistent/libnvidia-ml.so.1")); });
    EXPECT_THAT(message, StartsWith("/nonexistent/libnvidia-ml.so.1 not found: "));
    EXPECT_THAT(message, HasSubstr("No such file"));
}

TEST(GpuNvml, DefaultLibraryIsNamedWhenAbsent) {
    // On a machine with a driver this opens the real NVML, which is fine too.
    try {
        auto backend = open_nvml_backend(ProbeOptions{});
        EXPECT_EQ(backend->name(), "nvml");
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::unavailable);
        EXPECT_THAT(e.what(), StartsWith("libnvidia-ml.so.1 not found: ")) << "or a driver that failed to start";
    }
}

TEST(GpuNvml, LibraryThatIsNotNvmlIsRefused) {
    EXPECT_EQ(error_message(Errc::unavailable, [] { open_nvml_backend(options_for("libm.so.6")); }),
              "libm.so.6 lacks nvmlInit_v2 and nvmlInit");
}

TEST(GpuNvml, LibraryWithoutDeviceCountIsRefused) {
    EXPECT_EQ(error_message(Errc::unavailable, [] { open_nvml_backend(options_for(COHORT_FAKE_NVML_NOCOUNT)); }),
              std::string(COHORT_FAKE_NVML_NOCOUNT) + " lacks nvmlDeviceGetCount_v2 and nvmlDeviceGetCount");
}

TEST(GpuNvml, InitFailureGivesNvmlsReason) {
    ScopedEnv fail("FAKE_NVML_INIT_FAIL", "1");
    EXPECT_EQ(error_message(Errc::unavailable, [] { open_nvml_backend(options_for(COHORT_FAKE_NVML)); }),
              "NVML init failed: Driver Not Loaded");
}

TEST(GpuNvml, ReadsIdentityMemoryAndUnits) {
    auto backend = open_nvml_backend(options_for(COHORT_FAKE_NVML));
    EXPECT_EQ(backend->name(), "nvml");
    const std::vector<GpuReading> gpus = backend->read(2.0);
    ASSERT_EQ(gpus.size(), 2u);

    const GpuReading& h100 = gpus[0];
    EXPECT_EQ(h100.index, 0u);
    EXPECT_EQ(h100.uuid, "GPU-00000000-1111-2222-3333-444444444444");
    EXPECT_EQ(h100.name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(h100.pci_bus_id, "00000000:18:00.0");
    expect_value<uint64_t>(h100.memory_total_bytes, 85520809984ULL, "memory total");
    expect_value<uint64_t>(h100.memory_used_bytes, 10 * gib, "memory used");
    // The _v2 call: used and free leave out the driver's 480 MiB, as nvidia-smi does.
    expect_value<uint64_t>(h100.memory_free_bytes, 85520809984ULL - 10 * gib - 480 * mib, "memory free");
    expect_value(h100.gpu_utilization_percent, 75.0, "gpu utilization");
    expect_value(h100.memory_busy_percent, 40.0, "memory busy");
    expect_value(h100.temperature_celsius, 61.0, "temperature (nvmlDeviceGetTemperatureV)");
    // NVML answers milliwatts: 312456 mW and 700000 mW.
    expect_value(h100.power_draw_watts, 312.456, "power draw");
    expect_value(h100.power_limit_watts, 700.0, "power limit");
    expect_value<uint32_t>(h100.sm_clock_mhz, 1980, "SM clock");
    expect_value<uint32_t>(h100.memory_clock_mhz, 2619, "memory clock");
    expect_value(h100.mig_enabled, false, "MIG mode");
    EXPECT_TRUE(h100.mig_instances.empty());

    const GpuReading& a100 = gpus[1];
    EXPECT_EQ(a100.index, 1u);
    EXPECT_EQ(a100.uuid, "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee");
    EXPECT_EQ(a100.pci_bus_id, "00000000:3B:00.0");
    expect_value<uint64_t>(a100.memory_total_bytes, 40 * gib, "memory total");
    expect_value(a100.temperature_celsius, 44.0, "temperature");
    expect_value(a100.power_draw_watts, 95.5, "power draw");
    expect_value(a100.power_limit_watts, 400.0, "power limit");
    expect_value<uint32_t>(a100.sm_clock_mhz, 1410, "SM clock");
    expect_value(a100.fan_percent, 30.0, "fan");
    // The volatile counters (since the driver loaded), not the lifetime ones.
    expect_value<uint64_t>(a100.ecc_corrected_errors, 2, "ECC corrected");
    expect_value<uint64_t>(a100.ecc_uncorrected_errors, 0, "ECC uncorrected");
}

// A driver that refuses the _v2 memory struct: the v1 call, whose `used`
// includes the reservation, still gives every field.
TEST(GpuNvml, MemoryFallsBackToV1WhenV2IsRefused) {
    ScopedEnv v1("FAKE_NVML_MEMORY_V1", "1");
    auto backend = open_nvml_backend(options_for(COHORT_FAKE_NVML));
    const auto gpus = backend->read(5.0);
    ASSERT_EQ(gpus.size(), 2u);
    expect_value<uint64_t>(gpus[0].memory_total_bytes, 85520809984ULL, "memory total");
    expect_value<uint64_t>(gpus[0].memory_used_bytes, 10 * gib + 480 * mib, "memory used (v1)");
    expect_value<uint64_t>(gpus[0].memory_free_bytes, 85520809984ULL - 10 * gib - 480 * mib, "memory free (v1)");
    expect_value<uint64_t>(gpus[1].memory_used_bytes, 3 * gib, "A100 memory used (v1)");
}

TEST(GpuNvml, NotSupportedIsNotZero) {
    auto backend = open_nvml_backend(options_for(COHORT_FAKE_NVML));
    const std::vector<GpuReading> gpus = backend->read(2.0);
    ASSERT_EQ(gpus.size(), 2u);
    expect_state(gpus[0].fan_percent, FieldState::not_supported, "H100 fan");
    expect_state(gpus[0].ecc_corrected_errors, FieldState::not_supported, "H100 ECC corrected");
    expect_state(gpus[0].ecc_uncorrected_errors, FieldState::not_supported, "H100 ECC uncorrected");
    // MIG GPUs cannot report whole-GPU utilisation.
    expect_state(gpus[1].gpu_utilization_percent, FieldState::not_supported, "A100 utilization");
    expect_state(gpus[1].memory_busy_percent, FieldState::not_supported, "A100 memory busy");
    EXPECT_FALSE(gpus[1].gpu_utilization_percent.get().has_value());
}

TEST(GpuNvml, ProcessesWithTheirMemory) {
    auto backend = open_nvml_backend(options_for(COHORT_FAKE_NVML));
    const std::vector<GpuReading> gpus = backend->read(2.0);
    ASSERT_EQ(gpus.size(), 2u);

    EXPECT_EQ(gpus[0].processes_state, FieldState::ok);
    ASSERT_EQ(gpus[0].processes.size(), 2u);
    EXPECT_EQ(gpus[0].processes[0].pid, 4242u);
    EXPECT_EQ(gpus[0].processes[0].name, "python3");
    expect_value<uint64_t>(gpus[0].processes[0].memory_bytes, 8 * gib, "process memory");
    // NVML_VALUE_NOT_AVAILABLE, and a process that exited before it was named.
    EXPECT_EQ(gpus[0].processes[1].pid, 4243u);
    EXPECT_EQ(gpus[0].processes[1].name, "");
    expect_state(gpus[0].processes[1].memory_bytes, FieldState::not_available, "unattributed memory");

    EXPECT_EQ(gpus[1].processes_state, FieldState::ok);
    ASSERT_EQ(gpus[1].processes.size(), 1u);
    EXPECT_EQ(gpus[1].processes[0].pid, 5151u);
    EXPECT_EQ(gpus[1].processes[0].name, "trainer");
    expect_value<uint64_t>(gpus[1].processes[0].memory_bytes, 1 * gib, "process memory");
}

TEST(GpuNvml, MigInstancesWithTheirMemory) {
    auto backend = open_nvml_backend(options_for(COHORT_FAKE_NVML));
    const std::vector<GpuReading> gpus = backend->read(2.0);
    ASSERT_EQ(gpus.size(), 2u);
    const GpuReading& a100 = gpus[1];
    expect_value(a100.mig_enabled, true, "MIG mode");
    // Slots 0 and 3 hold instances; the empty slots between are skipped.
    ASSERT_EQ(a100.mig_instances.size(), 2u);
    EXPECT_EQ(a100.mig_instances[0].gpu_instance, 1u);
    EXPECT_EQ(a100.mig_instances[0].compute_instance, 0u);
    EXPECT_EQ(a100.mig_instances[0].uuid, "MIG-11111111-2222-3333-4444-555555555555");
    expect_value<uint64_t>(a100.mig_instances[0].memory_total_bytes, 10 * gib, "MIG 0 total");
    expect_value<uint64_t>(a100.mig_instances[0].memory_used_bytes, 1 * gib, "MIG 0 used");
    EXPECT_EQ(a100.mig_instances[1].gpu_instance, 5u);
    EXPECT_EQ(a100.mig_instances[1].uuid, "MIG-66666666-7777-8888-9999-000000000000");
    expect_value<uint64_t>(a100.mig_instances[1].memory_total_bytes, 20 * gib, "MIG 1 total");
    expect_value<uint64_t>(a100.mig_instances[1].memory_used_bytes, 2 * gib, "MIG 1 used");
}

TEST(GpuNvml, XidEventsAreReportedOnce) {
    auto backend = open_nvml_backend(options_for(COHORT_FAKE_NVML));
    std::vector<GpuReading> gpus = backend->read(2.0);
    ASSERT_EQ(gpus.size(), 2u);
    ASSERT_EQ(gpus[0].xid_events.size(), 1u);
    EXPECT_EQ(gpus[0].xid_events[0].xid, 31u);
    EXPECT_EQ(gpus[0].xid_events[0].time, sample_time);
    EXPECT_EQ(gpus[0].xid_events[0].detail, "GPU memory page fault");
    ASSERT_EQ(gpus[1].xid_events.size(), 1u);
    EXPECT_EQ(gpus[1].xid_events[0].xid, 94u);
    EXPECT_EQ(gpus[1].xid_events[0].detail, "contained ECC error; GPU instance 1, compute instance 0");

    gpus = backend->read(2.0);
    ASSERT_EQ(gpus.size(), 2u);
    EXPECT_TRUE(gpus[0].xid_events.empty());
    EXPECT_TRUE(gpus[1].xid_events.empty());
}

TEST(GpuNvml, OldLibraryWorksThroughTheUnversionedNames) {
    auto backend = open_nvml_backend(options_for(COHORT_FAKE_NVML_OLD));
    const std::vector<GpuReading> gpus = backend->read(2.0);
    ASSERT_EQ(gpus.size(), 1u);
    const GpuReading& k80 = gpus[0];
    EXPECT_EQ(k80.name, "Tesla K80");
    EXPECT_EQ(k80.uuid, "GPU-12345678-9abc-def0-1234-56789abcdef0");
    EXPECT_EQ(k80.pci_bus_id, "0000:05:00.0");
    expect_value<uint64_t>(k80.memory_total_bytes, 12 * gib, "memory total");
    expect_value<uint64_t>(k80.memory_used_bytes, 5 * gib, "memory used");
    expect_value(k80.temperature_celsius, 52.0, "temperature (nvmlDeviceGetTemperature)");

    // 16-byte entries: the second process is where the old layout puts it.
    EXPECT_EQ(k80.processes_state, FieldState::ok);
    ASSERT_EQ(k80.processes.size(), 2u);
    EXPECT_EQ(k80.processes[0].pid, 1001u);
    expect_value<uint64_t>(k80.processes[0].memory_bytes, 3 * gib, "process 0 memory");
    EXPECT_EQ(k80.processes[1].pid, 1002u);
    expect_value<uint64_t>(k80.processes[1].memory_bytes, 2 * gib, "process 1 memory");

    // What the library does not export, this GPU does not support.
    expect_state(k80.gpu_utilization_percent, FieldState::not_supported, "utilization");
    expect_state(k80.power_draw_watts, FieldState::not_supported, "power draw");
    expect_state(k80.power_limit_watts, FieldState::not_supported, "power limit");
    expect_state(k80.sm_clock_mhz, FieldState::not_supported, "SM clock");
    expect_state(k80.fan_percent, FieldState::not_supported, "fan");
    expect_state(k80.ecc_corrected_errors, FieldState::not_supported, "ECC");
    expect_state(k80.mig_enabled, FieldState::not_supported, "MIG mode");

    // The pre-MIG event layout carries no instance ids.
    ASSERT_EQ(k80.xid_events.size(), 1u);
    EXPECT_EQ(k80.xid_events[0].xid, 48u);
    EXPECT_EQ(k80.xid_events[0].detail, "double-bit ECC error");
}

TEST(GpuNvml, LostGpuFailsTheReadNamingIt) {
    auto backend = open_nvml_backend(options_for(COHORT_FAKE_NVML));
    {
        ScopedEnv lost("FAKE_NVML_GPU_LOST", "1");
        const std::string message = error_message(Errc::unavailable, [&] { backend->read(2.0); });
        EXPECT_THAT(message, StartsWith("NVML: GPU 1 (GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee at 00000000:3B:00.0) "
                                        "is lost: nvmlDeviceGetMemoryInfo_v2 answered \"GPU is lost\""));
        EXPECT_THAT(message, HasSubstr("Xid 79 (GPU has fallen off the bus)"));
        EXPECT_THAT(message, HasSubstr("reset"));
    }
    // The Xids of the failed read come with the next one that succeeds.
    const std::vector<GpuReading> gpus = backend->read(2.0);
    ASSERT_EQ(gpus.size(), 2u);
    ASSERT_EQ(gpus[0].xid_events.size(), 1u);
    EXPECT_EQ(gpus[0].xid_events[0].xid, 31u);
    ASSERT_EQ(gpus[1].xid_events.size(), 2u);
    EXPECT_EQ(gpus[1].xid_events[0].xid, 94u);
    EXPECT_EQ(gpus[1].xid_events[1].xid, 79u);
}

TEST(GpuNvml, EachBackendShutsDownWhatItStarted) {
    // Holding the fake open here keeps its counters alive across the
    // backends' dlclose.
    std::unique_ptr<void, int (*)(void*)> fake(dlopen(COHORT_FAKE_NVML, RTLD_NOW | RTLD_LOCAL), dlclose);
    ASSERT_NE(fake, nullptr) << dlerror();
    auto init_count = reinterpret_cast<int (*)()>(dlsym(fake.get(), "fake_nvml_init_count"));
    auto event_sets = reinterpret_cast<int (*)()>(dlsym(fake.get(), "fake_nvml_event_sets"));
    ASSERT_NE(init_count, nullptr);
    ASSERT_NE(event_sets, nullptr);
    ASSERT_EQ(init_count(), 0);

    auto first = open_nvml_backend(options_for(COHORT_FAKE_NVML));
    auto second = open_nvml_backend(options_for(COHORT_FAKE_NVML));
    EXPECT_EQ(init_count(), 2);
    EXPECT_EQ(event_sets(), 2);
    first.reset();
    EXPECT_EQ(init_count(), 1);
    EXPECT_EQ(event_sets(), 1);
    EXPECT_EQ(second->read(2.0).size(), 2u);
    second.reset();
    EXPECT_EQ(init_count(), 0);
    EXPECT_EQ(event_sets(), 0);
}

}  // namespace
}  // namespace cohort
