#include "options.hpp"

#include "../common/args.hpp"

#include <cohort/cohort.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>

#include <fmt/format.h>

namespace cohort_smi {

namespace {

constexpr const char* kHelp = R"help(usage: cohort-smi [--backend SPEC] [--json] [--watch SECONDS [--count N]]
                  [--deadline SECONDS] [--nvml-library PATH] [--smi-command PATH]

Shows what each GPU is doing, one line per GPU as gpustat does: index, name,
temperature, utilisation, memory used / total, power draw / limit and the
compute processes as name/pid(memory). A value the GPU cannot report shows
as "n/s" (not supported), one it did not report this time as "-". Never
hangs: every query has a deadline, and a GPU that misses it is shown stale.

options:
  -b, --backend SPEC       where readings come from: auto (NVML, then
                           nvidia-smi, then none; the default), nvml, smi,
                           none, or file:PATH for simulated GPUs (docs/gpu.md)
      --json               print each sample as one line of JSON (the schema
                           of docs/gpu.md) instead of the table
  -w, --watch SECONDS      refresh every SECONDS until interrupted (Ctrl-C)
  -n, --count N            with --watch: stop after N samples
  -d, --deadline SECONDS   the most one query may take (default 2)
      --nvml-library PATH  the NVML library to load (default libnvidia-ml.so.1)
      --smi-command PATH   the nvidia-smi to run (default: nvidia-smi on PATH)
  -h, --help               this help
      --version            print the version

The first line names the backend in use; with auto, the next lines say why
each backend before it was passed over (with --json, on stderr).

Exit status: 0 on success, 1 when the backend cannot be used or a sample
failed (the message says why), 2 for bad usage.
)help";

[[noreturn]] void usage(std::string message) {
    throw cohort::Error(cohort::Errc::invalid_argument, std::move(message));
}

double parse_seconds(std::string_view flag, std::string_view text) {
    double seconds = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(seconds) || seconds <= 0)
        usage(fmt::format("{}: expected a positive number of seconds such as 2 or 0.5, got '{}'", flag, text));
    return seconds;
}

uint64_t parse_count(std::string_view flag, std::string_view text) {
    uint64_t count = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
    if (ec != std::errc() || end != text.data() + text.size() || count == 0)
        usage(fmt::format("{}: expected a positive whole number, got '{}'", flag, text));
    return count;
}

void check_backend(std::string_view spec) {
    if (spec == "auto" || spec == "nvml" || spec == "smi" || spec == "none") return;
    if (spec.starts_with("file:") && spec.size() > 5) return;
    usage(fmt::format("--backend: expected auto, nvml, smi, none or file:PATH, got '{}'", spec));
}

}  // namespace

std::optional<Options> parse_options(int argc, char** argv) {
    Options options;
    bool has_count = false;
    cohort_examples::Args args(argc, argv);
    std::string_view arg;
    auto next = [&] { return args.value(); };
    while (args.next(arg)) {
        if (cohort_examples::Args::help_or_version(arg, kHelp, "cohort-smi")) {
            return std::nullopt;
        } else if (arg == "-b" || arg == "--backend") {
            options.backend = next();
            check_backend(options.backend);
        } else if (arg == "--json") {
            options.json = true;
        } else if (arg == "-w" || arg == "--watch") {
            options.watch_seconds = parse_seconds(arg, next());
        } else if (arg == "-n" || arg == "--count") {
            options.count = parse_count(arg, next());
            has_count = true;
        } else if (arg == "-d" || arg == "--deadline") {
            options.deadline_seconds = parse_seconds(arg, next());
        } else if (arg == "--nvml-library") {
            options.nvml_library = next();
        } else if (arg == "--smi-command") {
            options.smi_command = next();
        } else if (arg.starts_with("-")) {
            usage(fmt::format("unknown option '{}' (see --help)", args.current()));
        } else {
            usage(fmt::format("unexpected argument '{}' (cohort-smi takes options only; see --help)", arg));
        }
    }
    if (has_count && options.watch_seconds == 0) usage("--count needs --watch SECONDS");
    return options;
}

}  // namespace cohort_smi
