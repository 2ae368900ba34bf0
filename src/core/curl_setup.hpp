// What every libcurl user in cohort (the etcd client, the coordinator
// client) must do the same way: start libcurl once per process, and open its
// sockets close-on-exec.
#pragma once

#include <curl/curl.h>

#include <string_view>

namespace cohort::detail {

// curl_global_init, once per process and never torn down: other threads may
// still hold handles when static destructors run. Error(internal) naming
// `who` ("etcd client") when libcurl cannot start.
void curl_global_setup(std::string_view who);

// libcurl's own socket() has no SOCK_CLOEXEC: a worker that cohort-run
// starts while a connection is open would inherit it (core/cloexec.hpp).
// Makes `handle` open its sockets with SOCK_CLOEXEC instead.
void curl_open_sockets_cloexec(CURL* handle);

}  // namespace cohort::detail
