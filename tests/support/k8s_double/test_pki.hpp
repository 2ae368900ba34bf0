// Certificates for TLS tests, made at run time with OpenSSL (never checked
// in): a CA, a server certificate it signs for 127.0.0.1 and localhost, and
// a client certificate it signs (CN = the user, O = a group, as the API
// server reads them). Keys are P-256, written owner-only (0600).
#pragma once

#include <filesystem>
#include <string>

namespace cohort::k8s_double {

struct TestPki {
    std::filesystem::path ca_cert, ca_key;
    std::filesystem::path server_cert, server_key;
    std::filesystem::path client_cert, client_key;
};

// Writes ca.crt, ca.key, server.crt, server.key, client.crt and client.key
// into `dir` (created if missing); `ca_name` is the CA's CN, so two calls
// make two CAs that do not trust each other. Throws std::runtime_error
// naming the step that failed.
TestPki make_test_pki(const std::filesystem::path& dir, const std::string& ca_name = "cohort-test-ca",
                      const std::string& client_user = "cohort-tester");

// A file's whole text; throws std::runtime_error when it cannot be read.
std::string read_text(const std::filesystem::path& file);

}  // namespace cohort::k8s_double
