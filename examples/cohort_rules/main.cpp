// cohort-rules: validate rule files, evaluate them with given values and
// explain a rule's condition. A starting point to copy: everything here uses
// the public C++ API.
#include "options.hpp"
#include "report.hpp"

#include <cohort/cohort.hpp>

#include <algorithm>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

namespace {

// A --set value the rules cannot take: bad usage, exit status 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// " (did you mean 'x'?)" when a known name is a likely typo of `name`.
std::string suggestion(std::string_view name, std::span<const std::string> known) {
    const std::string* best = nullptr;
    size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
    for (const std::string& candidate : known) {
        const size_t d = edit_distance(name, candidate);
        if (d < best_distance) {
            best = &candidate;
            best_distance = d;
        }
    }
    return best ? fmt::format(" (did you mean '{}'?)", *best) : std::string();
}

int check(const cohort_rules::Options& options) {
    int status = 0;
    for (const std::string& file : options.files) {
        try {
            const cohort::RuleSet rules = cohort::RuleSet::from_file(file);
            cohort_rules::print_check(file, rules);
            if (options.strict && !rules.warnings().empty()) {
                fmt::print(stderr, "cohort-rules: {}: {} warning{} (--strict)\n", file, rules.warnings().size(),
                           rules.warnings().size() == 1 ? "" : "s");
                status = 1;
            }
        } catch (const cohort::Error& e) {
            std::fflush(stdout);
            fmt::print(stderr, "cohort-rules: {}\n", e.what());
            status = 1;
        }
    }
    return status;
}

// Loads the one file of eval or explain into an engine that accepts every
// action type, and sets the --set values. A bad value is a usage error
// (exit 2); an unknown name only a warning.
cohort::Context prepare(const cohort_rules::Options& options, cohort::RuleEngine& engine) {
    engine.load(options.files.front());
    cohort::Context context = engine.context();
    for (const auto& [name, text] : options.sets) {
        if (!engine.symbols()->find(name)) {
            fmt::print(stderr, "cohort-rules: warning: --set {}: no rule uses a variable '{}'{}\n", name, name,
                       suggestion(name, engine.symbols()->names()));
            continue;
        }
        try {
            context.set(name, cohort::Value::parse(text));
        } catch (const cohort::Error& e) {
            throw UsageError(fmt::format("--set {}={}: {}", name, text, e.what()));
        }
    }
    return context;
}

int run(const cohort_rules::Options& options) {
    if (options.command == cohort_rules::Command::check) return check(options);
    cohort::RuleEngine engine(cohort::EngineOptions{.allow_unhandled_actions = true});
    cohort::Context context = prepare(options, engine);
    if (options.command == cohort_rules::Command::eval) {
        for (size_t i = 0; i < options.times.size(); ++i) {
            if (i > 0 && !options.json) fmt::print("\n");
            const cohort::Evaluation evaluation = engine.evaluate(context, options.times[i]);
            cohort_rules::States states;
            for (const cohort::Rule& rule : engine.rules()->rules())
                states.emplace_back(rule.id, engine.state(rule.id));
            cohort_rules::print_evaluation(evaluation, options.times[i], states, options.json);
        }
        return 0;
    }
    const auto steps = engine.explain(options.rule, context);  // Error(not_found) for an unknown rule
    const auto& rules = engine.rules()->rules();
    const auto rule =
        std::find_if(rules.begin(), rules.end(), [&](const cohort::Rule& r) { return r.id == options.rule; });
    cohort_rules::print_explain(*rule, steps, options.json);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::optional<cohort_rules::Options> options;
    try {
        options = cohort_rules::parse_options(argc, argv);
    } catch (const cohort::Error& e) {
        fmt::print(stderr, "cohort-rules: {}\n", e.what());
        return 2;
    }
    if (!options) return 0;
    try {
        return run(*options);
    } catch (const UsageError& e) {
        fmt::print(stderr, "cohort-rules: {}\n", e.what());
        return 2;
    } catch (const cohort::Error& e) {
        fmt::print(stderr, "cohort-rules: {}\n", e.what());
        return 1;
    }
}
