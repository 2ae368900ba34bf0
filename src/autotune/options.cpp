// AutotuneOptions: the environment's defaults (the one place the autotuner
// reads it) and the checks of the options and parameters.
#include "autotune/tuner_checks.hpp"

#include "core/text.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>

namespace cohort {

const char* autotune_search_name(AutotuneSearch search) noexcept {
    switch (search) {
        case AutotuneSearch::coordinate: return "coordinate";
        case AutotuneSearch::bayesian: return "bayesian";
    }
    return "unknown";
}

AutotuneOptions with_env_defaults(AutotuneOptions options, const std::vector<std::string>& names) {
    auto env = [](const std::string& name) -> const char* {
        const char* v = std::getenv(name.c_str());
        return v != nullptr && *v != '\0' ? v : nullptr;
    };
    if (options.state_file.empty())
        if (const char* dir = env("COHORT_AUTOTUNE_DIR"))
            options.state_file = std::filesystem::path(dir) / (options.job_id + ".json");
    for (const auto& name : names) {
        if (options.fixed.count(name)) continue;
        std::string variable = "COHORT_AUTOTUNE_";
        for (char c : name) variable += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        const char* text = env(variable);
        if (text == nullptr) continue;
        const std::string_view value(text);
        double v = 0;
        if (const auto bytes = detail::parse_size(value)) {
            v = double(*bytes);
        } else {
            const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
            if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(v))
                throw Error(Errc::invalid_argument,
                            fmt::format("{}='{}': expected a number (sizes may end in K, M or G) to fix {} at; "
                                        "unset it to let the autotuner tune {}",
                                        variable, value, name, name));
        }
        options.fixed[name] = v;
    }
    return options;
}

namespace autotune {

void check_options(const AutotuneOptions& o) {
    auto bad = [](std::string what) { throw Error(Errc::invalid_argument, "autotune: " + what); };
    if (o.job_id.empty() || o.job_id.size() > 256 || o.job_id.find('/') != std::string::npos)
        bad(fmt::format("job_id '{}' must have 1 to 256 bytes and no '/'", o.job_id));
    if (o.warmup_steps < 0) bad(fmt::format("warmup_steps {} is negative", o.warmup_steps));
    if (o.settle_steps < 0) bad(fmt::format("settle_steps {} is negative", o.settle_steps));
    if (o.samples < 1) bad(fmt::format("samples {} must be at least 1", o.samples));
    if (o.max_steps < 1) bad(fmt::format("max_steps {} must be at least 1", o.max_steps));
    if (o.max_time.count() <= 0) bad(fmt::format("max_time {} ms must be positive", o.max_time.count()));
    if (o.passes < 1) bad(fmt::format("passes {} must be at least 1", o.passes));
    if (o.bayes_samples < 2 || o.bayes_samples > 200)
        bad(fmt::format("bayes_samples {} is outside 2..200", o.bayes_samples));
    if (!(o.min_gain >= 0 && o.min_gain < 1)) bad(fmt::format("min_gain {} is outside [0, 1)", o.min_gain));
    if (o.timeout.count() <= 0) bad(fmt::format("timeout {} ms must be positive", o.timeout.count()));
    if (o.search != AutotuneSearch::coordinate && o.search != AutotuneSearch::bayesian)
        bad(fmt::format("search {} is not a search (0 coordinate, 1 bayesian)", static_cast<int>(o.search)));
}

void check_parameters(std::vector<TunableParameter>& params, const AutotuneOptions& o) {
    auto bad = [](std::string what) { throw Error(Errc::invalid_argument, "autotune: " + what); };
    std::set<std::string> names;
    for (auto& p : params) {
        if (p.name.empty() || p.name.size() > 64) bad("a parameter's name must have 1 to 64 characters");
        for (char c : p.name)
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
                bad(fmt::format("parameter name '{}' may hold only letters, digits and '_'", p.name));
        if (!names.insert(p.name).second) bad(fmt::format("parameter '{}' is given twice", p.name));
        if (!p.apply) bad(fmt::format("parameter '{}' has no apply function", p.name));
        if (p.candidates.empty() || p.candidates.size() > 64)
            bad(fmt::format("parameter '{}' needs 1 to 64 candidates, not {}", p.name, p.candidates.size()));
        for (std::size_t i = 0; i < p.candidates.size(); ++i) {
            if (!std::isfinite(p.candidates[i]))
                bad(fmt::format("parameter '{}': candidate {} is not finite", p.name, i));
            if (i > 0 && !(p.candidates[i] > p.candidates[i - 1]))
                bad(fmt::format("parameter '{}': candidates must ascend, and {} follows {}", p.name,
                                p.candidates[i], p.candidates[i - 1]));
        }
        if (auto f = o.fixed.find(p.name); f != o.fixed.end()) {
            p.fixed = true;
            p.initial = f->second;
        }
        if (!std::isfinite(p.initial)) bad(fmt::format("parameter '{}': initial value is not finite", p.name));
        if (!p.fixed && index_of(p, p.initial) == kNone)
            bad(fmt::format("parameter '{}': initial value {} is not one of its candidates", p.name, p.initial));
    }
    for (const auto& [name, value] : o.fixed)
        if (!names.count(name)) {
            std::string known;
            for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
            bad(fmt::format("a value is fixed for '{}', which is not a parameter (parameters: {})", name, known));
        }
}

std::size_t index_of(const TunableParameter& p, double value) {
    for (std::size_t i = 0; i < p.candidates.size(); ++i)
        if (p.candidates[i] == value) return i;
    return kNone;
}

}  // namespace autotune
}  // namespace cohort
