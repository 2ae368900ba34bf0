// Cluster files (docs/formats.md): YAML or JSON, the format sniffed as
// cohort-run does for a file without an extension. A topology that loads
// is ordered into ranks, as a launcher does next.
#include "fuzz_input.hpp"

#include <cohort/rank_order.hpp>
#include <cohort/topology.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    cohort::fuzz::expect_named_errors("cluster file", [&] {
        const cohort::Topology topology = cohort::Topology::from_string(text, cohort::Format::automatic, "fuzz");
        const cohort::RankOrder order(topology);
        for (int level = 0; level < cohort::kLevelCount; ++level) {
            (void)cohort::ring_crossings(order, static_cast<cohort::Level>(level));
        }
    });
    return 0;
}
