// What open_store needs from each store backend, and the checks and message
// pieces every backend shares so their errors read the same.
#pragma once

#include <cohort/store.hpp>

#include "core/deadline.hpp"  // deadline_after: the one clamp for every wait
#include "core/text.hpp"      // quote, quote_keys: keys and values in messages

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace cohort::detail {

std::shared_ptr<Store> open_tcp_store(std::string host, uint16_t port, const StoreOptions& options);
std::shared_ptr<Store> open_file_store(std::filesystem::path dir, const StoreOptions& options);

// Error(invalid_argument) naming the store for a key outside 1..1024 bytes
// or a value past 16 MiB.
void check_key(std::string_view address, std::string_view key);
void check_value(std::string_view address, std::string_view key, std::string_view value);
// add() keeps integers as decimal text; empty for anything else.
std::optional<int64_t> parse_stored_integer(std::string_view text);
// "250 ms", "5 s", "1.5 s".
std::string format_duration(std::chrono::milliseconds d);
// "Connection refused" -> "connection refused", to sit inside a sentence.
std::string lowercase_first(std::string text);

}  // namespace cohort::detail
