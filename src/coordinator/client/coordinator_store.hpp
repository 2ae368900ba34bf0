// open_store's coordinator:// and coordinator+etcd:// schemes.
#pragma once

#include <cohort/store.hpp>

#include <memory>
#include <string_view>

namespace cohort::detail {

// rest: "HOST:PORT[,HOST:PORT...]/JOB/GENERATION" (after "coordinator://").
std::shared_ptr<Store> open_coordinator_url(std::string_view url, std::string_view rest, const StoreOptions& options);
// rest: "ETCD:PORT[,...][/PREFIX]/JOB/GENERATION[?OPTIONS]" (after
// "coordinator+etcd://"): the replicas' leader found through etcd.
std::shared_ptr<Store> open_coordinator_etcd_url(std::string_view url, std::string_view rest,
                                                 const StoreOptions& options);

}  // namespace cohort::detail
