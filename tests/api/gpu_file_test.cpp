// The simulated GPU backend: what a file says, how its timeline plays out on
// a fake clock, and the error a user sees for each kind of bad file.
#include "support.hpp"

#include <cohort/error.hpp>
#include <cohort/gpu_probe.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

constexpr uint64_t GiB = uint64_t{1} << 30;

// A clock the test moves by hand; the backend opens at 1000, so a timeline's
// "at: 10s" is clock 1010. Atomic: the probe reads it from its worker.
struct FakeClock {
    std::shared_ptr<std::atomic<double>> now = std::make_shared<std::atomic<double>>(1000.0);
    void set(double since_open) const { now->store(1000.0 + since_open); }
    ProbeOptions options() const {
        ProbeOptions o;
        o.clock = [n = now] { return n->load(); };
        return o;
    }
};

std::vector<GpuReading> read_at(GpuBackend& backend, const FakeClock& clock, double t) {
    clock.set(t);
    return backend.read(2.0);
}

TEST(GpuFile, EveryFieldAndItsStates) {
    const auto path = data_path("gpu/file/fields.yaml");
    auto backend = open_simulated_backend(path, {});
    EXPECT_EQ(backend->name(), "file:" + path.string());
    const auto gpus = backend->read(2.0);
    ASSERT_EQ(gpus.size(), 2u);

    const GpuReading& a = gpus[0];
    EXPECT_EQ(a.index, 0u);
    EXPECT_EQ(a.name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(a.uuid, "GPU-11111111-2222-3333-4444-555555555555");
    EXPECT_EQ(a.pci_bus_id, "00000000:18:00.0");
    EXPECT_EQ(a.memory_total_bytes.get(), 80 * GiB);
    EXPECT_EQ(a.memory_used_bytes.get(), 10 * GiB);
    EXPECT_EQ(a.memory_free_bytes.get(), 70 * GiB);
    EXPECT_EQ(a.gpu_utilization_percent.get(), 35.0);
    EXPECT_EQ(a.memory_busy_percent.get(), 20.0);
    EXPECT_EQ(a.temperature_celsius.get(), 50.0);
    EXPECT_EQ(a.power_draw_watts.get(), 120.5);
    EXPECT_EQ(a.power_limit_watts.get(), 700.0);
    EXPECT_EQ(a.sm_clock_mhz.get(), 1980u);
    EXPECT_EQ(a.memory_clock_mhz.get(), 2619u);
    EXPECT_EQ(a.fan_percent.state, FieldState::not_supported);
    EXPECT_EQ(a.ecc_corrected_errors.get(), 3u);
    EXPECT_EQ(a.ecc_uncorrected_errors.get(), 0u);
    EXPECT_EQ(a.mig_enabled.get(), false);
    EXPECT_TRUE(a.mig_instances.empty());
    EXPECT_EQ(a.processes_state, FieldState::ok);
    ASSERT_EQ(a.processes.size(), 2u);
    EXPECT_EQ(a.processes[0].pid, 4242u);
    EXPECT_EQ(a.processes[0].name, "python");
    EXPECT_EQ(a.processes[0].memory_bytes.get(), 9 * GiB);
    EXPECT_EQ(a.processes[1].memory_bytes.state, FieldState::not_available);
    EXPECT_TRUE(a.xid_events.empty());

    // Left-out fields are not supported; written states are kept as such.
    const GpuReading& b = gpus[1];
    EXPECT_EQ(b.index, 3u);
    EXPECT_EQ(b.name, "Simulated GPU");
    EXPECT_THAT(b.uuid, MatchesRegex("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"));
    EXPECT_EQ(b.pci_bus_id, "00000000:03:00.0");
    EXPECT_EQ(b.memory_total_bytes.get(), 40 * GiB);
    EXPECT_EQ(b.memory_used_bytes.state, FieldState::not_available);
    EXPECT_EQ(b.memory_free_bytes.state, FieldState::not_available);
    EXPECT_EQ(b.gpu_utilization_percent.state, FieldState::not_available);
    EXPECT_EQ(b.temperature_celsius.get(), 40.5);
    EXPECT_EQ(b.power_draw_watts.state, FieldState::not_supported);
    EXPECT_EQ(b.sm_clock_mhz.state, FieldState::not_supported);
    EXPECT_EQ(b.ecc_corrected_errors.state, FieldState::not_supported);
    EXPECT_EQ(b.mig_enabled.get(), true);
    ASSERT_EQ(b.mig_instances.size(), 2u);
    EXPECT_EQ(b.mig_instances[0].uuid, "MIG-aaaa");
    EXPECT_EQ(b.mig_instances[0].gpu_instance, 1u);
    EXPECT_EQ(b.mig_instances[0].memory_total_bytes.get(), 20 * GiB);
    EXPECT_EQ(b.mig_instances[0].memory_used_bytes.get(), 1 * GiB);
    EXPECT_EQ(b.mig_instances[1].compute_instance, 1u);
    EXPECT_THAT(b.mig_instances[1].uuid, HasSubstr("MIG-"));
    EXPECT_EQ(b.mig_instances[1].memory_used_bytes.state, FieldState::not_available);
    EXPECT_EQ(b.processes_state, FieldState::not_supported);

    // Made-up uuids are stable: the same in a second backend.
    EXPECT_EQ(open_simulated_backend(path, {})->read(2.0)[1].uuid, b.uuid);
}

TEST(GpuFile, JsonFilesWorkToo) {
    FakeClock clock;
    auto backend = open_simulated_backend(data_path("gpu/file/fields.json"), clock.options());
    auto gpus = read_at(*backend, clock, 0);
    ASSERT_EQ(gpus.size(), 1u);
    EXPECT_EQ(gpus[0].memory_total_bytes.get(), 40 * GiB);
    EXPECT_EQ(gpus[0].memory_used_bytes.get(), 8 * GiB);
    EXPECT_EQ(gpus[0].gpu_utilization_percent.get(), 12.5);
    EXPECT_EQ(gpus[0].fan_percent.state, FieldState::not_available);
    EXPECT_EQ(gpus[0].processes.at(0).memory_bytes.get(), 1u << 20);
    EXPECT_EQ(read_at(*backend, clock, 1)[0].gpu_utilization_percent.get(), 90.0);
    gpus = read_at(*backend, clock, 2);
    ASSERT_EQ(gpus[0].xid_events.size(), 1u);
    EXPECT_EQ(gpus[0].xid_events[0].xid, 48u);
}

TEST(GpuFile, SetStepsChangeValuesFromTheirTime) {
    FakeClock clock;
    auto backend = open_simulated_backend(data_path("gpu/file/timeline.yaml"), clock.options());
    auto gpus = read_at(*backend, clock, 9.99);
    EXPECT_EQ(gpus[0].memory_used_bytes.get(), 10 * GiB);
    EXPECT_TRUE(gpus[0].processes.empty());
    gpus = read_at(*backend, clock, 10);
    EXPECT_EQ(gpus[0].memory_used_bytes.get(), 60 * GiB);
    EXPECT_EQ(gpus[0].memory_free_bytes.get(), 20 * GiB);
    ASSERT_EQ(gpus[0].processes.size(), 1u);
    EXPECT_EQ(gpus[0].processes[0].memory_bytes.get(), 50 * GiB);
    EXPECT_EQ(gpus[1].memory_used_bytes.get(), 1 * GiB);  // the other GPU is untouched
    EXPECT_EQ(read_at(*backend, clock, 24.9)[0].temperature_celsius.get(), 50.0);
    EXPECT_EQ(read_at(*backend, clock, 25)[0].temperature_celsius.get(), 92.0);
}

TEST(GpuFile, RampsInterpolateLinearly) {
    FakeClock clock;
    auto backend = open_simulated_backend(data_path("gpu/file/timeline.yaml"), clock.options());
    // memory_used: 60GiB at 20s to 78GiB at 50s; utilization 0 to 100.
    auto gpus = read_at(*backend, clock, 20);
    EXPECT_EQ(gpus[0].memory_used_bytes.get(), 60 * GiB);
    EXPECT_EQ(gpus[0].gpu_utilization_percent.get(), 0.0);
    gpus = read_at(*backend, clock, 30);
    EXPECT_EQ(gpus[0].memory_used_bytes.get(), 66 * GiB);
    EXPECT_DOUBLE_EQ(gpus[0].gpu_utilization_percent.value, 100.0 / 3);
    // At 35s a second ramp takes over from where the first had got to
    // (69GiB) and goes down to 20GiB by 40s; utilization keeps ramping.
    EXPECT_EQ(read_at(*backend, clock, 35)[0].memory_used_bytes.get(), 69 * GiB);
    gpus = read_at(*backend, clock, 37.5);
    EXPECT_EQ(gpus[0].memory_used_bytes.get(), 44 * GiB + GiB / 2);
    EXPECT_DOUBLE_EQ(gpus[0].gpu_utilization_percent.value, 175.0 / 3);
    EXPECT_EQ(read_at(*backend, clock, 41)[0].memory_used_bytes.get(), 20 * GiB);
    EXPECT_EQ(read_at(*backend, clock, 55)[0].gpu_utilization_percent.get(), 100.0);
    // A ramp from a field with no value starts at its target.
    EXPECT_EQ(read_at(*backend, clock, 24)[1].temperature_celsius.state, FieldState::not_available);
    EXPECT_EQ(read_at(*backend, clock, 26)[1].temperature_celsius.get(), 70.0);
    // Counters round to whole numbers; a set ends a ramp in progress.
    EXPECT_EQ(read_at(*backend, clock, 61)[0].ecc_corrected_errors.get(), 3u);  // 2.5 rounds away from 0
    EXPECT_EQ(read_at(*backend, clock, 61.6)[0].ecc_corrected_errors.get(), 4u);
    EXPECT_EQ(read_at(*backend, clock, 62)[0].ecc_corrected_errors.get(), 100u);
    EXPECT_EQ(read_at(*backend, clock, 70)[0].ecc_corrected_errors.get(), 100u);
}

TEST(GpuFile, XidEventsArriveOnceInTheFirstReadAtOrAfterThem) {
    FakeClock clock;
    auto backend = open_simulated_backend(data_path("gpu/file/timeline.yaml"), clock.options());
    EXPECT_TRUE(read_at(*backend, clock, 29.9)[0].xid_events.empty());
    auto gpus = read_at(*backend, clock, 33);
    ASSERT_EQ(gpus[0].xid_events.size(), 1u);
    EXPECT_EQ(gpus[0].xid_events[0].xid, 79u);
    EXPECT_EQ(gpus[0].xid_events[0].detail, "GPU has fallen off the bus");
    EXPECT_EQ(gpus[0].xid_events[0].time, 1030.0);  // on the probe's clock
    ASSERT_EQ(gpus[1].xid_events.size(), 1u);
    EXPECT_EQ(gpus[1].xid_events[0].xid, 13u);
    EXPECT_EQ(gpus[1].xid_events[0].detail, "");
    gpus = read_at(*backend, clock, 34);
    EXPECT_TRUE(gpus[0].xid_events.empty());
    EXPECT_TRUE(gpus[1].xid_events.empty());
}

TEST(GpuFile, FailThrowsUntilRecover) {
    FakeClock clock;
    auto backend = open_simulated_backend(data_path("gpu/file/timeline.yaml"), clock.options());
    EXPECT_NO_THROW(read_at(*backend, clock, 44.9));
    EXPECT_EQ(error_message(Errc::unavailable, [&] { read_at(*backend, clock, 45); }), "simulated driver error");
    EXPECT_EQ(error_message(Errc::unavailable, [&] { read_at(*backend, clock, 49); }), "simulated driver error");
    EXPECT_EQ(read_at(*backend, clock, 50).size(), 2u);
}

TEST(GpuFile, HangBlocksOneReadOnce) {
    FakeClock clock;
    auto backend = open_simulated_backend(data_path("gpu/file/hang.yaml"), clock.options());
    EXPECT_EQ(read_at(*backend, clock, 9)[0].memory_used_bytes.get(), 20 * GiB);
    const auto begin = std::chrono::steady_clock::now();
    EXPECT_EQ(read_at(*backend, clock, 10)[0].memory_used_bytes.get(), 20 * GiB);
    EXPECT_GE(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(1500));
    EXPECT_EQ(read_at(*backend, clock, 10.5)[0].memory_used_bytes.get(), 20 * GiB);  // no second hang
}

TEST(GpuFile, ShippedExampleLoads) {
    const auto path = data_path("../../examples/gpus.yaml");
    FakeClock clock;
    auto backend = open_simulated_backend(path, clock.options());
    auto gpus = read_at(*backend, clock, 0);
    ASSERT_EQ(gpus.size(), 2u);
    EXPECT_EQ(gpus[1].mig_instances.size(), 2u);
    EXPECT_EQ(read_at(*backend, clock, 35)[0].memory_used_bytes.get(), 69 * GiB);
    EXPECT_EQ(read_at(*backend, clock, 35)[1].temperature_celsius.get(), 92.0);
    gpus = read_at(*backend, clock, 36);
    EXPECT_TRUE(gpus[0].xid_events.empty());  // delivered at 35s already
}

TEST(GpuFile, MissingFileIsAnIoError) {
    const auto path = data_path("gpu/file/no_such_file.yaml");
    EXPECT_THAT(error_message(Errc::io, [&] { open_simulated_backend(path, {}); }),
                HasSubstr(path.string() + ": cannot open"));
}

struct BadFile {
    const char* file;
    const char* message;  // after "<path>:"
};

void PrintTo(const BadFile& f, std::ostream* os) { *os << f.file; }

class BadGpuFile : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadGpuFile, ParseErrorNamesFileLineColumnAndField) {
    const auto path = data_path(std::string("gpu/file/bad/") + GetParam().file);
    const std::string m = error_message(Errc::parse, [&] { open_simulated_backend(path, {}); });
    EXPECT_EQ(m, path.string() + ":" + GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, BadGpuFile,
    ::testing::Values(
        BadFile{"unknown_field.yaml",
                "3:5: gpus[0].temprature: unknown field 'temprature' (did you mean 'temperature'?)"},
        BadFile{"unknown_field.json",
                "3:19: gpus[0].memory_totl: unknown field 'memory_totl' (did you mean 'memory_total'?)"},
        BadFile{"wrong_type.yaml", "3:18: gpus[0].utilization: expected a number, got 'high'"},
        BadFile{"negative_size.yaml", "3:19: gpus[0].memory_total: must not be negative, got -5GiB"},
        BadFile{"percent_range.yaml", "2:18: gpus[0].utilization: expected a percentage from 0 to 100, got 140"},
        BadFile{"negative_watts.yaml", "2:17: gpus[0].power_draw: must not be negative, got -3.5"},
        BadFile{"clock_text.yaml", "2:15: gpus[0].sm_clock: expected a non-negative integer, got '1.5GHz'"},
        BadFile{"used_over_total.yaml", "3:18: gpus[0].memory_used: 10GiB is more than memory_total (8GiB)"},
        BadFile{"duplicate_index.yaml", "4:12: gpus[1].index: duplicate GPU index 0 (also gpus[0])"},
        BadFile{"mig_disabled_instances.yaml", "4:18: gpus[0].mig.instances: MIG instances need enabled: true"},
        BadFile{"bad_bool.yaml", "2:20: gpus[0].mig.enabled: expected true or false"},
        BadFile{"process_pid.yaml", "3:9: gpus[0].processes[0]: missing required field 'pid'"},
        BadFile{"gpus_not_list.yaml", "1:7: gpus: expected a list, got a mapping"},
        BadFile{"version.yaml", "1:10: version: unsupported version 2 (this cohort reads version 1)"},
        BadFile{"missing_gpus.yaml", "1:1: missing required field 'gpus'"},
        BadFile{"empty.yaml", " empty document: expected a mapping with a 'gpus' list"},
        BadFile{"out_of_order.yaml",
                "5:10: timeline[1].at: 10s is before the previous step's 20s (steps must be in time order)"},
        BadFile{"unknown_gpu.yaml", "5:19: timeline[0].gpu: no GPU 2 (GPUs: 0, 1)"},
        BadFile{"missing_gpu.yaml", "4:5: timeline[0]: missing required field 'gpu' (which GPU to xid)"},
        BadFile{"two_actions.yaml",
                "4:51: timeline[0].xid: a step does one thing: 'set' and 'xid' need steps of their own"},
        BadFile{"no_action.yaml", "4:5: timeline[0]: expected one of set, ramp, xid, hang, fail or recover"},
        BadFile{"missing_at.yaml", "4:5: timeline[0]: missing required field 'at'"},
        BadFile{"bad_duration.yaml", "4:10: timeline[0].at: expected a duration such as 30s, 1.5s or 1m30s"},
        BadFile{"ramp_without_over.yaml",
                "4:5: timeline[0]: missing required field 'over' (how long the ramp takes)"},
        BadFile{"ramp_to_state.yaml",
                "4:42: timeline[0].ramp.temperature: a ramp needs a target value, not a state"},
        BadFile{"hang_with_gpu.yaml",
                "4:19: timeline[0].gpu: 'hang' applies to the whole backend, not to one GPU"},
        BadFile{"unknown_set_field.yaml",
                "4:28: timeline[0].set.memroy_used: unknown field 'memroy_used' (did you mean 'memory_used'?)"},
        BadFile{"over_on_set.yaml", "4:51: timeline[0].over: 'over' belongs to a ramp"},
        BadFile{"detail_on_fail.yaml", "4:36: timeline[0].detail: 'detail' belongs to an xid"},
        BadFile{"recover_false.yaml", "4:23: timeline[0].recover: expected true (recover: true ends a fail step)"}),
    [](const auto& param_info) {
        std::string name = param_info.param.file;
        for (char& c : name)
            if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
        return name;
    });

TEST(GpuFile, MalformedYamlAndJsonSayWhere) {
    const auto yaml = data_path("gpu/file/bad/syntax.yaml");
    std::string m = error_message(Errc::parse, [&] { open_simulated_backend(yaml, {}); });
    EXPECT_THAT(m, HasSubstr("malformed YAML"));
    EXPECT_THAT(m, ::testing::ContainsRegex("syntax\\.yaml:[345]:[0-9]+: "));
    const auto json = data_path("gpu/file/bad/syntax.json");
    m = error_message(Errc::parse, [&] { open_simulated_backend(json, {}); });
    EXPECT_THAT(m, HasSubstr("malformed JSON"));
    EXPECT_THAT(m, ::testing::ContainsRegex("syntax\\.json:3:1[0-9]: "));
}

}  // namespace
}  // namespace cohort::test
