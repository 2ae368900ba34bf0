#include "options.hpp"

#include "../common/args.hpp"

#include <charconv>
#include <cstdio>
#include <string_view>

#include <fmt/format.h>

namespace cohort_plan {

namespace {

constexpr const char* kHelp = R"(usage: cohort-plan --cluster FILE --dataset FILE [options]

Prints the topology-aware rank order of a cluster and a plan assigning the
shards of a dataset to its ready nodes.

input:
  -c, --cluster FILE      cluster file, YAML or JSON (docs/formats.md)
  -d, --dataset FILE      dataset: "PATH BYTES [RECORDS]" lines, or YAML/JSON
      --locality FILE     locality map {NODE: {FILE: SCORE}}, YAML or JSON,
                          for --strategy locality

sharding:
  -s, --strategy NAME     round_robin, hash, locality or random (default hash)
      --shard-bytes SIZE  target shard size, e.g. 64MiB or 1GB (default 64MiB)
      --shards N          cut into exactly N shards instead
  -r, --replication N     distinct nodes per shard (default 1)
      --seed N            seed for hash and random (default 0)
      --load-slack X      hash: a node holds at most ceil(avg * (1 + X))
                          shards (default 0: loads exactly even)
      --remove ID[,ID..]  also replan as if these nodes left, and report how
                          many shards moved (may be repeated)

ranking:
      --roles LIST        comma-separated roles to rank and give shards to
                          (default worker,chief; also evaluator,
                          parameter_server, coordinator, all)

data advice (--advise; docs/data.md, "DataAdvisor"):
      --advise            also print the data advisor's advice for the plan:
                          prefetch depth, caching, high-locality nodes and,
                          per shard, the replica to read, prefetch, cache and
                          priority, each with its reason
      --style NAME        allreduce (default) or parameter_server
      --batch-size N      samples per batch on one node (required)
      --budget SIZE       memory per node for prefetch and cache, e.g. 8GiB
                          (required)
      --disk-budget SIZE  local disk per node for the cache (default: no limit)
      --sample-bytes SIZE bytes per sample (default: estimated from the
                          dataset's record counts)
      --epochs N          how often the data is read (default 1)
      --access NAME       sequential (default) or random
      --pattern GLOB      advise on the dataset files matching GLOB only (may
                          be repeated; * and ? within a path component, **
                          across /)
      --locality-threshold X
                          a node reading at least X of its bytes locally has
                          high locality (default 0.8)
      --measurements FILE JSON {"job": M, "nodes": {NODE: M}}, M with
                          data_wait_fraction (or data_wait and step_time),
                          prefetch_hit_rate, read_bytes_per_second,
                          samples_per_second

output:
      --json              one JSON document instead of tables
      --limit N           shard rows to print in tables (default 32, 0 = all)
  -h, --help              this help
      --version           print the version

Exit status: 0 on success, 1 for bad input (the message says what and where),
2 for bad usage.
)";

uint64_t parse_number(std::string_view flag, std::string_view text) {
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size())
        throw cohort::Error(cohort::Errc::invalid_argument, fmt::format("{}: expected a non-negative integer, got '{}'", flag, text));
    return value;
}

double parse_real(std::string_view flag, std::string_view text) {
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size())
        throw cohort::Error(cohort::Errc::invalid_argument, fmt::format("{}: expected a number, got '{}'", flag, text));
    return value;
}

std::vector<std::string> split_list(std::string_view text) {
    std::vector<std::string> out;
    while (!text.empty()) {
        const auto comma = text.find(',');
        const auto item = text.substr(0, comma);
        if (!item.empty()) out.emplace_back(item);
        if (comma == std::string_view::npos) break;
        text.remove_prefix(comma + 1);
    }
    return out;
}

cohort::RoleMask parse_roles(std::string_view text) {
    cohort::RoleMask mask = 0;
    for (const std::string& name : split_list(text)) {
        if (name == "all") {
            mask |= cohort::kAllRoles;
            continue;
        }
        auto role = cohort::parse_role(name);
        if (!role) {
            throw cohort::Error(cohort::Errc::invalid_argument,
                                fmt::format("--roles: unknown role '{}' (expected worker, chief, evaluator, "
                                            "parameter_server, coordinator or all)",
                                            name));
        }
        mask |= cohort::role_bit(*role);
    }
    if (mask == 0) throw cohort::Error(cohort::Errc::invalid_argument, "--roles: name at least one role");
    return mask;
}

}  // namespace

std::optional<Options> parse_options(int argc, char** argv) {
    Options options;
    bool bytes_given = false;
    std::string advice_flag;  // the last advisor flag given, for "needs --advise"
    cohort_examples::Args args(argc, argv);
    std::string_view arg;
    auto next = [&] { return args.value(); };
    while (args.next(arg)) {
        if (cohort_examples::Args::help_or_version(arg, kHelp, "cohort-plan")) {
            return std::nullopt;
        } else if (arg == "-c" || arg == "--cluster") {
            options.cluster = next();
        } else if (arg == "-d" || arg == "--dataset") {
            options.dataset = next();
        } else if (arg == "--locality") {
            options.locality_file = next();
        } else if (arg == "-s" || arg == "--strategy") {
            const std::string_view name = next();
            auto strategy = cohort::parse_strategy(name);
            if (!strategy || *strategy == cohort::Strategy::custom) {
                throw cohort::Error(cohort::Errc::invalid_argument,
                                    fmt::format("--strategy: unknown strategy '{}' (expected round_robin, hash, "
                                                "locality or random)",
                                                name));
            }
            options.plan.strategy = *strategy;
        } else if (arg == "--shard-bytes") {
            const std::string_view text = next();
            auto bytes = cohort::parse_size(text);
            if (!bytes || *bytes == 0)
                throw cohort::Error(cohort::Errc::invalid_argument, fmt::format("--shard-bytes: expected a positive size such as 64MiB, got '{}'", text));
            options.shard_bytes = *bytes;
            bytes_given = true;
        } else if (arg == "--shards") {
            options.shard_count = parse_number(arg, next());
            if (options.shard_count == 0) throw cohort::Error(cohort::Errc::invalid_argument, "--shards: must be at least 1");
        } else if (arg == "-r" || arg == "--replication") {
            const uint64_t r = parse_number(arg, next());
            if (r == 0 || r > 1024) throw cohort::Error(cohort::Errc::invalid_argument, fmt::format("--replication: must be in 1..1024, got {}", r));
            options.plan.replication = static_cast<uint32_t>(r);
        } else if (arg == "--seed") {
            options.plan.seed = parse_number(arg, next());
        } else if (arg == "--load-slack") {
            options.plan.load_slack = parse_real(arg, next());
            if (!(options.plan.load_slack >= 0 && options.plan.load_slack <= 100)) {
                throw cohort::Error(cohort::Errc::invalid_argument,
                                    fmt::format("--load-slack: must be in [0, 100], got {}", options.plan.load_slack));
            }
        } else if (arg == "--remove") {
            for (std::string& id : split_list(next())) options.remove.push_back(std::move(id));
        } else if (arg == "--roles") {
            options.roles = parse_roles(next());
        } else if (arg == "--advise") {
            options.advise = true;
        } else if (arg == "--style") {
            const std::string_view name = next();
            auto style = cohort::parse_collective_style(name);
            if (!style) {
                throw cohort::Error(cohort::Errc::invalid_argument,
                                    fmt::format("--style: unknown style '{}' (expected allreduce or parameter_server)", name));
            }
            options.advisor.style = *style;
            advice_flag = arg;
        } else if (arg == "--batch-size") {
            options.advisor.batch_size = parse_number(arg, next());
            if (options.advisor.batch_size == 0) throw cohort::Error(cohort::Errc::invalid_argument, "--batch-size: must be at least 1");
            advice_flag = arg;
        } else if (arg == "--budget" || arg == "--disk-budget" || arg == "--sample-bytes") {
            const std::string_view text = next();
            auto bytes = cohort::parse_size(text);
            if (!bytes || *bytes == 0) {
                throw cohort::Error(cohort::Errc::invalid_argument,
                                    fmt::format("{}: expected a positive size such as 8GiB, got '{}'", arg, text));
            }
            if (arg == "--budget") options.advisor.memory_budget_bytes = *bytes;
            else if (arg == "--disk-budget") options.advisor.disk_budget_bytes = *bytes;
            else options.advisor.sample_bytes = *bytes;
            advice_flag = arg;
        } else if (arg == "--epochs") {
            const uint64_t epochs = parse_number(arg, next());
            if (epochs == 0 || epochs > UINT32_MAX)
                throw cohort::Error(cohort::Errc::invalid_argument, fmt::format("--epochs: must be in 1..{}, got {}", UINT32_MAX, epochs));
            options.advisor.epochs = static_cast<uint32_t>(epochs);
            advice_flag = arg;
        } else if (arg == "--access") {
            const std::string_view name = next();
            if (name == "random") options.advisor.access = cohort::AccessPattern::random;
            else if (name == "sequential") options.advisor.access = cohort::AccessPattern::sequential;
            else
                throw cohort::Error(cohort::Errc::invalid_argument,
                                    fmt::format("--access: unknown access '{}' (expected sequential or random)", name));
            advice_flag = arg;
        } else if (arg == "--pattern") {
            options.advisor.patterns.emplace_back(next());
            if (options.advisor.patterns.back().empty())
                throw cohort::Error(cohort::Errc::invalid_argument, "--pattern: must not be empty");
            advice_flag = arg;
        } else if (arg == "--locality-threshold") {
            options.advisor.locality_threshold = parse_real(arg, next());
            if (!(options.advisor.locality_threshold > 0 && options.advisor.locality_threshold <= 1)) {
                throw cohort::Error(cohort::Errc::invalid_argument,
                                    fmt::format("--locality-threshold: must be in (0, 1], got {}",
                                                options.advisor.locality_threshold));
            }
            advice_flag = arg;
        } else if (arg == "--measurements") {
            options.measurements_file = next();
            advice_flag = arg;
        } else if (arg == "--json") {
            options.json = true;
        } else if (arg == "--limit") {
            options.limit = parse_number(arg, next());
        } else {
            throw cohort::Error(cohort::Errc::invalid_argument, fmt::format("unknown option '{}' (see --help)", args.current()));
        }
    }
    if (options.cluster.empty()) throw cohort::Error(cohort::Errc::invalid_argument, "--cluster FILE is required (see --help)");
    if (options.dataset.empty()) throw cohort::Error(cohort::Errc::invalid_argument, "--dataset FILE is required (see --help)");
    if (bytes_given && options.shard_count != 0)
        throw cohort::Error(cohort::Errc::invalid_argument, "give --shard-bytes or --shards, not both");
    if (!bytes_given && options.shard_count == 0) options.shard_bytes = uint64_t{64} << 20;
    if (options.plan.strategy == cohort::Strategy::locality && options.locality_file.empty())
        throw cohort::Error(cohort::Errc::invalid_argument, "--strategy locality needs --locality FILE");
    if (!advice_flag.empty() && !options.advise)
        throw cohort::Error(cohort::Errc::invalid_argument, fmt::format("{} needs --advise", advice_flag));
    if (options.advise && options.advisor.batch_size == 0)
        throw cohort::Error(cohort::Errc::invalid_argument, "--advise needs --batch-size N (samples per batch on one node)");
    if (options.advise && options.advisor.memory_budget_bytes == 0)
        throw cohort::Error(cohort::Errc::invalid_argument, "--advise needs --budget SIZE (memory per node for prefetch and cache)");
    return options;
}

}  // namespace cohort_plan
