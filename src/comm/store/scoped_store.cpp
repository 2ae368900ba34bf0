// scoped_store: a prefix in front of every key, so that jobs and generations
// sharing one store never see each other's keys.
#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <vector>

#include <fmt/format.h>

namespace cohort {

namespace {

class ScopedStore final : public Store {
public:
    ScopedStore(std::shared_ptr<Store> base, std::string prefix) : base_(std::move(base)), prefix_(std::move(prefix)) {}

    void set(std::string_view key, std::string_view value) override { base_->set(scoped(key), value); }
    std::string get(std::string_view key, std::chrono::milliseconds timeout) override {
        return base_->get(scoped(key), timeout);
    }
    std::optional<std::string> try_get(std::string_view key) override { return base_->try_get(scoped(key)); }
    int64_t add(std::string_view key, int64_t delta) override { return base_->add(scoped(key), delta); }
    std::string compare_and_set(std::string_view key, const std::optional<std::string>& expected,
                                std::string_view desired) override {
        return base_->compare_and_set(scoped(key), expected, desired);
    }
    void wait(std::span<const std::string> keys, std::chrono::milliseconds timeout) override {
        std::vector<std::string> full;
        full.reserve(keys.size());
        for (const auto& k : keys) full.push_back(scoped(k));
        base_->wait(full, timeout);
    }
    bool remove(std::string_view key) override { return base_->remove(scoped(key)); }
    // The base's address, unchanged: callers may read it as a URL (to pick
    // the interface that routes to the store), and the prefix shows in every
    // key an error names anyway.
    std::string address() const override { return base_->address(); }
    std::string host() const override { return base_->host(); }

    const std::shared_ptr<Store>& base() const { return base_; }
    const std::string& prefix() const { return prefix_; }

private:
    // An empty key stays empty so that the base rejects it as such rather
    // than reading the prefix alone.
    std::string scoped(std::string_view key) const {
        if (key.empty()) return {};
        std::string full = prefix_;
        full += key;
        return full;
    }

    std::shared_ptr<Store> base_;
    std::string prefix_;
};

}  // namespace

std::shared_ptr<Store> scoped_store(std::shared_ptr<Store> base, std::string prefix) {
    if (!base) throw Error(Errc::invalid_argument, fmt::format("scoped_store('{}'): the base store is null", prefix));
    // A scope of a scope is one scope with both prefixes, so calls go
    // through one wrapper however deep the nesting.
    if (auto* inner = dynamic_cast<ScopedStore*>(base.get())) {
        return std::make_shared<ScopedStore>(inner->base(), inner->prefix() + prefix);
    }
    return std::make_shared<ScopedStore>(std::move(base), std::move(prefix));
}

}  // namespace cohort
