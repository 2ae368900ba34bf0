#include "options.hpp"

#include "../common/args.hpp"

#include <charconv>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

namespace cohort_train {

namespace {

constexpr const char* kHelp = R"(usage: cohort-train [options]

The end-to-end elastic training demo: linear regression on synthetic data,
one gradient-descent update per epoch from the gradients of every shard.
Workers lease shards from the coordinator, all-reduce their gradients and,
whenever the world changes, sync the training state, so every shard counts
exactly once per epoch whoever computed it and however many workers die.
Run under cohort-run, or by hand with COHORT_COORDINATOR (http://HOST:PORT;
a coordinator's replicas as HOST:PORT,HOST:PORT, or etcd://HOST:PORT/PREFIX
to find their leader through etcd), COHORT_JOB and COHORT_MEMBER set (also
read: COHORT_GENERATION, LOCAL_RANK, COHORT_RESTART_COUNT,
COHORT_CHECKPOINT_DIR).

model and data (every worker must give the same values):
      --epochs N            epochs (default 3)
      --shards N            shards per epoch (default 64)
      --rows-per-shard N    rows per shard (default 256)
      --features N          features, the length of w (default 16)
      --lr X                learning rate (default 0.5)
      --seed N              seed of the data (default 1)
      --noise X             noise of y, uniform in [-X, X) (default 0.01)
      --step-ms MS          simulated compute per shard (default 30)

modes and results:
      --reference           train in this process alone, without a
                            coordinator, and print the result
      --check, --no-check   at the end, rank 0 compares its weights with the
                            reference (default on): exit 3 when they differ
                            by more than 1e-9
      --weights-out FILE    write the final weights as JSON (rank 0)
      --checkpoint FILE     keep the training state in FILE after every step
                            and go on from it when restarted (default:
                            $COHORT_CHECKPOINT_DIR/cohort-train-LOCAL_RANK.ckpt
                            when cohort-run sets the directory; a file of
                            another job or other flags is ignored)

coordination:
      --register, --no-register
                            register the dataset plan (shards x epochs) with
                            the job (default on; registering the same plan
                            again is fine)
      --nodes MIN[:MAX]     create the job with these sizes if it does not
                            exist (default: it must exist)
      --report-dead, --no-report-dead
                            after a failed collective, tell the coordinator
                            which peers died (their connection closed without
                            a goodbye), so the next round does not wait
                            last_call for them (default on)
      --world-timeout S     the longest wait for a world (default 600)
      --collective-timeout S
                            the longest wait in one collective (default 60)

fault injection (first start only, the worker with that LOCAL_RANK):
      --slow LR:FACTOR      compute FACTOR times slower: a straggler
      --stall-at-step LR:STEP
                            stop before step STEP, process and heartbeats
                            alive: a hang (SIGTERM still ends it)
      --skip-collective LR:SEQ
                            never enter collective SEQ

  -h, --help                this help
      --version             print the version

Exit status: 0 when training finished (and the check passed), 1 on a
runtime error, 2 for bad usage or a missing variable, 3 when the check fails.
)";

[[noreturn]] void usage(std::string message) {
    throw cohort::Error(cohort::Errc::invalid_argument, std::move(message));
}

uint64_t parse_number(std::string_view flag, std::string_view text, uint64_t min, uint64_t max) {
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size())
        usage(fmt::format("{}: expected a non-negative integer, got '{}'", flag, text));
    if (value < min || value > max) usage(fmt::format("{}: must be in {}..{}, got {}", flag, min, max, value));
    return value;
}

double parse_real(std::string_view flag, std::string_view text) {
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
        usage(fmt::format("{}: expected a number, got '{}'", flag, text));
    return value;
}

double parse_positive(std::string_view flag, std::string_view text) {
    const double value = parse_real(flag, text);
    if (!(value > 0)) usage(fmt::format("{}: must be positive, got '{}'", flag, text));
    return value;
}

std::chrono::milliseconds parse_seconds(std::string_view flag, std::string_view text) {
    return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(parse_positive(flag, text) * 1000)));
}

// "LOCAL_RANK:VALUE".
Fault parse_fault(std::string_view flag, std::string_view text, bool integer) {
    const auto colon = text.find(':');
    if (colon == std::string_view::npos)
        usage(fmt::format("{}: expected LOCAL_RANK:{}, got '{}'", flag, integer ? "N" : "FACTOR", text));
    Fault fault;
    fault.local_rank = static_cast<uint32_t>(parse_number(flag, text.substr(0, colon), 0, UINT32_MAX));
    const std::string_view value = text.substr(colon + 1);
    fault.value =
        integer ? static_cast<double>(parse_number(flag, value, 1, uint64_t{1} << 52)) : parse_positive(flag, value);
    return fault;
}

}  // namespace

std::optional<Options> parse_options(int argc, char** argv) {
    Options o;
    DataConfig& data = o.model.data;
    cohort_examples::Args args(argc, argv);
    std::string_view arg;
    while (args.next(arg)) {
        if (cohort_examples::Args::help_or_version(arg, kHelp, "cohort-train")) {
            return std::nullopt;
        } else if (arg == "--epochs") {
            o.model.epochs = static_cast<uint32_t>(parse_number(arg, args.value(), 1, 100000));
        } else if (arg == "--shards") {
            data.shards = static_cast<uint32_t>(parse_number(arg, args.value(), 1, 1000000));
        } else if (arg == "--rows-per-shard") {
            data.rows_per_shard = static_cast<uint32_t>(parse_number(arg, args.value(), 1, 10000000));
        } else if (arg == "--features") {
            data.features = static_cast<uint32_t>(parse_number(arg, args.value(), 1, 100000));
        } else if (arg == "--lr") {
            o.model.lr = parse_positive(arg, args.value());
        } else if (arg == "--seed") {
            data.seed = parse_number(arg, args.value(), 0, UINT64_MAX);
        } else if (arg == "--noise") {
            data.noise = parse_real(arg, args.value());
            if (data.noise < 0) usage(fmt::format("--noise: must be at least 0, got {}", data.noise));
        } else if (arg == "--step-ms") {
            o.step_delay = std::chrono::milliseconds(parse_number(arg, args.value(), 0, 3600000));
        } else if (arg == "--reference") {
            o.reference = true;
        } else if (arg == "--check") {
            o.check = true;
        } else if (arg == "--no-check") {
            o.check = false;
        } else if (arg == "--weights-out") {
            o.weights_out = args.value();
            if (o.weights_out.empty()) usage("--weights-out: needs a file name");
        } else if (arg == "--checkpoint") {
            o.checkpoint = args.value();
            if (o.checkpoint.empty()) usage("--checkpoint: needs a file name");
        } else if (arg == "--register") {
            o.register_plan = true;
        } else if (arg == "--no-register") {
            o.register_plan = false;
        } else if (arg == "--nodes") {
            const std::string_view text = args.value();
            const auto colon = text.find(':');
            o.min_nodes = static_cast<uint32_t>(parse_number(arg, text.substr(0, colon), 1, 100000));
            o.max_nodes = colon == std::string_view::npos
                              ? o.min_nodes
                              : static_cast<uint32_t>(parse_number(arg, text.substr(colon + 1), 1, 100000));
            if (o.max_nodes < o.min_nodes)
                usage(fmt::format("--nodes: MAX {} is below MIN {}", o.max_nodes, o.min_nodes));
        } else if (arg == "--report-dead") {
            o.report_dead = true;
        } else if (arg == "--no-report-dead") {
            o.report_dead = false;
        } else if (arg == "--world-timeout") {
            o.world_timeout = parse_seconds(arg, args.value());
        } else if (arg == "--collective-timeout") {
            o.collective_timeout = parse_seconds(arg, args.value());
        } else if (arg == "--slow") {
            o.faults.slow = parse_fault(arg, args.value(), false);
        } else if (arg == "--stall-at-step") {
            o.faults.stall_at_step = parse_fault(arg, args.value(), true);
        } else if (arg == "--skip-collective") {
            o.faults.skip_collective = parse_fault(arg, args.value(), true);
        } else if (arg.starts_with("-")) {
            usage(fmt::format("unknown option '{}' (see --help)", args.current()));
        } else {
            usage(fmt::format("unexpected argument '{}' (cohort-train takes options only; see --help)", arg));
        }
    }
    return o;
}

}  // namespace cohort_train
