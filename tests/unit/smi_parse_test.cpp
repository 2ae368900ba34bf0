// gpu/smi/parse.hpp: nvidia-smi's CSV and -L output, field by field, on the
// recorded variants in tests/data/gpu/smi (see its README.md).
#include "gpu/smi/parse.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace cohort::detail::smi {
namespace {

constexpr uint64_t MiB = uint64_t{1} << 20;

// The unit tests get no data path from CMake; the fixtures sit beside them.
std::string fixture(const std::string& name) {
    const auto path = std::filesystem::path(__FILE__).parent_path().parent_path() / "data" / "gpu" / "smi" / name;
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << "cannot open " << path;
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// The GPUs a variant describes, processes and MIG devices attached as the
// backend attaches them.
struct Machine {
    std::vector<GpuReading> gpus;
    std::vector<std::string> warnings;
};
Machine machine(const std::string& variant) {
    GpuTable table = parse_gpu_query(fixture(variant + ".gpu.csv"));
    Machine m{std::move(table.gpus), std::move(table.warnings)};
    attach_mig(m.gpus, parse_gpu_list(fixture(variant + ".list.txt")));
    ProcessTable processes = parse_process_query(fixture(variant + ".apps.csv"));
    m.warnings.insert(m.warnings.end(), processes.warnings.begin(), processes.warnings.end());
    attach_processes(m.gpus, processes, m.warnings);
    return m;
}

bool has_warning(const std::vector<std::string>& warnings, const std::string& text) {
    return std::any_of(warnings.begin(), warnings.end(),
                       [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

std::string joined(const std::vector<std::string>& warnings) {
    std::string out;
    for (const auto& w : warnings) out += w + "\n";
    return out;
}

TEST(SmiCsv, SplitsAndTrims) {
    EXPECT_EQ(split_csv_line("0, GPU-1, NVIDIA A100, 81920"),
              (std::vector<std::string>{"0", "GPU-1", "NVIDIA A100", "81920"}));
    EXPECT_EQ(split_csv_line("a,,b, "), (std::vector<std::string>{"a", "", "b", ""}));
    EXPECT_EQ(split_csv_line("a, b\r"), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(split_csv_line(""), (std::vector<std::string>{""}));
}

TEST(SmiCsv, HonoursQuotes) {
    EXPECT_EQ(split_csv_line(R"(1, "NVIDIA RTX A6000, vGPU 48Q", x)"),
              (std::vector<std::string>{"1", "NVIDIA RTX A6000, vGPU 48Q", "x"}));
    EXPECT_EQ(split_csv_line(R"("say ""hi"", then go" , 2)"), (std::vector<std::string>{R"(say "hi", then go)", "2"}));
    // Spaces inside quotes are content; outside they are padding.
    EXPECT_EQ(split_csv_line(R"(  " padded "  ,b)"), (std::vector<std::string>{" padded ", "b"}));
}

TEST(SmiField, PlaceholdersAreStatesNotZero) {
    std::string problem;
    auto memory = parse_mib_as_bytes("[N/A]", problem);
    EXPECT_EQ(memory.state, FieldState::not_available);
    EXPECT_EQ(problem, "");
    memory = parse_mib_as_bytes("[Not Supported]", problem);
    EXPECT_EQ(memory.state, FieldState::not_supported);
    EXPECT_EQ(problem, "");
    // Old drivers printed them without brackets.
    EXPECT_EQ(parse_decimal("N/A", "W", problem).state, FieldState::not_available);
    EXPECT_EQ(parse_decimal("Not Supported", "W", problem).state, FieldState::not_supported);
    // An error text is "not available this time", and is remembered.
    EXPECT_EQ(parse_decimal("[Unknown Error]", "W", problem).state, FieldState::not_available);
    EXPECT_EQ(problem, "Unknown Error");
    problem.clear();
    EXPECT_EQ(parse_count("[GPU is lost]", problem).state, FieldState::not_available);
    EXPECT_EQ(problem, "GPU is lost");
}

TEST(SmiField, NumbersWithAndWithoutUnits) {
    std::string problem;
    EXPECT_EQ(parse_mib_as_bytes("81920", problem).value, 81920 * MiB);
    EXPECT_EQ(parse_mib_as_bytes("81920 MiB", problem).value, 81920 * MiB);
    EXPECT_EQ(parse_mib_as_bytes("0", problem).value, 0u);
    EXPECT_TRUE(parse_mib_as_bytes("0", problem).ok());
    // Decimal watts, exactly: never read as an integer.
    EXPECT_EQ(parse_decimal("71.23", "W", problem).value, 71.23);
    EXPECT_EQ(parse_decimal("71.23 W", "W", problem).value, 71.23);
    EXPECT_EQ(parse_decimal("71.23W", "W", problem).value, 71.23);
    EXPECT_EQ(parse_decimal("35 %", "%", problem).value, 35.0);
    EXPECT_EQ(parse_mhz("1410", problem).value, 1410u);
    EXPECT_EQ(parse_mhz("1410 MHz", problem).value, 1410u);
    EXPECT_EQ(parse_count("3", problem).value, 3u);
    EXPECT_EQ(parse_enabled("Enabled", problem).value, true);
    EXPECT_EQ(parse_enabled(" Disabled ", problem).value, false);
    EXPECT_TRUE(parse_enabled("Disabled", problem).ok());
    EXPECT_EQ(problem, "");
}

TEST(SmiField, MalformedIsNotAvailableAndSaysWhy) {
    auto check = [](auto reading, const std::string& problem, const std::string& expected) {
        EXPECT_EQ(reading.state, FieldState::not_available);
        EXPECT_EQ(problem, expected);
    };
    std::string p;
    check(parse_decimal("7l.23", "W", p), p, "'7l.23' is not a number");
    check(parse_decimal("71.23 MHz", "W", p), p, "'71.23 MHz' is not a number");  // the wrong unit
    check(parse_decimal("nan", "W", p), p, "'nan' is not a number");
    check(parse_decimal("-3", "%", p), p, "'-3' is not a number");
    check(parse_mib_as_bytes("12x4", p), p, "'12x4' is not a number");
    check(parse_mib_as_bytes("", p), p, "empty, expected a number");
    check(parse_mhz("1410.5", p), p, "'1410.5' is not a number");
    check(parse_mhz("99999999999", p), p, "'99999999999' is not a number");
    check(parse_count("-1", p), p, "'-1' is not a number");
    check(parse_enabled("Maybe", p), p, "'Maybe' is neither Enabled nor Disabled");
}

TEST(SmiFixture, A100Driver535) {
    const Machine m = machine("a100_535");
    EXPECT_EQ(joined(m.warnings), "");
    ASSERT_EQ(m.gpus.size(), 2u);
    const GpuReading& g = m.gpus[0];
    EXPECT_EQ(g.index, 0u);
    EXPECT_EQ(g.uuid, "GPU-4f6ad2a1-91c3-6b7e-2d0e-8a5c1f3b9e07");
    EXPECT_EQ(g.name, "NVIDIA A100-SXM4-80GB");
    EXPECT_EQ(g.pci_bus_id, "00000000:07:00.0");
    EXPECT_EQ(g.memory_total_bytes.value, 81920 * MiB);
    EXPECT_EQ(g.memory_used_bytes.value, 40213 * MiB);
    EXPECT_EQ(g.memory_free_bytes.value, 40843 * MiB);  // not total - used: the driver reserves some
    EXPECT_EQ(g.gpu_utilization_percent.value, 97.0);
    EXPECT_EQ(g.memory_busy_percent.value, 61.0);
    EXPECT_EQ(g.temperature_celsius.value, 58.0);
    EXPECT_EQ(g.power_draw_watts.value, 312.47);
    EXPECT_EQ(g.power_limit_watts.value, 400.0);
    EXPECT_EQ(g.sm_clock_mhz.value, 1410u);
    EXPECT_EQ(g.memory_clock_mhz.value, 1593u);
    EXPECT_EQ(g.fan_percent.state, FieldState::not_available);  // passively cooled
    EXPECT_TRUE(g.ecc_corrected_errors.ok());
    EXPECT_EQ(g.ecc_corrected_errors.value, 0u);
    EXPECT_EQ(g.ecc_uncorrected_errors.value, 0u);
    EXPECT_TRUE(g.mig_enabled.ok());
    EXPECT_FALSE(g.mig_enabled.value);
    EXPECT_EQ(g.processes_state, FieldState::ok);
    ASSERT_EQ(g.processes.size(), 1u);
    EXPECT_EQ(g.processes[0].pid, 48213u);
    EXPECT_EQ(g.processes[0].name, "/usr/bin/python3");
    EXPECT_EQ(g.processes[0].memory_bytes.value, 40198 * MiB);
    EXPECT_TRUE(g.mig_instances.empty());

    EXPECT_EQ(m.gpus[1].index, 1u);
    EXPECT_EQ(m.gpus[1].power_draw_watts.value, 62.05);
    EXPECT_EQ(m.gpus[1].sm_clock_mhz.value, 210u);
    EXPECT_EQ(m.gpus[1].processes_state, FieldState::ok);  // ok and empty: no processes
    EXPECT_TRUE(m.gpus[1].processes.empty());
}

TEST(SmiFixture, H100Driver550) {
    const Machine m = machine("h100_550");
    EXPECT_EQ(joined(m.warnings), "");
    ASSERT_EQ(m.gpus.size(), 2u);
    EXPECT_EQ(m.gpus[0].name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(m.gpus[0].memory_total_bytes.value, 81559 * MiB);
    EXPECT_EQ(m.gpus[0].memory_used_bytes.value, 71302 * MiB);
    EXPECT_EQ(m.gpus[0].gpu_utilization_percent.value, 100.0);
    EXPECT_EQ(m.gpus[0].memory_busy_percent.value, 43.0);
    EXPECT_EQ(m.gpus[0].power_draw_watts.value, 689.91);
    EXPECT_EQ(m.gpus[0].power_limit_watts.value, 700.0);
    EXPECT_EQ(m.gpus[0].sm_clock_mhz.value, 1980u);
    EXPECT_EQ(m.gpus[0].memory_clock_mhz.value, 2619u);
    EXPECT_EQ(m.gpus[0].ecc_corrected_errors.value, 3u);
    EXPECT_EQ(m.gpus[1].power_draw_watts.value, 71.23);
    EXPECT_EQ(m.gpus[1].pci_bus_id, "00000000:2A:00.0");
    ASSERT_EQ(m.gpus[0].processes.size(), 2u);
    EXPECT_EQ(m.gpus[0].processes[0].pid, 120334u);
    EXPECT_EQ(m.gpus[0].processes[0].memory_bytes.value, 70778 * MiB);
    EXPECT_EQ(m.gpus[0].processes[1].name, "/opt/conda/bin/python3.11");
    EXPECT_EQ(m.gpus[0].processes[1].memory_bytes.value, 512 * MiB);
    EXPECT_TRUE(m.gpus[1].processes.empty());
}

// Captured on real hardware (an H100 80GB, driver 580.159.04, one process
// holding 7 GiB and running matrix products): total - used - free is the
// driver's 480 MiB reservation, which nvidia-smi leaves out of `used`.
TEST(SmiFixture, H100Driver580Captured) {
    const Machine m = machine("h100_580");
    EXPECT_EQ(joined(m.warnings), "");
    ASSERT_EQ(m.gpus.size(), 1u);
    const GpuReading& g = m.gpus[0];
    EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(g.uuid, "GPU-2cc41057-643d-2ed0-407e-b6813ab1ea5b");
    EXPECT_EQ(g.pci_bus_id, "00000000:00:06.0");
    EXPECT_EQ(g.memory_total_bytes.value, 81559 * MiB);
    EXPECT_EQ(g.memory_used_bytes.value, 7155 * MiB);
    EXPECT_EQ(g.memory_free_bytes.value, 73925 * MiB);
    EXPECT_EQ(g.memory_total_bytes.value - g.memory_used_bytes.value - g.memory_free_bytes.value, 479 * MiB);
    EXPECT_EQ(g.gpu_utilization_percent.value, 95.0);
    EXPECT_EQ(g.temperature_celsius.value, 56.0);
    EXPECT_EQ(g.power_draw_watts.value, 690.90);
    EXPECT_EQ(g.power_limit_watts.value, 700.0);
    EXPECT_EQ(g.sm_clock_mhz.value, 1500u);
    EXPECT_EQ(g.fan_percent.state, FieldState::not_available);  // "[N/A]": a passively cooled board
    EXPECT_EQ(g.ecc_corrected_errors.value, 0u);
    EXPECT_EQ(g.mig_enabled.value, false);
    ASSERT_EQ(g.processes.size(), 1u);
    EXPECT_EQ(g.processes[0].pid, 465u);
    EXPECT_EQ(g.processes[0].name, "python3");
    EXPECT_EQ(g.processes[0].memory_bytes.value, 7146 * MiB);

    const Machine idle = machine("h100_580_idle");
    EXPECT_EQ(joined(idle.warnings), "");
    ASSERT_EQ(idle.gpus.size(), 1u);
    EXPECT_EQ(idle.gpus[0].memory_used_bytes.value, 0u);
    EXPECT_EQ(idle.gpus[0].gpu_utilization_percent.value, 0.0);
    EXPECT_EQ(idle.gpus[0].processes_state, FieldState::ok);  // ok and empty
    EXPECT_TRUE(idle.gpus[0].processes.empty());
}

TEST(SmiFixture, A100MigDriver470WithUnitSuffixes) {
    const Machine m = machine("a100_mig_470");
    EXPECT_EQ(joined(m.warnings), "");
    ASSERT_EQ(m.gpus.size(), 2u);
    const GpuReading& mig = m.gpus[0];
    EXPECT_EQ(mig.memory_total_bytes.value, 40536 * MiB);
    EXPECT_EQ(mig.memory_used_bytes.value, 13 * MiB);
    EXPECT_EQ(mig.memory_free_bytes.value, 40523 * MiB);
    // In MIG mode the whole-GPU utilisation is not reported.
    EXPECT_EQ(mig.gpu_utilization_percent.state, FieldState::not_available);
    EXPECT_EQ(mig.memory_busy_percent.state, FieldState::not_available);
    EXPECT_EQ(mig.power_draw_watts.value, 54.11);
    EXPECT_EQ(mig.power_limit_watts.value, 400.0);
    EXPECT_EQ(mig.sm_clock_mhz.value, 1410u);
    EXPECT_EQ(mig.memory_clock_mhz.value, 1215u);
    EXPECT_TRUE(mig.mig_enabled.ok());
    EXPECT_TRUE(mig.mig_enabled.value);
    ASSERT_EQ(mig.mig_instances.size(), 3u);
    EXPECT_EQ(mig.mig_instances[0].uuid, "MIG-GPU-2e5b7b71-53f4-f0a4-8a69-5d2ab1e7b7e1/2/0");
    EXPECT_EQ(mig.mig_instances[0].gpu_instance, 2u);
    EXPECT_EQ(mig.mig_instances[0].compute_instance, 0u);
    EXPECT_EQ(mig.mig_instances[1].gpu_instance, 3u);
    EXPECT_EQ(mig.mig_instances[2].gpu_instance, 9u);
    EXPECT_EQ(mig.mig_instances[2].memory_total_bytes.state, FieldState::not_available);
    // A process named by its MIG instance's uuid belongs to the parent GPU.
    ASSERT_EQ(mig.processes.size(), 1u);
    EXPECT_EQ(mig.processes[0].pid, 3318u);
    EXPECT_EQ(mig.processes[0].memory_bytes.state, FieldState::not_available);

    const GpuReading& plain = m.gpus[1];
    EXPECT_EQ(plain.gpu_utilization_percent.value, 37.0);
    EXPECT_EQ(plain.memory_busy_percent.value, 9.0);
    EXPECT_EQ(plain.power_draw_watts.value, 88.6);
    EXPECT_FALSE(plain.mig_enabled.value);
    EXPECT_TRUE(plain.mig_instances.empty());
    ASSERT_EQ(plain.processes.size(), 1u);
    EXPECT_EQ(plain.processes[0].name, "./bench");
    EXPECT_EQ(plain.processes[0].memory_bytes.value, 1204 * MiB);
}

TEST(SmiFixture, H100MigDriver550) {
    const Machine m = machine("h100_mig_550");
    EXPECT_EQ(joined(m.warnings), "");
    ASSERT_EQ(m.gpus.size(), 1u);
    const GpuReading& g = m.gpus[0];
    EXPECT_TRUE(g.mig_enabled.value);
    EXPECT_EQ(g.gpu_utilization_percent.state, FieldState::not_available);
    EXPECT_EQ(g.power_draw_watts.value, 143.76);
    ASSERT_EQ(g.mig_instances.size(), 3u);
    EXPECT_EQ(g.mig_instances[0].uuid, "MIG-8a0e6f3d-2c41-5b97-a7d8-1f4c9e2b0a65");
    EXPECT_EQ(g.mig_instances[1].uuid, "MIG-c27f1b9a-6e03-5d48-9a1c-7b5e0d3f8c24");
    EXPECT_EQ(g.mig_instances[2].uuid, "MIG-f4b9d026-81e7-5a3c-b6f0-2d8a7c1e9b53");
    ASSERT_EQ(g.processes.size(), 1u);
    EXPECT_EQ(g.processes[0].memory_bytes.value, 11776 * MiB);
}

TEST(SmiFixture, ConsumerGpuNotSupportedVersusNotAvailable) {
    const Machine m = machine("geforce_470");
    EXPECT_EQ(joined(m.warnings), "");
    ASSERT_EQ(m.gpus.size(), 1u);
    const GpuReading& g = m.gpus[0];
    EXPECT_EQ(g.name, "NVIDIA GeForce GT 730");
    EXPECT_EQ(g.memory_total_bytes.value, 2002 * MiB);
    EXPECT_EQ(g.gpu_utilization_percent.state, FieldState::not_supported);
    EXPECT_EQ(g.memory_busy_percent.state, FieldState::not_supported);
    EXPECT_EQ(g.power_draw_watts.state, FieldState::not_supported);
    EXPECT_EQ(g.power_limit_watts.state, FieldState::not_supported);
    EXPECT_EQ(g.temperature_celsius.value, 44.0);
    EXPECT_EQ(g.fan_percent.value, 40.0);
    EXPECT_EQ(g.ecc_corrected_errors.state, FieldState::not_available);
    EXPECT_EQ(g.ecc_uncorrected_errors.state, FieldState::not_available);
    EXPECT_EQ(g.mig_enabled.state, FieldState::not_available);
    EXPECT_EQ(g.processes_state, FieldState::ok);
    EXPECT_TRUE(g.processes.empty());
}

TEST(SmiFixture, Rtx4090Driver550) {
    const Machine m = machine("rtx4090_550");
    EXPECT_EQ(joined(m.warnings), "");
    ASSERT_EQ(m.gpus.size(), 1u);
    const GpuReading& g = m.gpus[0];
    EXPECT_EQ(g.memory_total_bytes.value, 24564 * MiB);
    EXPECT_EQ(g.memory_used_bytes.value, 18342 * MiB);
    EXPECT_EQ(g.memory_free_bytes.value, 5825 * MiB);
    EXPECT_EQ(g.power_draw_watts.value, 438.65);
    EXPECT_EQ(g.power_limit_watts.value, 450.0);
    EXPECT_EQ(g.sm_clock_mhz.value, 2730u);
    EXPECT_EQ(g.memory_clock_mhz.value, 10501u);
    EXPECT_EQ(g.fan_percent.value, 68.0);
    EXPECT_EQ(g.ecc_corrected_errors.state, FieldState::not_available);
    EXPECT_EQ(g.mig_enabled.state, FieldState::not_available);
    ASSERT_EQ(g.processes.size(), 1u);
    EXPECT_EQ(g.processes[0].memory_bytes.value, 18020 * MiB);
}

TEST(SmiFixture, QuotedCommasInNames) {
    const Machine m = machine("quoted_550");
    EXPECT_EQ(joined(m.warnings), "");
    ASSERT_EQ(m.gpus.size(), 1u);
    EXPECT_EQ(m.gpus[0].name, "NVIDIA RTX A6000, vGPU 48Q");
    EXPECT_EQ(m.gpus[0].pci_bus_id, "00000000:02:00.0");  // the fields after the name did not shift
    EXPECT_EQ(m.gpus[0].memory_total_bytes.value, 49152 * MiB);
    EXPECT_EQ(m.gpus[0].power_draw_watts.value, 61.5);
    EXPECT_EQ(m.gpus[0].mig_enabled.state, FieldState::not_available);
    ASSERT_EQ(m.gpus[0].processes.size(), 2u);
    EXPECT_EQ(m.gpus[0].processes[0].name, "/opt/app,v2/bin/worker");
    EXPECT_EQ(m.gpus[0].processes[0].memory_bytes.value, 2048 * MiB);
    EXPECT_EQ(m.gpus[0].processes[1].name, R"(python "eval, fast".py)");
    EXPECT_EQ(m.gpus[0].processes[1].memory_bytes.value, 1024 * MiB);
}

TEST(SmiFixture, LostGpuKeepsTheOthers) {
    const Machine m = machine("lost_gpu_535");
    ASSERT_EQ(m.gpus.size(), 1u);
    const GpuReading& g = m.gpus[0];
    EXPECT_EQ(g.memory_used_bytes.value, 20480 * MiB);
    EXPECT_EQ(g.power_draw_watts.state, FieldState::not_available);
    EXPECT_EQ(g.power_limit_watts.value, 400.0);
    EXPECT_EQ(g.ecc_corrected_errors.value, 0u);
    EXPECT_EQ(g.ecc_uncorrected_errors.state, FieldState::not_available);
    EXPECT_TRUE(has_warning(m.warnings, "line 1: power.draw: Unknown Error")) << joined(m.warnings);
    EXPECT_TRUE(has_warning(m.warnings, "line 1: ecc.errors.uncorrected.volatile.total: GPU is lost"))
        << joined(m.warnings);
    EXPECT_TRUE(has_warning(m.warnings,
                            "line 2: expected 18 fields, found 1; skipped: Unable to determine the device handle for "
                            "GPU0000:0F:00.0: Unknown Error"))
        << joined(m.warnings);
}

TEST(SmiFixture, MalformedFieldsSpoilOnlyThemselves) {
    const Machine m = machine("malformed_535");
    ASSERT_EQ(m.gpus.size(), 2u) << joined(m.warnings);
    const GpuReading& g = m.gpus[0];
    EXPECT_EQ(g.memory_total_bytes.value, 81920 * MiB);
    EXPECT_EQ(g.memory_used_bytes.state, FieldState::not_available);  // "12x4": not 12, not 0
    EXPECT_EQ(g.memory_free_bytes.value, 60575 * MiB);
    EXPECT_EQ(g.power_draw_watts.state, FieldState::not_available);  // "7l.23": not 7
    EXPECT_EQ(g.power_limit_watts.value, 400.0);
    EXPECT_EQ(g.sm_clock_mhz.state, FieldState::not_available);  // "1410.5": not 1410
    EXPECT_EQ(g.memory_clock_mhz.value, 1593u);
    EXPECT_EQ(g.ecc_corrected_errors.state, FieldState::not_available);  // "-1"
    EXPECT_EQ(g.ecc_uncorrected_errors.value, 0u);
    EXPECT_EQ(g.mig_enabled.state, FieldState::not_available);  // "Maybe"
    EXPECT_EQ(g.temperature_celsius.value, 52.0);
    for (const char* w : {"line 1: memory.used: '12x4' is not a number", "line 1: power.draw: '7l.23' is not a number",
                          "line 1: clocks.sm: '1410.5' is not a number",
                          "line 1: ecc.errors.corrected.volatile.total: '-1' is not a number",
                          "line 1: mig.mode.current: 'Maybe' is neither Enabled nor Disabled",
                          "line 2: expected 18 fields, found 9; skipped: 1, GPU-bb51e8d2",
                          "line 3: expected 18 fields, found 19; skipped: 2, GPU-cc2a9f47",
                          "line 4: index: 'x' is not an index; using 1"})
        EXPECT_TRUE(has_warning(m.warnings, w)) << "missing: " << w << "\n" << joined(m.warnings);

    // A bad index keeps the GPU, at its place among the lines.
    EXPECT_EQ(m.gpus[1].index, 1u);
    EXPECT_EQ(m.gpus[1].uuid, "GPU-dd7e0b3a-59c1-f2d4-8b6a-03e5a9c7d146");
    EXPECT_EQ(m.gpus[1].power_draw_watts.value, 60.5);

    // Processes: a bad pid drops the row, a bad memory field only itself,
    // and a process on a GPU the query did not list is reported.
    ASSERT_EQ(g.processes.size(), 2u);
    EXPECT_EQ(g.processes[0].pid, 777u);
    EXPECT_EQ(g.processes[0].memory_bytes.value, 20470 * MiB);
    EXPECT_EQ(g.processes[1].pid, 779u);
    EXPECT_EQ(g.processes[1].memory_bytes.state, FieldState::not_available);
    for (const char* w :
         {"line 2: pid 'notapid' is not a process id; skipped", "line 4: used_memory: '12.5.3' is not a number",
          "process 778 (orphan) is on GPU 'GPU-ffffffff-0000-0000-0000-000000000000', which the GPU "
          "query did not list"})
        EXPECT_TRUE(has_warning(m.warnings, w)) << "missing: " << w << "\n" << joined(m.warnings);
}

TEST(SmiParse, EmptyOutputIsNoGpusAndNoWarnings) {
    EXPECT_TRUE(parse_gpu_query("").gpus.empty());
    EXPECT_TRUE(parse_gpu_query("\n\n").warnings.empty());
    EXPECT_TRUE(parse_process_query("").rows.empty());
    // Some drivers print this instead of an empty table.
    const ProcessTable none = parse_process_query("No running processes found\n");
    EXPECT_TRUE(none.rows.empty());
    EXPECT_TRUE(none.warnings.empty());
}

TEST(SmiParse, CrlfLineEndings) {
    const GpuTable table = parse_gpu_query(
        "0, GPU-1, NVIDIA A100-SXM4-80GB, 00000000:07:00.0, 81920, 1, 81051, 0, 0, 30, 60.50, 400.00, 210, 1593, "
        "[N/A], 0, 0, Disabled\r\n");
    ASSERT_EQ(table.gpus.size(), 1u);
    EXPECT_TRUE(table.warnings.empty());
    EXPECT_EQ(table.gpus[0].mig_enabled.state, FieldState::ok);
}

TEST(SmiParse, GpuListWithoutMig) {
    const auto listed = parse_gpu_list(fixture("a100_535.list.txt"));
    ASSERT_EQ(listed.size(), 2u);
    EXPECT_EQ(listed[1].index, 1u);
    EXPECT_EQ(listed[1].name, "NVIDIA A100-SXM4-80GB");
    EXPECT_EQ(listed[1].uuid, "GPU-0c93e1b5-7d24-f8a6-5b19-3e6d2c7a4f80");
    EXPECT_TRUE(listed[1].mig.empty());
    // A name with a comma and the lost-GPU line do not confuse it.
    EXPECT_EQ(parse_gpu_list(fixture("quoted_550.list.txt"))[0].name, "NVIDIA RTX A6000, vGPU 48Q");
    EXPECT_EQ(parse_gpu_list(fixture("lost_gpu_535.list.txt")).size(), 1u);
}

}  // namespace
}  // namespace cohort::detail::smi
