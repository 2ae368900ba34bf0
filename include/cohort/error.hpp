// cohort::Error: the one exception type cohort's C++ API throws. Its code is
// the status the C ABI returns for it (capi/cohort.h), so the conversion at
// the boundary is a cast.
#pragma once

#include <cohort/export.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace cohort {

enum class Errc : int32_t {
    ok = 0,
    invalid_argument = 1,
    parse = 2,
    io = 3,
    not_found = 4,
    out_of_range = 5,
    timeout = 6,
    unavailable = 7,
    no_memory = 8,
    callback = 9,
    internal = 10,
    buffer_too_small = 11,
    unsatisfiable = 12,
    peer_failed = 13,        // a peer died, closed its connection or sent garbage
    mismatch = 14,           // ranks called different operations or arguments
    closed = 15,             // the communicator is broken or closed
    permission_denied = 16,  // a secret or token did not match
};

// A short name for a code: "invalid argument", "parse error", ...
COHORT_API const char* errc_name(Errc code) noexcept;

class COHORT_API Error : public std::runtime_error {
public:
    Error(Errc code, std::string message);
    Errc code() const noexcept { return code_; }

private:
    Errc code_;
};

}  // namespace cohort
