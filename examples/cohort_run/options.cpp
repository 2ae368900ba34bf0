#include "options.hpp"

#include "../common/args.hpp"

#include <cohort/error.hpp>
#include <cohort/role_group.hpp>

#include <algorithm>
#include <map>
#include <optional>

#include <charconv>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

namespace cohort_run {
namespace {

using cohort::Errc;
using cohort::Error;

constexpr const char* kHelp = R"help(usage: cohort-run [options] -- PROGRAM [ARGS...]
       cohort-run [options] --role NAME:NPROC[:COMMAND] --role ... [-- PROGRAM [ARGS...]]

Starts PROGRAM as --nproc-per-node workers of an elastic training job,
supervises them and carries out the job's policy: a worker that dies is
reported to the coordinator at once and relaunched within the budget, a
straggler is replaced, a hang restarts the workers (docs/training.md).
Prints a line per event and a progress line; exits with the job's status.

options:
      --nproc-per-node N      workers this launcher starts (default 1)
      --nnodes MIN[:MAX]      launchers the job may span; the job admits up to
                              MAX x N workers (default 1)
      --min-workers N         the smallest world the job trains with (default 1)
      --standalone            host the coordinator in this process
      --port P                the standalone coordinator's port (default: any)
      --host ADDR             the standalone coordinator's address (default
                              127.0.0.1; 0.0.0.0 lets launchers on other
                              machines join: set COHORT_COORDINATOR_TOKEN)
      --data-dir DIR          the standalone coordinator's durable state
      --tls-cert PEM, --tls-key PEM
                              the standalone coordinator serves HTTPS with
                              this certificate (valid for 127.0.0.1, where
                              the workers reach it); the launcher and its
                              workers check it against the CA in
                              COHORT_COORDINATOR_CACERT
      --tls-client-ca PEM     and requires client certificates this CA
                              signed (COHORT_COORDINATOR_CERT and _KEY)
      --coordinator HOST:PORT a running coordinator (several cohort-run with
                              one coordinator act as several nodes); its
                              replicas as HOST:PORT,HOST:PORT, or
                              etcd://HOST:PORT[,HOST:PORT]/PREFIX[?OPTIONS]
                              to find their leader through etcd (the
                              replicas' --etcd and --etcd-prefix); the
                              launcher and its workers follow the leader
      --job NAME              the job (default "cohort")
      --node-id ID            this launcher's name; workers are ID-0, ID-1, ...
                              (default: the host name)
      --max-restarts N        relaunches in all, and per worker; with --restart
                              all, restarts of the whole group (default 3)
      --restart MODE          survivors: a failed worker is relaunched and the
                              others go on (default); all: as torchrun, any
                              failure in the job stops every worker, on every
                              launcher, and starts them again in a new world
                              with fresh RANK, WORLD_SIZE and MASTER_PORT (for
                              torch scripts that use init_method="env://")
      --master-addr ADDR      MASTER_ADDR when a worker of this launcher gets
                              rank 0 in a job of several launchers (default:
                              this machine's address on the route to the
                              coordinator; 127.0.0.1 when it is local)
      --rules FILE            the policy rule pack (default: rules/elastic.yaml;
                              with --restart all, one that restarts the group
                              on a failure or a hang)
      --last-call S           job setting (default 3)
      --heartbeat-interval S  job setting (default 1)
      --failure-timeout S     job setting (default 5)
      --straggler-threshold X health setting (default 0.7)
      --straggler-for S       health setting (default 30)
      --hang-timeout S        health setting (default 300)
      --checkpoint-dir DIR    where workers keep their checkpoints, given to them
                              as $COHORT_CHECKPOINT_DIR (default: a new
                              directory in $TMPDIR, removed at exit)
      --grace S               SIGTERM to SIGKILL when stopping workers (default 10)
      --relaunch-delay S      wait this long before relaunching a failed worker,
                              so one that fails as it starts cannot spin (default 1)
      --kill-worker [ROLE:]R@S
                              demos and tests: SIGKILL local worker R (of
                              role ROLE) once, S seconds after the start
      --role NAME             the workers' role (ROLE_NAME; default
                              "default"): a role other than default or
                              worker is a world of its own, job JOB.NAME
      --role NAME:NPROC[:COMMAND]
                              given twice or more: a group of roles, each
                              NPROC workers per node in a world of its own
                              (its own RANK, WORLD_SIZE, MASTER_PORT,
                              rounds and restart budget) running COMMAND
                              (split as a shell would, no expansions) or
                              the program after --; e.g. --role worker:4
                              --role 'evaluator:1:python3 eval.py'
      --role-group-child      set by a group of roles for each role's cohort-run:
                              it appends to --events and draws no status row
      --progress S            a progress line every S seconds (default 2; 0: none)
      --scheduler KIND        where the workers run (docs/schedulers.md):
                              local (default), processes on this machine;
                              slurm, inside an sbatch or salloc allocation:
                              --nproc-per-node job steps (srun) on each of its
                              nodes, relaunched on a node that is not lost;
                              --standalone then listens on 0.0.0.0 unless
                              --host says otherwise, and the workers reach it
                              at this node's address (--master-addr
                              overrides); kubernetes, one pod per worker
      --worker-coordinator URL  the coordinator's address as the workers see it
                              (default: the one this launcher uses; with
                              kubernetes, the coordinator's Service, e.g.
                              http://cohort-coordinator:29400)
      --pending-timeout S     kubernetes: a pod Pending (Unschedulable, image
                              not pulled) longer than this is given up and the
                              job goes on without it (default 300)
      --k8s-kubeconfig FILE   kubernetes: the cluster (default: $KUBECONFIG,
                              else the pod's service account, else
                              ~/.kube/config)
      --k8s-context NAME      kubernetes: the kubeconfig's context (default:
                              its current-context)
      --k8s-namespace NS      kubernetes: the pods' namespace (default: the
                              context's or the service account's)
      --k8s-pod-template FILE kubernetes: a Pod manifest or pod spec (YAML or
                              JSON) the workers' pods are made from
      --k8s-image IMAGE       kubernetes: the image, when the template has none
      --k8s-master-port P     kubernetes: MASTER_PORT, on which rank 0's pod
                              listens (default 29500); MASTER_ADDR is that
                              pod's IP
      --k8s-owner-pod NAME    kubernetes: the pods' owner (this launcher's pod,
                              so deleting it deletes the workers)
      --events FILE           also write each event as a JSON line to FILE
      --srun-arg ARG          --scheduler slurm: one more srun option for every
                              worker step, e.g. --srun-arg=--gpus-per-task=1
  -q, --quiet                 no event lines on stdout
  -h, --help                  this text
      --version               the version

exit status: 0 every worker finished; 1 the job failed; 2 bad flags;
128+N stopped by signal N (SIGINT 130, SIGTERM 143).
)help";

template <typename T>
T number(std::string_view flag, std::string_view text, T low, T high) {
    T value{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    bool ok = ec == std::errc() && end == text.data() + text.size() && value >= low && value <= high;
    if constexpr (std::is_floating_point_v<T>) ok = ok && std::isfinite(value);
    if (!ok) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: '{}' is not a number from {} to {}", flag, text, low, high));
    }
    return value;
}

double seconds(std::string_view flag, std::string_view text) { return number<double>(flag, text, 0.0, 1e9); }

SchedulerKind scheduler_kind(std::string_view v) {
    if (v == "local") return SchedulerKind::local;
    if (v == "slurm") return SchedulerKind::slurm;
    if (v == "kubernetes") return SchedulerKind::kubernetes;
    throw Error(Errc::invalid_argument,
                fmt::format("--scheduler: '{}' is not a scheduler; say 'local' (processes on this machine, the "
                            "default), 'slurm' (job steps in this Slurm allocation) or 'kubernetes' (pods)",
                            v));
}

// Flags a group's launcher settles for each role's launcher, or keeps for
// itself (the coordinator it hosts).
bool decided_per_role(std::string_view flag) {
    for (const char* own : {"--standalone", "--port", "--host", "--data-dir", "--tls-cert", "--tls-key",
                            "--tls-client-ca", "--coordinator", "--role", "--nproc-per-node", "--min-workers",
                            "--kill-worker", "--checkpoint-dir", "--role-group-child"}) {
        if (flag == own) return true;
    }
    return false;
}

// --role: one names this launcher's role (and with NPROC and COMMAND its
// workers and program); two or more make a group, one launcher per role.
void check_roles(Options& o, bool nproc_given) {
    if (o.roles.size() == 1) {
        RoleSpec& r = o.roles.front();
        o.role = r.name;
        if (r.nproc > 0) {
            if (nproc_given && r.nproc != o.nproc_per_node) {
                throw Error(Errc::invalid_argument,
                            fmt::format("--role {}:{} and --nproc-per-node {} disagree; give the count once", r.name,
                                        r.nproc, o.nproc_per_node));
            }
            o.nproc_per_node = r.nproc;
        }
        if (!r.command.empty()) {
            if (!o.program.empty()) {
                throw Error(
                    Errc::invalid_argument,
                    fmt::format("--role {}: a command and a program after '--': give the program once", r.name));
            }
            o.program = r.command;
        }
        o.roles.clear();
    }
    if (!o.kill_role.empty() && o.roles.empty() && o.kill_role != cohort::role_name(o.role)) {
        throw Error(Errc::invalid_argument, fmt::format("--kill-worker {}:...: this launcher's role is '{}'",
                                                        o.kill_role, cohort::role_name(o.role)));
    }
    if (o.roles.empty()) return;
    if (o.role_group_child)
        throw Error(Errc::invalid_argument, "--role-group-child: one --role only (it is set for a group's role)");
    if (nproc_given) {
        throw Error(Errc::invalid_argument,
                    "--nproc-per-node: with several --role each role gives its own count (--role NAME:NPROC)");
    }
    std::map<std::string, std::string> jobs;  // job -> role
    for (const RoleSpec& r : o.roles) {
        if (r.nproc == 0) {
            throw Error(Errc::invalid_argument,
                        fmt::format("--role {}: with several roles each needs its workers: --role {}:NPROC[:COMMAND]",
                                    r.name, r.name));
        }
        if (r.command.empty() && o.program.empty()) {
            throw Error(Errc::invalid_argument,
                        fmt::format("--role {}:{}: no program for it: give one after '--', or --role "
                                    "{}:{}:COMMAND",
                                    r.name, r.nproc, r.name, r.nproc));
        }
        const std::string job = cohort::role_job(o.job, r.name);
        if (const auto [it, fresh] = jobs.emplace(job, r.name); !fresh) {
            throw Error(Errc::invalid_argument,
                        it->second == r.name
                            ? fmt::format("--role {}: given twice", r.name)
                            : fmt::format("--role {} and --role {} are both the default role (job '{}'); rename one",
                                          it->second, r.name, job));
        }
    }
    if (o.kill_rank) {
        const auto it =
            std::find_if(o.roles.begin(), o.roles.end(), [&](const RoleSpec& r) { return r.name == o.kill_role; });
        if (o.kill_role.empty() || it == o.roles.end()) {
            throw Error(Errc::invalid_argument,
                        fmt::format("--kill-worker: with several roles say which: ROLE:LOCAL_RANK@SECONDS, ROLE one "
                                    "of the --role names{}",
                                    o.kill_role.empty() ? "" : fmt::format(" ('{}' is none)", o.kill_role)));
        }
        if (*o.kill_rank >= it->nproc) {
            throw Error(Errc::invalid_argument, fmt::format("--kill-worker: local rank {} but role {} has only {} "
                                                            "workers",
                                                            *o.kill_rank, it->name, it->nproc));
        }
    }
    if (o.scheduler == SchedulerKind::slurm && o.standalone) {
        throw Error(Errc::invalid_argument,
                    "--role: a group of roles under --scheduler slurm needs a coordinator every node reaches: run "
                    "cohort-coordinator and give --coordinator");
    }
}

}  // namespace

std::optional<Options> parse(int argc, char** argv) {
    // Everything after "--" is the program's, untouched.
    int split = argc;
    for (int i = 1; i < argc; ++i) {
        if (std::string_view(argv[i]) == "--") {
            split = i;
            break;
        }
    }
    Options o;
    cohort_examples::Args args(split, argv);
    std::string_view arg;
    // What each flag took, for the launchers of a group's roles (Options::forward).
    std::optional<std::string> taken;
    const auto take = [&]() -> std::string_view {
        taken = std::string(args.value());
        return *taken;
    };
    bool nproc_given = false;
    while (args.next(arg)) {
        if (cohort_examples::Args::help_or_version(arg, kHelp, "cohort-run")) return std::nullopt;
        taken.reset();
        if (arg == "--nproc-per-node") {
            o.nproc_per_node = number<int>(arg, take(), 1, 1024);
            nproc_given = true;
        } else if (arg == "--nnodes") {
            const std::string_view v = take();
            const auto colon = v.find(':');
            o.nnodes_min = number<int>(arg, v.substr(0, colon), 1, 100000);
            o.nnodes_max = colon == std::string_view::npos ? o.nnodes_min
                                                           : number<int>(arg, v.substr(colon + 1), o.nnodes_min, 100000);
        } else if (arg == "--min-workers") {
            o.min_workers = number<int>(arg, take(), 1, 1000000);
        } else if (arg == "--standalone") {
            o.standalone = true;
        } else if (arg == "--port") {
            o.port = number<uint16_t>(arg, take(), 0, 65535);
        } else if (arg == "--host") {
            o.host = take();
            o.host_given = true;
            if (o.host.empty()) throw Error(Errc::invalid_argument, "--host: needs an address");
        } else if (arg == "--data-dir") {
            o.data_dir = take();
        } else if (arg == "--tls-cert") {
            o.tls_cert = take();
        } else if (arg == "--tls-key") {
            o.tls_key = take();
        } else if (arg == "--tls-client-ca") {
            o.tls_client_ca = take();
        } else if (arg == "--coordinator") {
            o.coordinator = take();
        } else if (arg == "--job") {
            o.job = take();
        } else if (arg == "--node-id") {
            o.node_id = take();
        } else if (arg == "--max-restarts") {
            o.max_restarts = number<int>(arg, take(), 0, 1000000);
        } else if (arg == "--restart") {
            const std::string_view v = take();
            if (v == "survivors") {
                o.restart = RestartMode::survivors;
            } else if (v == "all") {
                o.restart = RestartMode::all;
            } else {
                throw Error(Errc::invalid_argument,
                            fmt::format("--restart: '{}' is not a mode; say 'survivors' (the default: relaunch the "
                                        "failed worker) or 'all' (restart every worker, as torchrun does)",
                                        v));
            }
        } else if (arg == "--master-addr") {
            o.master_addr = take();
            if (o.master_addr.empty() ||
                o.master_addr.find_first_of(" \t\n/") != std::string::npos) {
                throw Error(Errc::invalid_argument,
                            fmt::format("--master-addr: '{}' is not a host name or an IP address", o.master_addr));
            }
        } else if (arg == "--rules") {
            o.rules = take();
        } else if (arg == "--last-call") {
            o.last_call = seconds(arg, take());
        } else if (arg == "--heartbeat-interval") {
            o.heartbeat_interval = seconds(arg, take());
        } else if (arg == "--failure-timeout") {
            o.failure_timeout = seconds(arg, take());
        } else if (arg == "--straggler-threshold") {
            o.straggler_threshold = number<double>(arg, take(), 0.0, 1.0);
        } else if (arg == "--straggler-for") {
            o.straggler_for = seconds(arg, take());
        } else if (arg == "--hang-timeout") {
            o.hang_timeout = seconds(arg, take());
        } else if (arg == "--relaunch-delay") {
            o.relaunch_delay = seconds(arg, take());
        } else if (arg == "--checkpoint-dir") {
            o.checkpoint_dir = take();
            if (o.checkpoint_dir.empty()) throw Error(Errc::invalid_argument, "--checkpoint-dir: needs a directory");
        } else if (arg == "--grace") {
            o.grace = seconds(arg, take());
        } else if (arg == "--kill-worker") {
            std::string_view v = take();
            const auto at = v.find('@');
            if (at == std::string_view::npos) {
                throw Error(Errc::invalid_argument,
                            fmt::format("--kill-worker: '{}' is not [ROLE:]LOCAL_RANK@SECONDS", v));
            }
            if (const auto colon = v.find(':'); colon < at) {
                o.kill_role = std::string(v.substr(0, colon));
                cohort::check_role_name(o.kill_role, "--kill-worker");
                v = v.substr(colon + 1);
            }
            o.kill_rank = number<int>(arg, v.substr(0, v.find('@')), 0, 1023);
            o.kill_after = seconds(arg, v.substr(v.find('@') + 1));
        } else if (arg == "--role") {
            o.roles.push_back(parse_role_spec(take()));
        } else if (arg == "--role-group-child") {
            o.role_group_child = true;
        } else if (arg == "--progress") {
            o.progress = seconds(arg, take());
        } else if (arg == "--events") {
            o.events_file = take();
        } else if (arg == "--scheduler") {
            o.scheduler = scheduler_kind(take());
        } else if (arg == "--srun-arg") {
            o.srun_args.emplace_back(take());
        } else if (arg == "--worker-coordinator") {
            o.worker_coordinator = take();
            if (o.worker_coordinator.rfind("http://", 0) != 0 && o.worker_coordinator.rfind("https://", 0) != 0 &&
                o.worker_coordinator.rfind("etcd://", 0) != 0)
                throw Error(Errc::invalid_argument,
                            fmt::format("--worker-coordinator: '{}' is not a URL (http://HOST:PORT, a list "
                                        "http://HOST:PORT,http://HOST:PORT or etcd://HOST:PORT/PREFIX)",
                                        o.worker_coordinator));
        } else if (arg == "--pending-timeout") {
            o.pending_timeout = number<double>(arg, take(), 0.001, 1e9);
        } else if (arg == "--k8s-kubeconfig") {
            o.k8s_kubeconfig = take();
        } else if (arg == "--k8s-context") {
            o.k8s_context = take();
        } else if (arg == "--k8s-namespace") {
            o.k8s_namespace = take();
        } else if (arg == "--k8s-pod-template") {
            o.k8s_pod_template = take();
        } else if (arg == "--k8s-image") {
            o.k8s_image = take();
        } else if (arg == "--k8s-owner-pod") {
            o.k8s_owner_pod = take();
        } else if (arg == "--k8s-master-port") {
            o.k8s_master_port = number<uint16_t>(arg, take(), 1, 65535);
        } else if (arg == "-q" || arg == "--quiet") {
            o.quiet = true;
        } else {
            throw Error(Errc::invalid_argument,
                        fmt::format("unknown option '{}' (the program to run goes after '--'; see --help)", arg));
        }
        if (!decided_per_role(arg)) {
            o.forward.emplace_back(arg);
            if (taken) o.forward.push_back(*taken);
        }
    }
    for (int i = split + 1; i < argc; ++i) o.program.emplace_back(argv[i]);
    check_roles(o, nproc_given);
    if (o.program.empty() && o.roles.empty()) {
        throw Error(Errc::invalid_argument, "no program to run: cohort-run [options] -- PROGRAM [ARGS...]");
    }
    if (o.standalone == !o.coordinator.empty()) {
        throw Error(Errc::invalid_argument, "say where the coordinator is: --standalone or --coordinator HOST:PORT");
    }
    if ((o.port != 0 || !o.data_dir.empty() || o.host != "127.0.0.1") && !o.standalone) {
        throw Error(Errc::invalid_argument, "--port, --host and --data-dir are for --standalone");
    }
    if ((!o.tls_cert.empty() || !o.tls_key.empty() || !o.tls_client_ca.empty()) && !o.standalone) {
        throw Error(Errc::invalid_argument,
                    "--tls-cert, --tls-key and --tls-client-ca are for --standalone; a launcher of a running "
                    "coordinator finds its CA and its own certificate in COHORT_COORDINATOR_CACERT, _CERT and _KEY");
    }
    if (o.kill_rank && o.roles.size() < 2 && *o.kill_rank >= o.nproc_per_node) {
        throw Error(Errc::invalid_argument, fmt::format("--kill-worker: local rank {} but only {} workers",
                                                        *o.kill_rank, o.nproc_per_node));
    }
    if (o.kill_rank && o.scheduler != SchedulerKind::local) {
        throw Error(Errc::invalid_argument,
                    o.scheduler == SchedulerKind::slurm
                        ? "--kill-worker is for --scheduler local (under Slurm, kill the task on its node)"
                        : "--kill-worker: only with --scheduler local (a pod has no pid here)");
    }
    if (o.scheduler == SchedulerKind::slurm) {
        if (o.standalone && !o.host_given) o.host = "0.0.0.0";  // the workers are on other nodes
    } else if (!o.srun_args.empty()) {
        throw Error(Errc::invalid_argument, "--srun-arg is for --scheduler slurm");
    }
    if (o.scheduler == SchedulerKind::kubernetes && o.restart == RestartMode::all) {
        throw Error(Errc::invalid_argument, "--restart all: not with --scheduler kubernetes yet; use survivors");
    }
    if (o.heartbeat_interval <= 0 || o.failure_timeout <= 0) {
        throw Error(Errc::invalid_argument, "--heartbeat-interval and --failure-timeout must be more than 0");
    }
    return o;
}

}  // namespace cohort_run
