// Version, errors and memory: the parts of the C ABI every other part uses.
#include "handles.hpp"

#include <cstdlib>

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
    if (code < 0 || code > COHORT_ERR_PERMISSION_DENIED) return "unknown status code";
    return cohort::errc_name(static_cast<cohort::Errc>(code));
}

void cohort_free(void* ptr) { std::free(ptr); }

}  // extern "C"
