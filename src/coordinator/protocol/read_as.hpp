// Who wrote the JSON a protocol reader is given, which decides how strict
// the reader is and which error it throws.
#pragma once

#include <cohort/error.hpp>

namespace cohort::coord::protocol {

struct ReadAs {
    Errc code;
    // Unknown fields are an error. Off for a server's replies, so that a
    // client keeps working against a newer server that says more.
    bool strict;
};

// A client's request body: a 400 naming the field.
inline constexpr ReadAs kRequest{Errc::invalid_argument, true};
// The coordinator's own journal or snapshot.
inline constexpr ReadAs kJournal{Errc::parse, true};
// A coordinator's reply, read by the client.
inline constexpr ReadAs kReply{Errc::peer_failed, false};
// Text an API caller passes (the C ABI's metrics_json).
inline constexpr ReadAs kArgument{Errc::invalid_argument, true};

}  // namespace cohort::coord::protocol
