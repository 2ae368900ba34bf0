// Slurm's compressed host lists ($SLURM_JOB_NODELIST, "host[0-2,5],gpu07"),
// expanded to node names: the scheduler places each worker on one node.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail {

// "host[0-2,05],login" -> host0 host1 host2 host05 login, in order, each
// once. A range keeps the width of its first bound ("n[08-11]": n08 ... n11);
// several bracket groups multiply ("r[1-2]n[1-2]": r1n1 r1n2 r2n1 r2n2).
// Throws Error(parse) naming the list and the place for an unbalanced
// bracket, an empty name, a range that runs backwards or a list that would
// expand to more than 100000 names.
std::vector<std::string> expand_hostlist(std::string_view list);

}  // namespace cohort::detail
