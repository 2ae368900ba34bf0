#include "options.hpp"

#include "../common/args.hpp"

#include <cohort/cohort.hpp>

#include <cmath>
#include <cstdio>
#include <string_view>

#include <fmt/format.h>

namespace cohort_rules {

namespace {

constexpr const char* kHelp = R"help(usage: cohort-rules check FILE... [--strict]
       cohort-rules eval FILE [--set NAME=VALUE]... [--at SECONDS]... [--json]
       cohort-rules explain FILE RULE [--set NAME=VALUE]... [--json]

Validates rule files and shows what their rules do with given values
(docs/rules.md describes the file schema and the condition language).

commands:
  check FILE...          load each file (includes, templates, macros, every
                         condition compiled): prints "FILE: ok (N rules)" and
                         any warnings, or the error with file:line:column
  eval FILE              evaluate every rule with the --set values, as an
                         engine that accepts every action type would: prints
                         the rules that fire in priority order with their
                         actions and parameters, state changes and errors
  explain FILE RULE      the value of every sub-expression of RULE's
                         condition, indented by depth, to show why it holds
                         or not

options:
  -s, --set NAME=VALUE   a variable's value: true/false, 42, 0.5, 100MB
                         (bytes), 30s (seconds), 'quoted' or text; repeat for
                         each variable. A name no rule uses is a warning.
      --at SECONDS       eval: the time of the evaluation (default 0; 90s and
                         5m work too); repeat to evaluate several times in
                         order with the same values, to see `for`,
                         `keep_firing_for` and `cooldown` at work
      --json             eval: one JSON object per evaluation and line:
                         {"time", "fired", "events", "errors", "states"};
                         explain: a JSON array of {"text", "value", "depth"}
      --strict           check: treat warnings as errors
  -h, --help             this help
      --version          print the version

Exit status: 0 on success, 1 for a file that does not load or a rule that
does not exist (the message says what and where), 2 for bad usage.
)help";

[[noreturn]] void usage(std::string message) {
    throw cohort::Error(cohort::Errc::invalid_argument, std::move(message));
}

double parse_time(std::string_view text) {
    const cohort::Value value = cohort::Value::parse(text);
    const auto type = value.type();
    if (type != cohort::Type::integer && type != cohort::Type::number)
        usage(fmt::format("--at: expected seconds such as 30, 2.5 or 5m, got '{}'", text));
    const double seconds = value.as_number();
    if (!std::isfinite(seconds)) usage(fmt::format("--at: expected a finite time, got '{}'", text));
    return seconds;
}

}  // namespace

std::optional<Options> parse_options(int argc, char** argv) {
    Options options;
    std::vector<std::string> positional;
    bool any_set = false;
    cohort_examples::Args args(argc, argv);
    std::string_view arg;
    auto next = [&] { return args.value(); };
    while (args.next(arg)) {
        if (cohort_examples::Args::help_or_version(arg, kHelp, "cohort-rules")) {
            return std::nullopt;
        } else if (arg == "-s" || arg == "--set") {
            const std::string_view assignment = next();
            const auto eq = assignment.find('=');
            if (eq == std::string_view::npos || eq == 0)
                usage(fmt::format("--set: expected NAME=VALUE, got '{}'", assignment));
            options.sets.emplace_back(assignment.substr(0, eq), assignment.substr(eq + 1));
            any_set = true;
        } else if (arg == "--at") {
            const double t = parse_time(next());
            if (!options.times.empty() && t < options.times.back())
                usage(fmt::format("--at: times must not go backwards ({} after {})", t, options.times.back()));
            options.times.push_back(t);
        } else if (arg == "--json") {
            options.json = true;
        } else if (arg == "--strict") {
            options.strict = true;
        } else if (arg.size() > 1 && arg.starts_with("-")) {
            usage(fmt::format("unknown option '{}' (see --help)", args.current()));
        } else {
            positional.emplace_back(arg);
        }
    }
    if (positional.empty()) usage("name a command: check, eval or explain (see --help)");
    const std::string command = positional.front();
    positional.erase(positional.begin());
    if (command == "check") {
        options.command = Command::check;
        if (positional.empty()) usage("check: name at least one FILE");
        if (any_set || !options.times.empty() || options.json) usage("check takes no --set, --at or --json");
    } else if (command == "eval") {
        options.command = Command::eval;
        if (positional.size() != 1) usage("eval: name exactly one FILE (see --help)");
        if (options.strict) usage("--strict applies to check only");
    } else if (command == "explain") {
        options.command = Command::explain;
        if (positional.size() != 2) usage("explain: name one FILE and one RULE (see --help)");
        if (options.strict || !options.times.empty()) usage("explain takes no --at or --strict");
        options.rule = positional.back();
        positional.pop_back();
    } else {
        usage(fmt::format("unknown command '{}' (expected check, eval or explain)", command));
    }
    options.files = std::move(positional);
    if (options.times.empty()) options.times.push_back(0);
    return options;
}

}  // namespace cohort_rules
