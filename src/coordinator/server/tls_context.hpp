// The coordinator's HTTPS settings: its certificate and key, and, for
// mutual TLS, the CA that client certificates must be signed by. Built once
// at construction so a bad file stops the coordinator before it listens.
#pragma once

#include <cohort/coordinator.hpp>

#include <boost/asio/ssl/context.hpp>

#include <memory>

namespace cohort::coord::server {

// nullptr when options has no certificate (plain HTTP). Throws
// Error(invalid_argument) naming the option and file when a file is
// missing, unreadable or not what it should be, or when only one of the
// certificate and key is given.
std::unique_ptr<boost::asio::ssl::context> make_tls_context(const CoordinatorOptions& options);

}  // namespace cohort::coord::server
