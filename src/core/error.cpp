#include <cohort/error.hpp>

namespace cohort {

const char* errc_name(Errc code) noexcept {
    switch (code) {
        case Errc::ok: return "ok";
        case Errc::invalid_argument: return "invalid argument";
        case Errc::parse: return "parse error";
        case Errc::io: return "i/o error";
        case Errc::not_found: return "not found";
        case Errc::out_of_range: return "out of range";
        case Errc::timeout: return "timed out";
        case Errc::unavailable: return "unavailable";
        case Errc::no_memory: return "out of memory";
        case Errc::callback: return "callback failed";
        case Errc::internal: return "internal error";
        case Errc::buffer_too_small: return "buffer too small";
        case Errc::unsatisfiable: return "unsatisfiable";
        case Errc::peer_failed: return "peer failed";
        case Errc::mismatch: return "mismatch";
        case Errc::closed: return "closed";
        case Errc::permission_denied: return "permission denied";
    }
    return "unknown status code";
}

Error::Error(Errc code, std::string message) : std::runtime_error(std::move(message)), code_(code) {}

}  // namespace cohort
