// The client's choice of replica: the last leader, the next in the list, or
// etcd's leader key.
#include "coordinator/client/leader_finder.hpp"

#include "etcd/client.hpp"

#include <cohort/error.hpp>

#include <boost/json/parse.hpp>

#include <fmt/format.h>

namespace cohort::coord::client {

namespace json = boost::json;

namespace {

// Replicas named by X-Cohort-Leader beyond the list get a pool each; a
// server that names a new one on every answer is not followed past this.
constexpr std::size_t kMaxPools = 64;

}  // namespace

LeaderFinder::LeaderFinder(UrlSet set, std::string token, HttpTls tls)
    : set_(std::move(set)), token_(std::move(token)), tls_(std::move(tls)) {
    if (set_.etcd) {
        etcd_ = std::make_unique<etcd::EtcdClient>(*set_.etcd);
    } else {
        leader_ = set_.urls.front();
        for (const auto& url : set_.urls) pools_.emplace(url, std::make_unique<HttpPool>(url, token_, tls_));
    }
}

LeaderFinder::~LeaderFinder() = default;

HttpPool* LeaderFinder::pool_for(const std::string& url) {
    auto it = pools_.find(url);
    if (it == pools_.end()) {
        if (pools_.size() >= kMaxPools) return nullptr;
        it = pools_.emplace(url, std::make_unique<HttpPool>(url, token_, tls_)).first;
    }
    return it->second.get();
}

std::optional<LeaderFinder::Target> LeaderFinder::current(Clock::time_point deadline, std::string& why) {
    {
        std::lock_guard lock(mutex_);
        if (!leader_.empty()) return Target{leader_, pool_for(leader_)};
    }
    // etcd: one thread reads the key; the others waiting here take what it
    // found.
    std::lock_guard reading(etcd_mutex_);
    {
        std::lock_guard lock(mutex_);
        if (!leader_.empty()) return Target{leader_, pool_for(leader_)};
    }
    auto url = read_leader_key(deadline, why);
    std::lock_guard lock(mutex_);
    if (!url) return std::nullopt;
    HttpPool* pool = pool_for(*url);
    if (pool == nullptr) {
        why = fmt::format("etcd's leader key names {}, one replica too many to follow", *url);
        return std::nullopt;
    }
    leader_ = *url;
    return Target{leader_, pool};
}

std::optional<std::string> LeaderFinder::read_leader_key(Clock::time_point deadline, std::string& why) {
    const std::string& key = set_.leader_key;
    etcd::RangeResult read;
    try {
        read = etcd_->get(key, deadline);
    } catch (const Error& e) {
        why = fmt::format("cannot read the leader key '{}': {}", key, e.what());
        return std::nullopt;
    }
    if (read.kvs.empty()) {
        why = fmt::format("etcd has no leader key '{}' (an election is on, or no replica runs with this prefix)",
                          key);
        return std::nullopt;
    }
    boost::system::error_code ec;
    const json::value v = json::parse(read.kvs.front().value, ec);
    const json::object* o = ec ? nullptr : v.if_object();
    const json::value* url = o != nullptr ? o->if_contains("url") : nullptr;
    std::string problem;
    if (url == nullptr || !url->is_string()) {
        why = fmt::format("etcd's leader key '{}' holds '{}', not {{\"url\": \"http://HOST:PORT\", ...}}", key,
                          read.kvs.front().value.substr(0, 200));
        return std::nullopt;
    }
    auto checked = http_url(std::string_view(url->as_string()), &problem);
    if (!checked) {
        why = fmt::format("etcd's leader key '{}' names '{}', which {}", key, std::string_view(url->as_string()),
                          problem);
        return std::nullopt;
    }
    return checked;
}

bool LeaderFinder::redirected(const std::string& from, const std::string& leader) {
    auto url = http_url(leader);
    if (!url || *url == from) return false;
    std::lock_guard lock(mutex_);
    if (pool_for(*url) == nullptr) return false;
    for (std::size_t i = 0; i < set_.urls.size(); ++i) {
        if (set_.urls[i] == *url) index_ = i;  // a later failure goes on with the entry after it
    }
    leader_ = std::move(*url);
    return true;
}

void LeaderFinder::failed(const std::string& url) {
    std::lock_guard lock(mutex_);
    if (leader_ != url) return;  // another call has moved on already
    if (set_.etcd) {
        leader_.clear();
        return;
    }
    index_ = (index_ + 1) % set_.urls.size();
    // A replica that was named by another's answer but is not in the list
    // failed: go on with the list where it was.
    leader_ = set_.urls[index_];
}

void LeaderFinder::answered(const std::string& url) {
    std::lock_guard lock(mutex_);
    if (leader_.empty()) leader_ = url;
}

std::string LeaderFinder::leader() const {
    std::lock_guard lock(mutex_);
    return leader_;
}

}  // namespace cohort::coord::client
