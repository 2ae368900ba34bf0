// nvidia-smi's output as the smi probe reads it (src/gpu/smi/parse.hpp):
// the input is split at the first two NUL bytes into the --query-gpu
// table, the --query-compute-apps table and `nvidia-smi -L`, and the three
// are joined as the backend joins them.
#include "fuzz_input.hpp"

#include "gpu/smi/parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    using namespace cohort::detail::smi;
    cohort::fuzz::Input in(data, size);
    const std::string_view gpu_text = in.until('\0');
    const std::string_view process_text = in.until('\0');
    const std::string_view list_text = in.rest();
    cohort::fuzz::expect_named_errors("smi", [&] {
        GpuTable table = parse_gpu_query(gpu_text);
        const ProcessTable processes = parse_process_query(process_text);
        const std::vector<ListedGpu> listed = parse_gpu_list(list_text);
        attach_processes(table.gpus, processes, table.warnings);
        attach_mig(table.gpus, listed);
    });
    return 0;
}
