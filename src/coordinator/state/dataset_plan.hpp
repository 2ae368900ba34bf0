// A job's dataset plan: the shards members take turns to process, epoch
// after epoch. Shards may name the hosts that hold their data; a member on
// one of those hosts is offered them first.
#pragma once

#include <cohort/error.hpp>
#include <cohort/sharding.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord {

struct ShardSpec {
    std::string id;
    uint64_t bytes = 0;
    std::vector<std::string> hosts;  // where its data lives; empty: anywhere

    bool operator==(const ShardSpec&) const = default;
};

struct DatasetPlan {
    std::vector<ShardSpec> shards;
    uint32_t epochs = 1;
    // Each epoch hands shards out in cohort::epoch_permutation(n, seed,
    // epoch) order when shuffled, else in list order.
    bool shuffle = false;
    uint64_t seed = 0;
    double lease_duration = 300.0;  // seconds a member has to report a shard done

    bool operator==(const DatasetPlan&) const = default;
};

// Error(invalid_argument) "dataset plan: ..." for no shards, an empty or
// repeated id, no epochs or a lease duration that is not positive.
void validate(const DatasetPlan& plan);

boost::json::object to_json(const DatasetPlan& plan);
// Validated; Error(code) for unknown fields and wrong types.
DatasetPlan plan_from_json(const boost::json::value& value, Errc code = Errc::invalid_argument);

// The sharding module's plan as a dataset plan: shard i has id "i", its
// bytes, and the hosts of its replicas (primary first) as its placement.
DatasetPlan plan_from_shard_plan(const ShardPlan& plan, uint32_t epochs = 1);

}  // namespace cohort::coord
