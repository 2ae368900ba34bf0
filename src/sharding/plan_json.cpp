#include "core/json_text.hpp"
#include "sharding/plan_builder.hpp"

#include <boost/json.hpp>

namespace cohort {

std::string ShardPlan::to_json() const {
    namespace json = boost::json;
    json::object root;
    root["strategy"] = std::string(to_string(options_.strategy));
    root["replication"] = options_.replication;
    root["seed"] = options_.seed;
    root["moved"] = moved_;
    json::array files;
    for (const DataFile& f : shards_->dataset().files()) {
        json::object o;
        o["path"] = f.path;
        o["bytes"] = f.bytes;
        if (f.records) o["records"] = *f.records;
        files.push_back(std::move(o));
    }
    root["files"] = std::move(files);
    json::array members;
    for (uint32_t m = 0; m < member_count(); ++m) {
        json::object o;
        o["id"] = members_[m].id;
        o["host"] = members_[m].host_name();
        o["load"] = loads_[m];
        members.push_back(std::move(o));
    }
    root["members"] = std::move(members);
    json::array shards;
    shards.reserve(shard_count());
    for (uint64_t s = 0; s < shard_count(); ++s) {
        json::object o;
        o["index"] = s;
        o["bytes"] = shards_->bytes(s);
        if (auto records = shards_->records(s)) o["records"] = *records;
        json::array segments;
        for (const Segment& seg : shards_->segments(s))
            segments.push_back(json::object{{"file", seg.file}, {"begin", seg.begin}, {"end", seg.end}});
        o["segments"] = std::move(segments);
        json::array owners;
        for (uint32_t m : this->owners(s)) owners.push_back(json::string(members_[m].id));
        o["owners"] = std::move(owners);
        shards.push_back(std::move(o));
    }
    root["shards"] = std::move(shards);
    return detail::to_text(root);
}

}  // namespace cohort
