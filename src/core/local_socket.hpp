// Unix sockets in the abstract namespace (no file anywhere, gone with the
// process, shared by the processes of one network namespace), and who is at
// the other end of one: the kernel's word (SO_PEERCRED), not the peer's.
// Shared memory hands its segment over such a socket; direct copies prove
// which process holds a TCP connection through one.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <sys/socket.h>
#include <sys/un.h>

namespace cohort::detail {

// The address of abstract name `name` (no leading NUL in `name`).
socklen_t abstract_address(std::string_view name, sockaddr_un& out);

// `prefix` followed by 16 random hex digits.
std::string random_abstract_name(std::string_view prefix);

// A non-blocking, close-on-exec socket listening on abstract `name`;
// -1 with errno set when it cannot.
int listen_abstract(const std::string& name, int backlog);

// The process that connected a Unix socket, as the kernel recorded it at
// connect(): its pid in this process's PID namespace (0 when it is not
// visible from here), its uid and gid. Empty when the kernel says nothing.
std::optional<ucred> peer_credentials(int fd);

}  // namespace cohort::detail
