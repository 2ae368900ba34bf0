// Checks of the PEM a cluster configuration carries, made when it is read
// so that a wrong file or a truncated -data field is named there, not
// reported later as a TLS failure of the first request.
#pragma once

#include <string>

namespace cohort::k8s {

// `pem` holds at least one certificate and nothing unreadable. Throws
// Error(invalid_argument) starting with `where`.
void check_certificates(const std::string& pem, const std::string& where);
// `cert_pem` is a certificate, `key_pem` a private key, and the key is the
// certificate's. Throws Error(invalid_argument) naming `cert_where` or
// `key_where`.
void check_key_pair(const std::string& cert_pem, const std::string& cert_where, const std::string& key_pem,
                    const std::string& key_where);

}  // namespace cohort::k8s
