// Parsing nvidia-smi's CSV and `-L` output field by field. Every field keeps
// its own state: "[N/A]", "[Not Supported]", an error text or a malformed
// number spoil that field only, never the line, and never read as 0.
#pragma once

#include <cohort/gpu.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail::smi {

// The --query-gpu fields, in the order parse_gpu_query reads them.
inline constexpr std::string_view gpu_query_fields =
    "index,uuid,name,pci.bus_id,memory.total,memory.used,memory.free,utilization.gpu,utilization.memory,"
    "temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,fan.speed,ecc.errors.corrected.volatile.total,"
    "ecc.errors.uncorrected.volatile.total,mig.mode.current";
inline constexpr std::size_t gpu_query_field_count = 18;
inline constexpr std::string_view process_query_fields = "gpu_uuid,pid,process_name,used_memory";
inline constexpr std::size_t process_query_field_count = 4;

// One CSV line: split on commas outside double quotes ("" inside quotes is a
// quote), quotes removed, spaces around each field trimmed. A trailing '\r'
// is dropped.
std::vector<std::string> split_csv_line(std::string_view line);

// Field parsers. A placeholder gives its state ("[N/A]" not_available,
// "[Not Supported]" not_supported, any other "[...]" such as "[Unknown
// Error]" or "[GPU is lost]" not_available); a number may carry the unit
// named (some drivers print it even with `nounits`). On anything but a
// value or "[N/A]"/"[Not Supported]", `problem` says what was wrong.
Reading<uint64_t> parse_mib_as_bytes(std::string_view text, std::string& problem);  // "81920", "81920 MiB"
Reading<double> parse_decimal(std::string_view text, std::string_view unit, std::string& problem);  // "71.23 W"
Reading<uint32_t> parse_mhz(std::string_view text, std::string& problem);    // whole MHz: "1410", "1410 MHz"
Reading<uint64_t> parse_count(std::string_view text, std::string& problem);  // whole, no unit
Reading<bool> parse_enabled(std::string_view text, std::string& problem);    // "Enabled" / "Disabled"

// What a parse found, and what it had to leave out or could not read
// ("line 3: power.draw: '7l.23' is not a number").
struct GpuTable {
    std::vector<GpuReading> gpus;
    std::vector<std::string> warnings;
};
// `--query-gpu=<gpu_query_fields> --format=csv,noheader,nounits`. A line
// without exactly gpu_query_field_count fields is skipped with a warning
// (nvidia-smi prints "Unable to determine the device handle for GPU ..." in
// the table for a GPU that is lost).
GpuTable parse_gpu_query(std::string_view output);

struct ProcessRow {
    std::string gpu_uuid;
    GpuProcess process;
};
struct ProcessTable {
    std::vector<ProcessRow> rows;
    std::vector<std::string> warnings;
};
// `--query-compute-apps=<process_query_fields> --format=csv,noheader,nounits`.
ProcessTable parse_process_query(std::string_view output);

// A GPU as `nvidia-smi -L` lists it, with its MIG devices.
struct ListedGpu {
    uint32_t index = 0;
    std::string name;
    std::string uuid;
    std::vector<MigInstance> mig;
};
// "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)" and the MIG lines under it,
// "  MIG 3g.40gb     Device  0: (UUID: MIG-...)". Only the old MIG UUIDs
// ("MIG-GPU-<uuid>/<gi>/<ci>", drivers before R470) carry the GPU and
// compute instance ids; with the newer ones both stay 0.
std::vector<ListedGpu> parse_gpu_list(std::string_view output);

// Puts each process on the GPU it names by uuid (a MIG uuid counts for its
// parent GPU) and marks every GPU's process list ok; a process naming no
// known GPU is a warning.
void attach_processes(std::vector<GpuReading>& gpus, const ProcessTable& table, std::vector<std::string>& warnings);
// Fills mig_instances of the GPUs `listed` names by uuid.
void attach_mig(std::vector<GpuReading>& gpus, const std::vector<ListedGpu>& listed);

}  // namespace cohort::detail::smi
