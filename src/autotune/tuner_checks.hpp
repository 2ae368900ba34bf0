// The autotuner's argument checks, shared by its files.
#pragma once

#include <cohort/autotune.hpp>
#include <cohort/error.hpp>

#include <cstddef>
#include <limits>
#include <vector>

namespace cohort::autotune {

inline constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// Error(invalid_argument) "autotune: ..." naming the first bad option.
void check_options(const AutotuneOptions& options);
// The same for the parameters; marks those `options.fixed` names as fixed
// at its value.
void check_parameters(std::vector<TunableParameter>& params, const AutotuneOptions& options);
// Where `value` is among p's candidates, or kNone.
std::size_t index_of(const TunableParameter& p, double value);

}  // namespace cohort::autotune
