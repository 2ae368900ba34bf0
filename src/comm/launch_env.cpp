// Reads rank, world size and store from the variables a launcher sets
// (cohort's, torchrun's, Open MPI's, Slurm's) and checks they agree.
#include <cohort/error.hpp>
#include <cohort/launch_env.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace cohort {

namespace {

using Env = std::map<std::string, std::string>;

// One launcher's variables, in the order of precedence. A null name is a
// field that launcher does not give.
struct Source {
    const char* name;
    const char* rank;
    const char* world_size;
    const char* local_rank;
    const char* local_world_size;
    const char* node_rank;
    // Whether the world-size variable alone marks the launcher: not for
    // Slurm, whose SLURM_NTASKS is set in every salloc/sbatch shell.
    bool size_alone_counts;
};

constexpr Source kSources[] = {
    {"cohort", "COHORT_RANK", "COHORT_WORLD_SIZE", "COHORT_LOCAL_RANK", "COHORT_LOCAL_WORLD_SIZE", "COHORT_NODE_RANK",
     true},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", true},
    // OMPI_COMM_WORLD_NODE_RANK numbers processes on a node across jobs; it
    // is not a node index, and Open MPI gives none.
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", nullptr, true},
    // The local world size is read apart (SLURM_NTASKS_PER_NODE or
    // SLURM_TASKS_PER_NODE).
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr, "SLURM_NODEID", false},
};

// Every variable read, for a process environment copied into a map.
constexpr const char* kVariables[] = {
    "COHORT_RANK",
    "COHORT_WORLD_SIZE",
    "COHORT_LOCAL_RANK",
    "COHORT_LOCAL_WORLD_SIZE",
    "COHORT_NODE_RANK",
    "COHORT_STORE",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_USE_AGENT_STORE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
};

constexpr const char* kLookedFor =
    "COHORT_RANK/COHORT_WORLD_SIZE, RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE "
    "(mpirun), SLURM_PROCID/SLURM_NTASKS (srun)";

[[noreturn]] void bad(std::string message) {
    throw Error(Errc::invalid_argument, std::move(message));
}

// A variable's value; an empty one counts as unset.
std::optional<std::string> get(const Env& env, const char* name) {
    if (name == nullptr) return std::nullopt;
    const auto it = env.find(name);
    if (it == env.end() || it->second.empty()) return std::nullopt;
    return it->second;
}

// A non-negative decimal int from `text`, which came from variable `name`.
int parse_count(std::string_view name, std::string_view text) {
    const bool negative = !text.empty() && text.front() == '-';
    int value = 0;
    const char* first = text.data() + (negative ? 1 : 0);
    const char* last = text.data() + text.size();
    const auto [end, ec] = std::from_chars(first, last, value);
    if (first == last || end != last || (ec != std::errc() && ec != std::errc::result_out_of_range))
        bad(fmt::format("{}='{}' is not a number: it must be a non-negative integer", name, text));
    if (ec == std::errc::result_out_of_range)
        bad(fmt::format("{}={} is too large: it must fit in a 32-bit signed integer", name, text));
    if (negative) bad(fmt::format("{}={} is negative: it must be 0 or more", name, text));
    return value;
}

std::optional<int> read_count(const Env& env, const char* name) {
    if (const auto text = get(env, name)) return parse_count(name, *text);
    return std::nullopt;
}

// This node's entry of SLURM_TASKS_PER_NODE, a list like "2(x3),1": two
// tasks on each of the first three nodes, one on the fourth. The first
// entry when the node is unknown or past the list.
int tasks_on_node(const std::string& list, int node) {
    const auto malformed = [&] {
        bad(fmt::format("SLURM_TASKS_PER_NODE='{}' is malformed: expected counts like '2(x3),1'", list));
    };
    std::optional<int> first;
    int index = 0;
    std::size_t at = 0;
    while (at <= list.size()) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        const std::string item = list.substr(at, comma - at);
        const std::size_t paren = item.find('(');
        int repeat = 1;
        std::string count_text = item;
        if (paren != std::string::npos) {
            if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')') malformed();
            count_text = item.substr(0, paren);
            const std::string repeat_text = item.substr(paren + 2, item.size() - paren - 3);
            const auto [end, ec] = std::from_chars(repeat_text.data(), repeat_text.data() + repeat_text.size(), repeat);
            if (ec != std::errc() || end != repeat_text.data() + repeat_text.size() || repeat < 1) malformed();
        }
        int count = 0;
        const auto [end, ec] = std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
        if (count_text.empty() || ec != std::errc() || end != count_text.data() + count_text.size() || count < 1)
            malformed();
        if (!first) first = count;
        if (node >= index && node - index < repeat) return count;
        index += repeat;
        at = comma + 1;
    }
    return *first;
}

bool present(const Env& env, const Source& source) {
    return get(env, source.rank) || (source.size_alone_counts && get(env, source.world_size));
}

// Rank and world size, and the local fields the launcher gives, checked
// against each other.
void read_source(const Env& env, const Source& s, LaunchEnv& out) {
    const auto rank_text = get(env, s.rank);
    const auto size_text = get(env, s.world_size);
    if (!size_text) {
        bad(fmt::format("{}={} is set but {} is not: {} sets both; set {} too or unset {}", s.rank, *rank_text,
                        s.world_size, s.name, s.world_size, s.rank));
    }
    if (!rank_text) {
        bad(fmt::format("{}={} is set but {} is not: {} sets both; set {} too or unset {}", s.world_size, *size_text,
                        s.rank, s.name, s.rank, s.world_size));
    }
    out.source = s.name;
    out.rank = parse_count(s.rank, *rank_text);
    out.world_size = parse_count(s.world_size, *size_text);
    if (out.world_size < 1) bad(fmt::format("{}=0: a world has at least one rank", s.world_size));
    if (out.rank >= out.world_size)
        bad(fmt::format("{}={} is not below {}={} (ranks run 0..{})", s.rank, out.rank, s.world_size, out.world_size,
                        out.world_size - 1));
    out.notes.push_back(fmt::format("rank {} from {}", out.rank, s.rank));
    out.notes.push_back(fmt::format("world size {} from {}", out.world_size, s.world_size));

    const char* local_size_name = s.local_world_size;
    std::optional<int> local_size = read_count(env, s.local_world_size);
    std::optional<int> node = read_count(env, s.node_rank);
    if (std::string_view(s.name) == "slurm") {
        if ((local_size = read_count(env, "SLURM_NTASKS_PER_NODE"))) {
            local_size_name = "SLURM_NTASKS_PER_NODE";
        } else if (const auto list = get(env, "SLURM_TASKS_PER_NODE")) {
            local_size = tasks_on_node(*list, node.value_or(-1));
            local_size_name = "SLURM_TASKS_PER_NODE";
        }
    }
    if (const auto local = read_count(env, s.local_rank)) {
        if (*local >= out.world_size)
            bad(fmt::format("{}={} is not below {}={}", s.local_rank, *local, s.world_size, out.world_size));
        out.local_rank = *local;
        out.notes.push_back(fmt::format("local rank {} from {}", *local, s.local_rank));
    }
    if (local_size) {
        if (*local_size < 1 || *local_size > out.world_size)
            bad(fmt::format("{}={} is outside 1..{} ({}={})", local_size_name, *local_size, out.world_size,
                            s.world_size, out.world_size));
        if (out.local_rank >= *local_size)
            bad(fmt::format("{}={} is not below {}={}", s.local_rank, out.local_rank, local_size_name, *local_size));
        out.local_world_size = *local_size;
        out.notes.push_back(fmt::format("local world size {} from {}", *local_size, local_size_name));
    }
    if (node) {
        if (*node >= out.world_size)
            bad(fmt::format("{}={} is not below {}={} (there cannot be more nodes than ranks)", s.node_rank, *node,
                            s.world_size, out.world_size));
        out.node_rank = *node;
        out.notes.push_back(fmt::format("node rank {} from {}", *node, s.node_rank));
    } else if (s.node_rank == nullptr) {
        out.notes.push_back(fmt::format("node rank unknown: {} gives no node index", s.name));
    }
    if (out.world_size == 1) {  // one process: nothing to be unsure of
        out.local_rank = 0;
        out.local_world_size = 1;
        out.node_rank = 0;
    }
}

// COHORT_STORE, else tcp://MASTER_ADDR:MASTER_PORT, else none.
void read_store(const Env& env, LaunchEnv& out) {
    const auto addr = get(env, "MASTER_ADDR");
    const auto port_text = get(env, "MASTER_PORT");
    if (const auto store = get(env, "COHORT_STORE")) {
        out.store_url = *store;
        out.notes.push_back(fmt::format("store {} from COHORT_STORE", *store));
        if (addr || port_text) out.notes.push_back("ignored MASTER_ADDR/MASTER_PORT: COHORT_STORE comes first");
        return;
    }
    if (!addr && !port_text) return;
    if (!port_text) bad(fmt::format("MASTER_ADDR={} is set but MASTER_PORT is not: set both, or COHORT_STORE", *addr));
    if (!addr) bad(fmt::format("MASTER_PORT={} is set but MASTER_ADDR is not: set both, or COHORT_STORE", *port_text));
    const int port = parse_count("MASTER_PORT", *port_text);
    if (port < 1 || port > 65535) bad(fmt::format("MASTER_PORT={} is outside 1..65535", port));
    // An IPv6 address goes in brackets, as the tcp:// store expects.
    const bool bare_ipv6 = addr->find(':') != std::string::npos && addr->front() != '[';
    out.store_url = bare_ipv6 ? fmt::format("tcp://[{}]:{}", *addr, port) : fmt::format("tcp://{}:{}", *addr, port);
    out.notes.push_back(fmt::format("store {} from MASTER_ADDR/MASTER_PORT", out.store_url));
    if (const auto agent = get(env, "TORCHELASTIC_USE_AGENT_STORE"); agent && (*agent == "True" || *agent == "1"))
        out.notes.push_back(
            "TORCHELASTIC_USE_AGENT_STORE is set: torchrun's agent may already serve its own store on MASTER_PORT; "
            "if rank 0 cannot listen there, set COHORT_STORE to another port or a file:// folder");
}

Env process_env() {
    Env env;
    for (const char* name : kVariables)
        if (const char* value = std::getenv(name)) env.emplace(name, value);
    return env;
}

}  // namespace

LaunchEnv read_launch_env() {
    return read_launch_env(process_env());
}

LaunchEnv read_launch_env(const Env& env) {
    LaunchEnv out;
    const Source* chosen = nullptr;
    for (const Source& s : kSources) {
        if (!present(env, s)) continue;
        if (chosen == nullptr) {
            chosen = &s;
            read_source(env, s, out);
        } else {
            const auto rank = get(env, s.rank);
            out.notes.push_back(fmt::format("ignored {}={} ({}): {} comes first", rank ? s.rank : s.world_size,
                                            rank ? *rank : *get(env, s.world_size), s.name, chosen->rank));
        }
    }
    if (chosen == nullptr) {
        out.local_rank = 0;
        out.local_world_size = 1;
        out.node_rank = 0;
        out.notes.push_back(fmt::format("no launcher variables found (looked for {}): rank 0 of 1", kLookedFor));
    }
    read_store(env, out);
    return out;
}

Communicator communicator_from_env(CommOptions base) {
    return communicator_from_env(std::move(base), read_launch_env());
}

Communicator communicator_from_env(CommOptions base, const LaunchEnv& env) {
    if (env.source == "none" && (base.rank < 0 || base.size <= 0)) {
        throw Error(Errc::not_found,
                    fmt::format("no launcher variables found (looked for {}); start the "
                                "program with torchrun, mpirun or srun, or set COHORT_RANK and COHORT_WORLD_SIZE "
                                "(COHORT_RANK=0 COHORT_WORLD_SIZE=1 for a single process)",
                                kLookedFor));
    }
    if (base.rank < 0) base.rank = env.rank;
    if (base.size <= 0) base.size = env.world_size;
    if (base.store_url.empty() && !base.store) base.store_url = env.store_url;
    if (base.size > 1 && base.store_url.empty() && !base.store) {
        throw Error(Errc::invalid_argument,
                    fmt::format("rank {} of {} (from {}) needs a store where the ranks meet: "
                                "set COHORT_STORE=tcp://HOST:PORT (rank 0's host listens there) or "
                                "COHORT_STORE=file:///SHARED/DIR, or MASTER_ADDR and MASTER_PORT",
                                base.rank, base.size, env.source));
    }
    return Communicator(base);
}

}  // namespace cohort
