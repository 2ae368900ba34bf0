// How a file or string is written, for the loaders of clusters, datasets and
// locality maps.
#pragma once

#include <cstdint>

namespace cohort {

// automatic: from the extension of a file, else from the text itself.
enum class Format : int32_t { automatic = 0, yaml = 1, json = 2, listing = 3 };

}  // namespace cohort
