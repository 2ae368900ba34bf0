// Version, errors and memory: the parts of the C ABI every other part uses.
#include "handles.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

// The C ABI's codes are cohort::Errc's values: one check per code, so that a
// code added to one side only fails the build. A new code also moves
// COHORT_ERR_LAST, which the last line checks.
static_assert(COHORT_OK == static_cast<int>(cohort::Errc::ok));
static_assert(COHORT_ERR_INVALID_ARGUMENT == static_cast<int>(cohort::Errc::invalid_argument));
static_assert(COHORT_ERR_PARSE == static_cast<int>(cohort::Errc::parse));
static_assert(COHORT_ERR_IO == static_cast<int>(cohort::Errc::io));
static_assert(COHORT_ERR_NOT_FOUND == static_cast<int>(cohort::Errc::not_found));
static_assert(COHORT_ERR_OUT_OF_RANGE == static_cast<int>(cohort::Errc::out_of_range));
static_assert(COHORT_ERR_TIMEOUT == static_cast<int>(cohort::Errc::timeout));
static_assert(COHORT_ERR_UNAVAILABLE == static_cast<int>(cohort::Errc::unavailable));
static_assert(COHORT_ERR_NO_MEMORY == static_cast<int>(cohort::Errc::no_memory));
static_assert(COHORT_ERR_CALLBACK == static_cast<int>(cohort::Errc::callback));
static_assert(COHORT_ERR_INTERNAL == static_cast<int>(cohort::Errc::internal));
static_assert(COHORT_ERR_BUFFER_TOO_SMALL == static_cast<int>(cohort::Errc::buffer_too_small));
static_assert(COHORT_ERR_UNSATISFIABLE == static_cast<int>(cohort::Errc::unsatisfiable));
static_assert(COHORT_ERR_PEER_FAILED == static_cast<int>(cohort::Errc::peer_failed));
static_assert(COHORT_ERR_MISMATCH == static_cast<int>(cohort::Errc::mismatch));
static_assert(COHORT_ERR_CLOSED == static_cast<int>(cohort::Errc::closed));
static_assert(COHORT_ERR_PERMISSION_DENIED == static_cast<int>(cohort::Errc::permission_denied));
static_assert(COHORT_ERR_LAST == static_cast<int>(cohort::Errc::permission_denied),
              "a new cohort::Errc needs its COHORT_ERR_* constant, a static_assert above and COHORT_ERR_LAST");

namespace cohort::capi {

namespace {
thread_local std::string last_error;
}

const char* last_error_message() noexcept { return last_error.c_str(); }

void set_last_error(const char* message) noexcept {
    try {
        last_error = message;
    } catch (...) {
        last_error.clear();  // out of memory: an empty message beats none
    }
}

int to_status(Errc code) noexcept {
    return static_cast<int>(code);
}

std::chrono::milliseconds milliseconds_arg(double seconds, const char* function, const char* what, bool zero_ok) {
    const double kYear = std::chrono::duration<double>(cohort::kLongestTimeout).count();
    if (!std::isfinite(seconds) || seconds < 0 || (seconds == 0 && !zero_ok) || seconds > kYear) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: {} must be {} and at most a year ({} seconds), got {}", function, what,
                                zero_ok ? "0 or positive" : "positive", kYear, seconds));
    }
    return std::chrono::ceil<std::chrono::milliseconds>(std::chrono::duration<double>(seconds));
}

char* copy_out(const std::string& text) {
    auto* out = static_cast<char*>(std::malloc(text.size() + 1));
    if (out == nullptr) throw std::bad_alloc();
    std::memcpy(out, text.c_str(), text.size() + 1);
    return out;
}

}  // namespace cohort::capi

extern "C" {

const char* cohort_version(void) { return cohort::kVersion; }

const char* cohort_last_error(void) { return cohort::capi::last_error_message(); }

const char* cohort_strerror(int code) {
    if (code < 0 || code > COHORT_ERR_LAST) return "unknown status code";
    return cohort::errc_name(static_cast<cohort::Errc>(code));
}

void cohort_free(void* ptr) { std::free(ptr); }

}  // extern "C"
