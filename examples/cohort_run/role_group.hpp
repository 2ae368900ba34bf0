// cohort-run with several --role: one launcher per role, each this program
// started again with --coordinator and the role's own flags, so that each
// role's world, rounds, policy and restart budget are its own and one
// role's failures never reach another's (docs/training.md, "Role groups").
// This process hosts the coordinator under --standalone, passes signals on
// to the roles' launchers and exits with the group's status.
#pragma once

#include "events.hpp"
#include "options.hpp"

#include <cohort/coordinator.hpp>

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace cohort_run {

// The command line of the launcher of `role`: `self` (this program) with
// --coordinator `coordinator`, the role, its workers, its share of
// --min-workers (no more than the role can have), its checkpoint directory
// (`checkpoint_dir`/ROLE), the flags the group was given (Options::forward),
// --kill-worker when it names this role, and its program.
std::vector<std::string> role_launcher_argv(const Options& o, const RoleSpec& role, const std::string& self,
                                            const std::string& coordinator, const std::string& checkpoint_dir);

class RoleGroup {
public:
    explicit RoleGroup(Options options);
    ~RoleGroup();  // removes the run's checkpoint directory when it made it
    RoleGroup(const RoleGroup&) = delete;
    RoleGroup& operator=(const RoleGroup&) = delete;
    // The process's exit status: 0 when every role's launcher exited 0;
    // else the first failing one's status (the others are stopped); 128+N
    // when signal N stopped the group.
    int run();

private:
    struct Child {
        RoleSpec role;
        std::string job;
        pid_t pid = -1;
        bool running = false;
    };

    void connect();
    void make_checkpoint_dir();
    void start(Child& child, const std::string& self);
    // Reaps the launchers that exited; returns their roles' exit statuses.
    void reap();
    void signal_all(int signal);
    int finish(int status, const std::string& reason);

    Options o_;
    EventLog log_;
    std::unique_ptr<cohort::Coordinator> server_;
    std::string url_;
    std::string checkpoint_dir_;
    bool own_checkpoint_dir_ = false;
    std::vector<Child> children_;
    int stop_signal_ = 0;
    std::string failed_;  // the first role whose launcher failed
    int failed_status_ = 0;
    double stopping_since_ = -1;
};

}  // namespace cohort_run
