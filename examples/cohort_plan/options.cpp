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
    return options;
}

}  // namespace cohort_plan
