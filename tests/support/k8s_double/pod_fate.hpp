// What PodStore::set_fate writes into a pod: the status of each PodFate.
#pragma once

#include "pod_store.hpp"

#include <boost/json/object.hpp>

#include <string>

namespace cohort::k8s_double {

void apply_fate(boost::json::object& pod, PodFate fate, int exit_code, const std::string& reason);

}  // namespace cohort::k8s_double
