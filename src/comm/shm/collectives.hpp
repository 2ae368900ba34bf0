// The collectives over a host's shared memory. Each rank copies its data
// into its own slot once, reads the other ranks' slots in place, and copies
// results out; messages larger than a slot go through in chunks, which also
// keeps the slots in cache. Ranks are the group's local ranks.
#pragma once

#include "comm/algorithms/algorithms.hpp"
#include "comm/shm/group.hpp"

namespace cohort::comm::shm {

// Every rank of the group ends with the reduction of all ranks' `r.in` in
// `r.out`, bit for bit the same bytes: each element is reduced in rank
// order by one rank. `finish` false leaves avg as a sum (a hierarchical
// all-reduce divides once, at its end).
void allreduce(Group& group, Engine& engine, const Reduction& r, bool finish = true);
// The local rank `root`'s `bytes` bytes end in every rank's `data`.
void broadcast(Group& group, Engine& engine, std::byte* data, std::size_t bytes, int root);
void allgather(Group& group, Engine& engine, const std::byte* in, std::byte* out, std::size_t bytes);
void reduce_scatter(Group& group, Engine& engine, const Reduction& r);
void barrier(Group& group, Engine& engine);

// The hierarchical all-reduce with shared memory inside this host: the
// host's ranks reduce in the segment, the hosts' first ranks run a ring over
// the network, and each hands the result to its host through the segment.
void allreduce_hierarchical(Group& group, Engine& engine, const std::vector<std::string>& hosts, const Reduction& r);

}  // namespace cohort::comm::shm
