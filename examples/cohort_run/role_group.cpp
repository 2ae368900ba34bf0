#include "role_group.hpp"

#include "signals.hpp"

#include <cohort/coordinator_client.hpp>
#include <cohort/error.hpp>
#include <cohort/role_group.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

namespace cohort_run {
namespace {

namespace json = boost::json;
using cohort::Errc;
using cohort::Error;

std::string self_path() {
    std::error_code ec;
    const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw Error(Errc::io, fmt::format("cannot find this program (/proc/self/exe): {}", ec.message()));
    return path.string();
}

std::string status_text(int status) {
    if (WIFEXITED(status)) return fmt::format("exit {}", WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
    return fmt::format("status {}", status);
}

// A launcher's end as an exit status of this one: its own, or 128+N.
int exit_code(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

}  // namespace

std::vector<std::string> role_launcher_argv(const Options& o, const RoleSpec& role, const std::string& self,
                                            const std::string& coordinator, const std::string& checkpoint_dir) {
    std::vector<std::string> argv = {
        self, "--coordinator", coordinator, "--role", role.name, "--nproc-per-node", std::to_string(role.nproc)};
    // A role smaller than --min-workers could never form its world.
    const int most = role.nproc * o.nnodes_max;
    argv.insert(argv.end(), {"--min-workers", std::to_string(std::min(o.min_workers, most))});
    if (!checkpoint_dir.empty()) argv.insert(argv.end(), {"--checkpoint-dir", checkpoint_dir + "/" + role.name});
    argv.emplace_back("--role-group-child");
    argv.insert(argv.end(), o.forward.begin(), o.forward.end());
    if (o.kill_rank && o.kill_role == role.name) {
        argv.insert(argv.end(), {"--kill-worker", fmt::format("{}@{:g}", *o.kill_rank, o.kill_after)});
    }
    argv.emplace_back("--");
    const std::vector<std::string>& program = role.command.empty() ? o.program : role.command;
    argv.insert(argv.end(), program.begin(), program.end());
    return argv;
}

RoleGroup::RoleGroup(Options options) : o_(std::move(options)), log_(o_.events_file, o_.quiet, {}, EventsFile::group) {
    for (const RoleSpec& r : o_.roles) children_.push_back(Child{r, cohort::role_job(o_.job, r.name)});
}

RoleGroup::~RoleGroup() {
    if (own_checkpoint_dir_) {
        std::error_code ignored;
        std::filesystem::remove_all(checkpoint_dir_, ignored);
    }
}

void RoleGroup::connect() {
    if (!o_.standalone) {
        url_ = o_.coordinator;  // as given: each role's launcher checks and follows it
        return;
    }
    cohort::CoordinatorOptions co;
    co.host = o_.host;
    co.port = o_.port;
    co.data_dir = o_.data_dir;
    co.tls_cert_file = o_.tls_cert;
    co.tls_key_file = o_.tls_key;
    co.tls_client_ca_file = o_.tls_client_ca;
    server_ = std::make_unique<cohort::Coordinator>(co);
    // The roles' launchers run here: a wildcard address is reached through loopback.
    const bool wildcard = o_.host == "0.0.0.0" || o_.host == "::" || o_.host == "[::]";
    url_ = wildcard ? fmt::format("{}://127.0.0.1:{}", o_.tls_cert.empty() ? "http" : "https", server_->port())
                    : server_->url();
    json::object f;
    f["url"] = url_;
    f["standalone"] = true;
    log_.emit("coordinator", std::move(f),
              fmt::format("coordinator {} (in this process, listening on {}), job '{}' with {} roles", url_, o_.host,
                          o_.job, children_.size()));
}

// One directory for the run, a subdirectory per role: programs that keep
// their state there (cohort-train) never meet another role's files, and an
// evaluator finds the workers' checkpoints next to its own.
void RoleGroup::make_checkpoint_dir() {
    if (!o_.checkpoint_dir.empty()) {
        checkpoint_dir_ = o_.checkpoint_dir;
        return;  // each role's launcher creates its subdirectory
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = fmt::format("{}/cohort-run-XXXXXX", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
    if (::mkdtemp(pattern.data()) == nullptr) {
        throw Error(Errc::io, fmt::format("cannot create a checkpoint directory '{}': {} (set TMPDIR, or give "
                                          "--checkpoint-dir)",
                                          pattern, std::strerror(errno)));
    }
    checkpoint_dir_ = pattern;
    own_checkpoint_dir_ = true;
}

void RoleGroup::start(Child& child, const std::string& self) {
    const std::vector<std::string> args = role_launcher_argv(o_, child.role, self, url_, checkpoint_dir_);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0)
        throw Error(Errc::io,
                    fmt::format("cannot start role {}'s launcher: fork: {}", child.role.name, std::strerror(errno)));
    if (pid == 0) {
        // Between fork and exec only async-signal-safe calls: the
        // coordinator's threads run in the parent. A group of its own, so
        // that a terminal's Ctrl-C reaches the group's launcher alone, which
        // passes it on once; killed with it, so that no role outlives it.
        ::setpgid(0, 0);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(1);
        ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    child.pid = pid;
    child.running = true;
    json::object f;
    f["role"] = child.role.name;
    f["job"] = child.job;
    f["nproc"] = child.role.nproc;
    f["pid"] = pid;
    log_.emit("role_started", std::move(f),
              fmt::format("role {}: {} workers per node in job '{}' (launcher pid {})", child.role.name,
                          child.role.nproc, child.job, pid));
}

void RoleGroup::signal_all(int signal) {
    for (const Child& c : children_) {
        if (c.running) ::kill(c.pid, signal);
    }
}

void RoleGroup::reap() {
    for (Child& c : children_) {
        if (!c.running) continue;
        int status = 0;
        const pid_t got = ::waitpid(c.pid, &status, WNOHANG);
        if (got != c.pid) continue;
        c.running = false;
        const int code = exit_code(status);
        json::object f;
        f["role"] = c.role.name;
        f["job"] = c.job;
        f["exit_code"] = code;
        log_.emit("role_exited", std::move(f),
                  fmt::format("role {}: its launcher ended ({})", c.role.name, status_text(status)));
        if (code == 0 || stop_signal_ != 0 || !failed_.empty()) continue;
        // A role that failed for good fails the job: the others are stopped
        // as a signal would stop them.
        failed_ = c.role.name;
        failed_status_ = code;
        stopping_since_ = log_.now();
        log_.say(fmt::format("role {} failed ({}); stopping the other roles", c.role.name, status_text(status)));
        signal_all(SIGTERM);
    }
}

int RoleGroup::finish(int status, const std::string& reason) {
    json::object f;
    f["exit_code"] = status;
    f["reason"] = reason;
    log_.emit("done", std::move(f), fmt::format("done: {} (exit {})", reason, status));
    return status;
}

int RoleGroup::run() {
    try {
        connect();
        make_checkpoint_dir();
        const std::string self = self_path();
        for (Child& c : children_) start(c, self);
    } catch (...) {
        signal_all(SIGKILL);
        for (Child& c : children_) {
            if (c.running) ::waitpid(c.pid, nullptr, 0);
        }
        throw;
    }
    for (;;) {
        if (const int sig = signals::take()) {
            if (stop_signal_ == 0) {
                stop_signal_ = sig;
                stopping_since_ = log_.now();
                json::object f;
                f["signal"] = sig;
                log_.emit("signal", std::move(f), fmt::format("{}: stopping every role", strsignal(sig)));
            }
            signal_all(sig);  // a second one: no more grace there either
        }
        reap();
        if (std::none_of(children_.begin(), children_.end(), [](const Child& c) { return c.running; })) break;
        // Each launcher stops its workers within --grace; one that does not
        // by then and a margin is stuck, and must not hang the group.
        if (stopping_since_ >= 0 && log_.now() > stopping_since_ + o_.grace + 30) signal_all(SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (stop_signal_ != 0) return finish(128 + stop_signal_, fmt::format("stopped by {}", strsignal(stop_signal_)));
    if (!failed_.empty()) {
        return finish(failed_status_,
                      fmt::format("role {} failed (exit {}); the other roles were stopped", failed_, failed_status_));
    }
    return finish(0, "every role finished");
}

}  // namespace cohort_run
