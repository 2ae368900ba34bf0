// open_store's coordinator:// scheme.
#pragma once

#include <cohort/store.hpp>

#include <memory>
#include <string_view>

namespace cohort::detail {

// rest: "HOST:PORT/JOB/GENERATION" (after "coordinator://").
std::shared_ptr<Store> open_coordinator_url(std::string_view url, std::string_view rest, const StoreOptions& options);

}  // namespace cohort::detail
