// cohort-smi's command line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace cohort_smi {

struct Options {
    std::string backend = "auto";  // auto, nvml, smi, none or file:PATH
    double deadline_seconds = 2.0;
    std::string nvml_library;  // empty: the library's default
    std::string smi_command;
    bool json = false;
    double watch_seconds = 0;  // 0: one sample
    uint64_t count = 0;        // with --watch: stop after this many; 0: until SIGINT
};

// Parses argv. Returns nullopt after printing help or the version (exit 0);
// throws cohort::Error(invalid_argument) naming the flag on bad usage.
std::optional<Options> parse_options(int argc, char** argv);

}  // namespace cohort_smi
