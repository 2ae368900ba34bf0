// Launch-environment variables (docs/launch-env.md): each line is
// NAME=VALUE, read as cohort's, torchrun's, Open MPI's or Slurm's
// variables would be.
#include "fuzz_input.hpp"

#include <cohort/launch_env.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    cohort::fuzz::Input in(data, size);
    std::map<std::string, std::string> env;
    while (!in.empty()) {
        const std::string_view line = in.line();
        const std::size_t eq = line.find('=');
        if (eq == std::string_view::npos || eq == 0) continue;
        env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    }
    cohort::fuzz::expect_named_errors("launch env", [&] {
        const cohort::LaunchEnv read = cohort::read_launch_env(env);
        if (read.rank < 0 || read.world_size < 1 || read.rank >= read.world_size) {
            cohort::fuzz::defect("launch env", "a rank outside its world was accepted");
        }
    });
    return 0;
}
