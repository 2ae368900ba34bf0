// Simulated-GPU files (docs/gpu.md): fixed readings and a timeline, read
// from YAML or JSON; a simulation that loads is evaluated at a few times
// around and between its steps.
#include "fuzz_input.hpp"

#include "gpu/file/timeline.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    cohort::fuzz::expect_named_errors("gpu file", [&] {
        const cohort::detail::Simulation simulation =
            cohort::detail::read_simulation(text, cohort::Format::automatic, "fuzz.yaml");
        std::vector<double> times = {0.0, 0.5, 1e9};
        for (const auto& step : simulation.timeline) {
            times.push_back(step.at);
            times.push_back(step.at + step.over / 2);
            times.push_back(step.at + step.over + 1);
        }
        for (const double t : times) {
            (void)simulation.readings_at(t);
            (void)simulation.failure_at(t);
        }
    });
    return 0;
}
