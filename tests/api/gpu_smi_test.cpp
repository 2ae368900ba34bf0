// The nvidia-smi backend through the public API, driven by fake nvidia-smi
// programs (tests/fixtures/fake_smi) that print the recorded variants in
// tests/data/gpu/smi, fail like a machine without a driver, or hang.
#include <cohort/gpu_probe.hpp>

#include "support.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <signal.h>
#include <unistd.h>

namespace cohort {
namespace {

constexpr uint64_t MiB = uint64_t{1} << 20;

std::string fake_smi(const std::string& name) {
    return (test::data_path("..") / "fixtures" / "fake_smi" / name).lexically_normal().string();
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Sets the fake's environment for one test and clears it after.
class SmiBackendTest : public ::testing::Test {
protected:
    void SetUp() override {
        ::setenv("FAKE_SMI_DIR", test::data_path("gpu/smi").c_str(), 1);
        log_ = std::filesystem::temp_directory_path() / ("cohort-fake-smi-" + std::to_string(::getpid()) + ".log");
        std::filesystem::remove(log_);
        ::setenv("FAKE_SMI_LOG", log_.c_str(), 1);
    }
    void TearDown() override {
        for (const char* name : {"FAKE_SMI_DIR", "FAKE_SMI_VARIANT", "FAKE_SMI_LOG", "FAKE_SMI_GPU_EXIT",
                                 "FAKE_SMI_HANG", "FAKE_SMI_PIDFILE"})
            ::unsetenv(name);
        std::filesystem::remove(log_);
    }

    std::unique_ptr<GpuBackend> open(const std::string& variant, double deadline = 10) {
        ::setenv("FAKE_SMI_VARIANT", variant.c_str(), 1);
        ProbeOptions options;
        options.smi_command = fake_smi("nvidia-smi-fixture");
        options.deadline_seconds = deadline;
        return open_smi_backend(options);
    }

    // The arguments of each call the fake answered, one call a line.
    std::string calls() const {
        std::ifstream in(log_);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }

    std::filesystem::path log_;
};

TEST_F(SmiBackendTest, ReadsEveryFieldOfARecordedMachine) {
    auto backend = open("h100_550");
    EXPECT_EQ(backend->name(), "nvidia-smi");
    const auto gpus = backend->read(10);
    ASSERT_EQ(gpus.size(), 2u);
    const GpuReading& g = gpus[0];
    EXPECT_EQ(g.index, 0u);
    EXPECT_EQ(g.uuid, "GPU-9b2e7c41-05da-4e3f-b871-c6d0a29f3e15");
    EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(g.pci_bus_id, "00000000:18:00.0");
    EXPECT_EQ(g.memory_total_bytes.get(), 81559 * MiB);
    EXPECT_EQ(g.memory_used_bytes.get(), 71302 * MiB);
    EXPECT_EQ(g.memory_free_bytes.get(), 9681 * MiB);
    EXPECT_EQ(g.gpu_utilization_percent.get(), 100.0);
    EXPECT_EQ(g.memory_busy_percent.get(), 43.0);
    EXPECT_EQ(g.temperature_celsius.get(), 67.0);
    EXPECT_EQ(g.power_draw_watts.get(), 689.91);
    EXPECT_EQ(g.power_limit_watts.get(), 700.0);
    EXPECT_EQ(g.sm_clock_mhz.get(), 1980u);
    EXPECT_EQ(g.memory_clock_mhz.get(), 2619u);
    EXPECT_EQ(g.fan_percent.state, FieldState::not_available);
    EXPECT_EQ(g.ecc_corrected_errors.get(), 3u);
    EXPECT_EQ(g.ecc_uncorrected_errors.get(), 0u);
    EXPECT_EQ(g.mig_enabled.get(), false);
    EXPECT_EQ(g.processes_state, FieldState::ok);
    ASSERT_EQ(g.processes.size(), 2u);
    EXPECT_EQ(g.processes[1].pid, 120391u);
    EXPECT_EQ(g.processes[1].name, "/opt/conda/bin/python3.11");
    EXPECT_EQ(g.processes[1].memory_bytes.get(), 512 * MiB);
    EXPECT_EQ(gpus[1].power_draw_watts.get(), 71.23);
    // Open checks with -L; a read without MIG needs only the two queries.
    EXPECT_EQ(calls(),
              "-L\n"
              "--query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used,memory.free,utilization.gpu,"
              "utilization.memory,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,fan.speed,"
              "ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,mig.mode.current "
              "--format=csv,noheader,nounits\n"
              "--query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits\n");
}

TEST_F(SmiBackendTest, MigInstancesComeFromTheDeviceList) {
    const auto gpus = open("h100_mig_550")->read(10);
    ASSERT_EQ(gpus.size(), 1u);
    EXPECT_EQ(gpus[0].mig_enabled.get(), true);
    EXPECT_EQ(gpus[0].gpu_utilization_percent.state, FieldState::not_available);
    ASSERT_EQ(gpus[0].mig_instances.size(), 3u);
    EXPECT_EQ(gpus[0].mig_instances[1].uuid, "MIG-c27f1b9a-6e03-5d48-9a1c-7b5e0d3f8c24");
    ASSERT_EQ(gpus[0].processes.size(), 1u);
    EXPECT_EQ(gpus[0].processes[0].pid, 90211u);
}

TEST_F(SmiBackendTest, NotSupportedIsNotNotAvailable) {
    const auto gpus = open("geforce_470")->read(10);
    ASSERT_EQ(gpus.size(), 1u);
    EXPECT_EQ(gpus[0].power_draw_watts.state, FieldState::not_supported);
    EXPECT_EQ(gpus[0].gpu_utilization_percent.state, FieldState::not_supported);
    EXPECT_EQ(gpus[0].ecc_corrected_errors.state, FieldState::not_available);
    EXPECT_EQ(gpus[0].fan_percent.get(), 40.0);
}

TEST_F(SmiBackendTest, ALostGpuDoesNotHideTheOthers) {
    // nvidia-smi exits non-zero when a GPU has fallen off the bus, but still
    // lists the GPUs it could read.
    auto backend = open("lost_gpu_535");
    ::setenv("FAKE_SMI_GPU_EXIT", "15", 1);
    const auto gpus = backend->read(10);
    ASSERT_EQ(gpus.size(), 1u);
    EXPECT_EQ(gpus[0].memory_used_bytes.get(), 20480 * MiB);
    EXPECT_EQ(gpus[0].power_draw_watts.state, FieldState::not_available);
}

TEST_F(SmiBackendTest, AFailedQueryWithNothingToShowIsUnavailable) {
    auto backend = open("a100_535");
    ::setenv("FAKE_SMI_VARIANT", "no_such_variant", 1);  // the fake's cat fails: exit status 3
    const std::string message = test::error_message(Errc::unavailable, [&] { backend->read(10); });
    EXPECT_NE(message.find("nvidia-smi-fixture --query-gpu: exit status 3: "), std::string::npos) << message;
    EXPECT_NE(message.find("no_such_variant.gpu.csv"), std::string::npos) << message;
}

TEST_F(SmiBackendTest, ADriverFailureIsUnavailableWithItsMessage) {
    ProbeOptions options;
    options.smi_command = fake_smi("nvidia-smi-fail");
    const std::string message = test::error_message(Errc::unavailable, [&] { open_smi_backend(options); });
    EXPECT_EQ(message, options.smi_command +
                           " -L: exit status 9: NVIDIA-SMI has failed because it couldn't communicate with the "
                           "NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.");
}

TEST_F(SmiBackendTest, AMissingCommandIsNotFound) {
    ProbeOptions options;
    options.smi_command = "cohort-test-no-such-nvidia-smi";
    EXPECT_EQ(test::error_message(Errc::unavailable, [&] { open_smi_backend(options); }),
              "cohort-test-no-such-nvidia-smi: not found on PATH");
    options.smi_command = "/nonexistent/bin/nvidia-smi";
    EXPECT_EQ(test::error_message(Errc::unavailable, [&] { open_smi_backend(options); }),
              "/nonexistent/bin/nvidia-smi: not found");
}

TEST_F(SmiBackendTest, AHangingCommandIsKilledAtTheDeadlineOnOpen) {
    ProbeOptions options;
    options.smi_command = fake_smi("nvidia-smi-hang");
    options.deadline_seconds = 0.5;
    const auto start = std::chrono::steady_clock::now();
    const std::string message = test::error_message(Errc::unavailable, [&] { open_smi_backend(options); });
    EXPECT_LT(seconds_since(start), 3);
    EXPECT_EQ(message, options.smi_command + " timed out after 0.5s (killed)");
}

TEST_F(SmiBackendTest, AHangingQueryIsKilledAtTheDeadlineOnRead) {
    auto backend = open("a100_535");
    ::setenv("FAKE_SMI_HANG", "1", 1);
    const auto start = std::chrono::steady_clock::now();
    const std::string message = test::error_message(Errc::timeout, [&] { backend->read(0.5); });
    EXPECT_LT(seconds_since(start), 3);
    EXPECT_EQ(message, fake_smi("nvidia-smi-fixture") + " timed out after 0.5s (killed)");
}

TEST_F(SmiBackendTest, AHangingWrapperLeavesNoChildBehind) {
    const auto pidfile =
        std::filesystem::temp_directory_path() / ("cohort-fake-smi-" + std::to_string(::getpid()) + ".pid");
    std::filesystem::remove(pidfile);
    ::setenv("FAKE_SMI_PIDFILE", pidfile.c_str(), 1);
    ProbeOptions options;
    options.smi_command = fake_smi("nvidia-smi-hang-forks");
    options.deadline_seconds = 0.5;
    const auto start = std::chrono::steady_clock::now();
    test::error_message(Errc::unavailable, [&] { open_smi_backend(options); });
    EXPECT_LT(seconds_since(start), 3);

    pid_t child = 0;
    std::ifstream(pidfile) >> child;
    std::filesystem::remove(pidfile);
    ASSERT_GT(child, 0);
    // Gone, or a zombie waiting for a PID 1 that does not reap.
    auto gone = [&] {
        if (::kill(child, 0) != 0) return true;
        std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
        std::string pid, comm, state;
        stat >> pid >> comm >> state;
        return state == "Z";
    };
    for (int i = 0; i < 200 && !gone(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_TRUE(gone()) << "the wrapper's child " << child << " survived the deadline";
}

}  // namespace
}  // namespace cohort
