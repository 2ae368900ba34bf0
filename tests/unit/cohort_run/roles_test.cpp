// cohort-run's --role: one role for this launcher, a group of several, the
// command of each role, the command line of each role's launcher, and the
// messages for bad specs.
#include "options.hpp"
#include "role_group.hpp"
#include "role_spec.hpp"

#include <cohort/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

using Strings = std::vector<std::string>;

std::optional<cohort_run::Options> parse(Strings args, Strings program = {"/bin/true"}) {
    Strings all = {"cohort-run"};
    all.insert(all.end(), args.begin(), args.end());
    if (!program.empty()) {
        all.emplace_back("--");
        all.insert(all.end(), program.begin(), program.end());
    }
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    return cohort_run::parse(static_cast<int>(argv.size()), argv.data());
}

std::string error_of(Strings args, Strings program = {"/bin/true"}) {
    try {
        parse(std::move(args), std::move(program));
    } catch (const cohort::Error& e) {
        EXPECT_EQ(e.code(), cohort::Errc::invalid_argument);
        return e.what();
    }
    return "(no error)";
}

bool has(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

TEST(CohortRunRoles, NoRoleIsTheDefault) {
    const auto o = parse({"--standalone"});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->role, "");
    EXPECT_TRUE(o->roles.empty());
}

TEST(CohortRunRoles, OneRoleNamesThisLaunchersWorkers) {
    auto o = parse({"--standalone", "--role", "evaluator", "--nproc-per-node", "3"});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->role, "evaluator");
    EXPECT_EQ(o->nproc_per_node, 3);
    EXPECT_TRUE(o->roles.empty());
    // With its count and its command: the program after "--" is not needed.
    o = parse({"--standalone", "--role=ps:2:python3 ps.py --port 7"}, {});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->role, "ps");
    EXPECT_EQ(o->nproc_per_node, 2);
    EXPECT_EQ(o->program, (Strings{"python3", "ps.py", "--port", "7"}));
}

TEST(CohortRunRoles, SeveralRolesMakeAGroup) {
    const auto o =
        parse({"--standalone", "--job", "j", "--role", "worker:2", "--role", "evaluator:1:sh -c 'echo $ROLE_NAME'",
               "--max-restarts", "5", "-q", "--kill-worker", "evaluator:0@1.5", "--events=ev.jsonl"},
              {"python3", "train.py"});
    ASSERT_TRUE(o);
    ASSERT_EQ(o->roles.size(), 2u);
    EXPECT_EQ(o->roles[0].name, "worker");
    EXPECT_EQ(o->roles[0].nproc, 2);
    EXPECT_TRUE(o->roles[0].command.empty());
    EXPECT_EQ(o->roles[1].command, (Strings{"sh", "-c", "echo $ROLE_NAME"}));
    EXPECT_EQ(o->kill_role, "evaluator");
    // Only the flags the roles share travel on: not the coordinator's, the
    // counts, the kill, nor the roles.
    EXPECT_EQ(o->forward, (Strings{"--job", "j", "--max-restarts", "5", "-q", "--events", "ev.jsonl"}));

    const Strings worker =
        cohort_run::role_launcher_argv(*o, o->roles[0], "/bin/cohort-run", "http://127.0.0.1:5", "/tmp/c");
    EXPECT_EQ(worker, (Strings{"/bin/cohort-run",
                               "--coordinator",
                               "http://127.0.0.1:5",
                               "--role",
                               "worker",
                               "--nproc-per-node",
                               "2",
                               "--min-workers",
                               "1",
                               "--checkpoint-dir",
                               "/tmp/c/worker",
                               "--role-group-child",
                               "--job",
                               "j",
                               "--max-restarts",
                               "5",
                               "-q",
                               "--events",
                               "ev.jsonl",
                               "--",
                               "python3",
                               "train.py"}));
    const Strings evaluator = cohort_run::role_launcher_argv(*o, o->roles[1], "/bin/cohort-run", "u", "");
    EXPECT_EQ(evaluator.back(), "echo $ROLE_NAME");
    EXPECT_NE(std::find(evaluator.begin(), evaluator.end(), "0@1.5"), evaluator.end());
    EXPECT_EQ(std::find(evaluator.begin(), evaluator.end(), "--checkpoint-dir"), evaluator.end());
    EXPECT_EQ(std::find(worker.begin(), worker.end(), "--kill-worker"), worker.end());
}

TEST(CohortRunRoles, EachRolesMinimumIsAtMostWhatItCanHave) {
    const auto o = parse(
        {"--coordinator", "c:1", "--nnodes", "2", "--min-workers", "6", "--role", "worker:4", "--role", "evaluator:1"});
    ASSERT_TRUE(o);
    const auto min_of = [&](const cohort_run::RoleSpec& r) {
        const Strings a = cohort_run::role_launcher_argv(*o, r, "x", "c:1", "");
        return *(std::find(a.begin(), a.end(), "--min-workers") + 1);
    };
    EXPECT_EQ(min_of(o->roles[0]), "6");
    EXPECT_EQ(min_of(o->roles[1]), "2");
}

TEST(CohortRunRoles, BadSpecsAreNamed) {
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "a.b"}), "--role 'a.b': 'a.b' is not a role name"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", ""}), "is not a role name"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "w:0"}), "--role 'w:0': '0' is not a number of workers"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "w:x"}), "'x' is not a number of workers"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "w:1:"}), "the command after NAME:NPROC: is empty"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "w:1:sh -c 'x"}), "a ' at offset 6 is never closed"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "w:2", "--role", "e"}),
                    "--role e: with several roles each needs its workers"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "w:2", "--role", "w:1"}), "--role w: given twice"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "default:2", "--role", "worker:1"}),
                    "--role default and --role worker are both the default role"));
    EXPECT_TRUE(has(error_of({"--standalone", "--nproc-per-node", "2", "--role", "w:2", "--role", "e:1"}),
                    "--nproc-per-node: with several --role"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "w:2", "--role", "e:1"}, {}), "--role w:2: no program for it"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "w:2", "--role", "e:1", "--kill-worker", "0@1"}),
                    "--kill-worker: with several roles say which"));
    EXPECT_TRUE(
        has(error_of({"--standalone", "--role", "w:2", "--role", "e:1", "--kill-worker", "x:0@1"}), "('x' is none)"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "w:2", "--role", "e:1", "--kill-worker", "e:1@1"}),
                    "local rank 1 but role e has only 1 workers"));
    EXPECT_TRUE(
        has(error_of({"--standalone", "--role", "e", "--kill-worker", "w:0@1"}), "this launcher's role is 'e'"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "e:2", "--nproc-per-node", "3"}), "disagree"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "e:2:true"}), "a command and a program after '--'"));
    EXPECT_TRUE(has(error_of({"--standalone", "--role", "w:2", "--role", "e:1", "--role-group-child"}),
                    "--role-group-child: one --role only"));
}

TEST(CohortRunRoles, AGroupUnderSlurmNeedsARunningCoordinator) {
    EXPECT_TRUE(has(error_of({"--standalone", "--scheduler", "slurm", "--role", "w:2", "--role", "e:1"}),
                    "needs a coordinator every node reaches"));
    const auto o = parse({"--coordinator", "c:1", "--scheduler", "slurm", "--role", "w:2", "--role", "e:1"});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->forward, (Strings{"--scheduler", "slurm"}));
}

TEST(CohortRunRoles, CommandsSplitAsAShellWould) {
    using cohort_run::split_command;
    EXPECT_EQ(split_command("  a  b\tc ", "x"), (Strings{"a", "b", "c"}));
    EXPECT_EQ(split_command(R"(py -c 'print("a b")' "x \"y\" \\z" c\ d '')", "x"),
              (Strings{"py", "-c", "print(\"a b\")", "x \"y\" \\z", "c d", ""}));
    EXPECT_TRUE(split_command("", "x").empty());
    try {
        split_command("a \"b", "--role 'e'");
        FAIL() << "no error";
    } catch (const cohort::Error& e) {
        EXPECT_TRUE(has(e.what(), "--role 'e': a \" at offset 2 is never closed")) << e.what();
    }
    EXPECT_THROW(split_command("a\\", "x"), cohort::Error);
}

TEST(CohortRunRoles, PlacesOfOtherRolesAreNamedByTheRole) {
    EXPECT_EQ(cohort_run::place_name("h1", "", 2), "h1-2");
    EXPECT_EQ(cohort_run::place_name("h1", "worker", 0), "h1-0");
    EXPECT_EQ(cohort_run::place_name("h1", "evaluator", 0), "h1-evaluator-0");
}

}  // namespace
