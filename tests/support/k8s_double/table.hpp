// Server-side printing: the meta.k8s.io/v1 Table that kubectl asks for
// (Accept: application/json;as=Table;v=v1;g=meta.k8s.io) with the columns
// the real API server prints for pods.
#pragma once

#include <boost/json/object.hpp>

#include <string>
#include <vector>

namespace cohort::k8s_double {

enum class RowObject { none, metadata, object };  // the includeObject parameter

// True when an Accept header asks for a Table.
bool wants_table(const std::string& accept);
RowObject row_object(const std::string& include_object);
boost::json::object pod_table(const std::vector<boost::json::object>& pods, const std::string& resource_version,
                              RowObject include);

}  // namespace cohort::k8s_double
