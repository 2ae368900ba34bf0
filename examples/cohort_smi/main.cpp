// cohort-smi: what each GPU is doing, as gpustat shows it, from NVML,
// nvidia-smi or a simulated file, without ever hanging. A starting point to
// copy: everything here uses the public C++ API.
#include "options.hpp"
#include "table.hpp"

#include <cohort/cohort.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include <fmt/format.h>
#include <unistd.h>

namespace {

volatile std::sig_atomic_t interrupted = 0;

void on_interrupt(int) {
    interrupted = 1;
}

cohort::GpuProbe open_probe(const cohort_smi::Options& options) {
    cohort::ProbeOptions probe_options;
    probe_options.deadline_seconds = options.deadline_seconds;
    if (!options.nvml_library.empty()) probe_options.nvml_library = options.nvml_library;
    if (!options.smi_command.empty()) probe_options.smi_command = options.smi_command;
    try {
        return cohort::GpuProbe::open(options.backend, std::move(probe_options));
    } catch (const cohort::Error& e) {
        if (e.code() != cohort::Errc::unavailable) throw;
        throw cohort::Error(e.code(), fmt::format("backend {} is unavailable: {}", options.backend, e.what()));
    }
}

// Sleeps until `until`, waking early on SIGINT.
void sleep_until(std::chrono::steady_clock::time_point until) {
    while (!interrupted && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            until - std::chrono::steady_clock::now(), std::chrono::milliseconds(50)));
}

int run(const cohort_smi::Options& options) {
    cohort::GpuProbe probe = open_probe(options);
    if (options.json) {
        for (const cohort::BackendChoice& choice : probe.selection()) {
            if (!choice.chosen)
                fmt::print(stderr, "cohort-smi: auto passed over {}: {}\n", choice.backend, choice.reason);
        }
    }
    const bool watch = options.watch_seconds > 0;
    const bool clear = watch && !options.json && isatty(STDOUT_FILENO);
    if (watch) std::signal(SIGINT, on_interrupt);

    const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(options.watch_seconds));
    auto next = std::chrono::steady_clock::now();
    std::string failure;  // of the last sample
    for (uint64_t taken = 0; !interrupted; ++taken) {
        if (watch && options.count && taken == options.count) break;
        if (taken > 0) {
            sleep_until(next);
            if (interrupted) break;
        }
        next += interval;
        const cohort::GpuSample sample = probe.sample();
        failure = sample.health == cohort::ProbeHealth::ok ? std::string()
                  : sample.error.empty()                   ? std::string(cohort::to_string(sample.health))
                                                           : sample.error;
        if (options.json) {
            fmt::print("{}\n", sample.to_json());
        } else {
            if (clear)
                fmt::print("\033[H\033[2J");
            else if (taken > 0)
                fmt::print("\n");
            fmt::print("{}", cohort_smi::table(sample, probe.selection()));
        }
        std::fflush(stdout);
        if (!watch) break;
    }
    // One sample: its failure is the program's. Watching: Ctrl-C is the normal end.
    if (!watch && !failure.empty()) {
        fmt::print(stderr, "cohort-smi: no new sample from {}: {}\n", probe.backend(), failure);
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::optional<cohort_smi::Options> options;
    try {
        options = cohort_smi::parse_options(argc, argv);
    } catch (const cohort::Error& e) {
        fmt::print(stderr, "cohort-smi: {}\n", e.what());
        return 2;
    }
    if (!options) return 0;
    try {
        return run(*options);
    } catch (const cohort::Error& e) {
        std::fflush(stdout);
        fmt::print(stderr, "cohort-smi: {}\n", e.what());
        return 1;
    }
}
