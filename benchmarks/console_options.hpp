// The console reporter's options, read before benchmark::Initialize consumes
// the flags: colour on a terminal, a table with --benchmark_counters_tabular.
// For the benchmarks that print their own ratios through a custom reporter.
#pragma once

#include <benchmark/benchmark.h>

#include <string_view>

#include <unistd.h>

inline benchmark::ConsoleReporter::OutputOptions console_options(int argc, char** argv) {
    int options = isatty(STDOUT_FILENO) != 0 ? benchmark::ConsoleReporter::OO_Color : 0;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--benchmark_counters_tabular" || arg == "--benchmark_counters_tabular=true")
            options |= benchmark::ConsoleReporter::OO_Tabular;
    }
    return static_cast<benchmark::ConsoleReporter::OutputOptions>(options);
}
