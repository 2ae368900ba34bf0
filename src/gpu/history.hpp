// The monitor's per-GPU history: a fixed-capacity ring of (time, reading),
// oldest overwritten first, so a monitor left running for days holds the
// same memory as one started a minute ago.
#pragma once

#include <cohort/gpu.hpp>

#include <cstddef>
#include <utility>
#include <vector>

namespace cohort::detail {

class ReadingHistory {
public:
    using Entry = std::pair<double, GpuReading>;

    // Grows as samples come rather than reserving `capacity` up front: a
    // large bound costs nothing until it fills.
    explicit ReadingHistory(std::size_t capacity) : capacity_(capacity) {}

    void push(double time, GpuReading reading) {
        if (entries_.size() < capacity_) {
            entries_.emplace_back(time, std::move(reading));
            return;
        }
        entries_[head_] = {time, std::move(reading)};
        head_ = (head_ + 1) % capacity_;
    }

    std::size_t size() const { return entries_.size(); }
    // i = 0 is the oldest kept entry.
    const Entry& operator[](std::size_t i) const { return entries_[(head_ + i) % entries_.size()]; }

    std::vector<Entry> ordered() const {
        std::vector<Entry> out;
        out.reserve(entries_.size());
        for (std::size_t i = 0; i < entries_.size(); ++i) out.push_back((*this)[i]);
        return out;
    }

private:
    std::size_t capacity_;
    std::size_t head_ = 0;  // the oldest entry once the ring is full
    std::vector<Entry> entries_;
};

}  // namespace cohort::detail
