// The nvidia-smi backend: every invocation runs under what is left of the
// caller's deadline and is killed past it (a hung GPU can leave nvidia-smi
// stuck for good), and its CSV is parsed field by field (gpu/smi/parse.hpp).
#include <cohort/error.hpp>
#include <cohort/gpu_probe.hpp>

#include "core/subprocess.hpp"
#include "gpu/smi/parse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

namespace cohort {
namespace {

using detail::RunResult;
namespace smi = detail::smi;

// Less than this left of the deadline is not worth starting nvidia-smi for:
// it takes 7 ms at best.
constexpr double min_useful_seconds = 0.005;

class SmiBackend final : public GpuBackend {
public:
    explicit SmiBackend(std::string command) : command_(std::move(command)) {}

    std::string name() const override { return "nvidia-smi"; }

    std::vector<GpuReading> read(double deadline_seconds) override {
        const auto start = std::chrono::steady_clock::now();
        auto left = [&] {
            return deadline_seconds - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        };
        std::vector<std::string> warnings;

        const RunResult gpu_run = run(
            {fmt::format("--query-gpu={}", smi::gpu_query_fields), "--format=csv,noheader,nounits"}, deadline_seconds);
        if (gpu_run.timed_out) throw Error(Errc::timeout, failure(gpu_run, deadline_seconds));
        smi::GpuTable table = smi::parse_gpu_query(gpu_run.stdout_text);
        warnings = std::move(table.warnings);
        if (!gpu_run.succeeded()) {
            // With one GPU lost, nvidia-smi still lists the others but exits
            // non-zero: keep what it could read.
            if (table.gpus.empty()) throw Error(Errc::unavailable, failure(gpu_run, deadline_seconds, "--query-gpu"));
            warnings.push_back(failure(gpu_run, deadline_seconds, "--query-gpu"));
        }
        std::vector<GpuReading> gpus = std::move(table.gpus);

        // MIG devices first: processes in a MIG instance may name its uuid.
        const bool any_mig = std::any_of(gpus.begin(), gpus.end(),
                                         [](const GpuReading& g) { return g.mig_enabled.ok() && g.mig_enabled.value; });
        if (any_mig) {
            if (const auto list = optional_run({"-L"}, left(), deadline_seconds, warnings))
                smi::attach_mig(gpus, smi::parse_gpu_list(list->stdout_text));
        }

        // Without the process list the GPUs are still worth returning; their
        // processes_state stays not_available.
        if (const auto apps = optional_run(
                {fmt::format("--query-compute-apps={}", smi::process_query_fields), "--format=csv,noheader,nounits"},
                left(), deadline_seconds, warnings)) {
            smi::ProcessTable processes = smi::parse_process_query(apps->stdout_text);
            warnings.insert(warnings.end(), processes.warnings.begin(), processes.warnings.end());
            smi::attach_processes(gpus, processes, warnings);
        }

        std::lock_guard lock(mutex_);
        warnings_ = std::move(warnings);
        return gpus;
    }

    // What the last read() could not parse or run, for diagnostics.
    std::vector<std::string> warnings() const {
        std::lock_guard lock(mutex_);
        return warnings_;
    }

    RunResult run(std::vector<std::string> args, double seconds) const {
        args.insert(args.begin(), command_);
        return detail::run_with_deadline(std::move(args), seconds);
    }

    // "nvidia-smi timed out after 2s (killed)", "nvidia-smi -L: exit status 9: NVIDIA-SMI has failed ..."
    std::string failure(const RunResult& r, double deadline_seconds, std::string_view what = {}) const {
        if (r.timed_out) return fmt::format("{} {}", command_, detail::describe_failure(r, deadline_seconds));
        return fmt::format("{}{}{}: {}", command_, what.empty() ? "" : " ", what,
                           detail::describe_failure(r, deadline_seconds));
    }

private:
    // A run whose failure costs only its part of the sample: a warning, and
    // no result.
    std::optional<RunResult> optional_run(std::vector<std::string> args, double seconds, double deadline_seconds,
                                          std::vector<std::string>& warnings) const {
        const std::string what = args.front().substr(0, args.front().find('='));
        if (seconds < min_useful_seconds) {
            warnings.push_back(fmt::format("{} {}: skipped, the {}s deadline was spent", command_, what,
                                           detail::format_seconds(deadline_seconds)));
            return std::nullopt;
        }
        RunResult r;
        try {
            r = run(std::move(args), seconds);
        } catch (const Error& e) {
            warnings.push_back(e.what());  // e.g. the command vanished since open
            return std::nullopt;
        }
        if (r.succeeded()) return r;
        warnings.push_back(failure(r, deadline_seconds, what));
        return std::nullopt;
    }

    std::string command_;
    mutable std::mutex mutex_;
    std::vector<std::string> warnings_;
};

}  // namespace

std::unique_ptr<GpuBackend> open_smi_backend(const ProbeOptions& options) {
    if (options.smi_command.empty()) throw Error(Errc::invalid_argument, "nvidia-smi backend: smi_command is empty");
    auto backend = std::make_unique<SmiBackend>(options.smi_command);
    // `-L` is the cheapest call that still needs the driver: if it fails, so
    // would every query, and the reason belongs in the backend choice.
    RunResult listed;
    try {
        listed = backend->run({"-L"}, options.deadline_seconds);
    } catch (const Error& e) {
        throw Error(e.code() == Errc::invalid_argument ? e.code() : Errc::unavailable, e.what());
    }
    if (!listed.succeeded()) throw Error(Errc::unavailable, backend->failure(listed, options.deadline_seconds, "-L"));
    return backend;
}

}  // namespace cohort
