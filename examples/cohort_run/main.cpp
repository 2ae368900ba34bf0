// cohort-run: a launcher like torchrun for cohort's elastic jobs. Starts
// the workers of one node, supervises them with the coordinator and the
// policy rule pack, and exits with the job's status (docs/training.md).
#include "launcher.hpp"
#include "options.hpp"
#include "role_group.hpp"
#include "signals.hpp"

#include <cohort/error.hpp>

#include <cstdio>

#include <fmt/format.h>

int main(int argc, char** argv) {
    std::optional<cohort_run::Options> options;
    try {
        options = cohort_run::parse(argc, argv);
        if (!options) return 0;
    } catch (const cohort::Error& e) {
        fmt::print(stderr, "cohort-run: {}\n", e.what());
        return 2;
    }
    cohort_run::signals::install();
    try {
        if (options->roles.size() > 1) {
            cohort_run::RoleGroup group(std::move(*options));
            return group.run();
        }
        cohort_run::Launcher launcher(std::move(*options));
        return launcher.run();
    } catch (const cohort::Error& e) {
        fmt::print(stderr, "cohort-run: {}\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        fmt::print(stderr, "cohort-run: {}\n", e.what());
        return 1;
    }
}
