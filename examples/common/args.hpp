// The command-line walk the example programs share: "--flag value",
// "--flag=value", short flags and positional arguments, with one message for
// a flag whose value is missing. Copy it along with the program you start from.
#pragma once

#include <cohort/error.hpp>
#include <cohort/version.hpp>

#include <cstdio>

#include <string_view>

#include <fmt/format.h>

namespace cohort_examples {

class Args {
public:
    Args(int argc, char** argv) : argc_(argc), argv_(argv) {}

    // Moves to the next argument; false past the last. A "--flag=value" comes
    // back as "--flag", its value kept for value().
    bool next(std::string_view& arg) {
        if (++index_ >= argc_) return false;
        arg = argv_[index_];
        has_inline_value_ = false;
        if (arg.starts_with("--")) {
            if (auto eq = arg.find('='); eq != std::string_view::npos) {
                inline_value_ = arg.substr(eq + 1);
                has_inline_value_ = true;
                arg = arg.substr(0, eq);
            }
        }
        flag_ = arg;
        return true;
    }

    // The current flag's value: after its '=', else the next argument.
    // Throws Error(invalid_argument) when there is none.
    std::string_view value() {
        if (has_inline_value_) return inline_value_;
        if (index_ + 1 >= argc_) {
            throw cohort::Error(cohort::Errc::invalid_argument, fmt::format("{} needs a value (see --help)", flag_));
        }
        return argv_[++index_];
    }

    // Prints the help or the version when `arg` asks for it; true if it did
    // (the program then exits 0).
    static bool help_or_version(std::string_view arg, const char* help, std::string_view program) {
        if (arg == "-h" || arg == "--help") {
            std::fputs(help, stdout);
            return true;
        }
        if (arg == "--version") {
            fmt::print("{} {}\n", program, cohort::kVersion);
            return true;
        }
        return false;
    }

    // The current argument as typed, for messages.
    const char* current() const { return argv_[index_]; }

private:
    int argc_;
    char** argv_;
    int index_ = 0;
    std::string_view flag_;
    std::string_view inline_value_;  // valid when has_inline_value_
    bool has_inline_value_ = false;
};

}  // namespace cohort_examples
