// OpenSSL's PEM readers over memory BIOs; the PEM never touches a file.
#include "elastic/kubernetes/pem.hpp"

#include <cohort/error.hpp>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

namespace cohort::k8s {

namespace {

using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;
using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

Bio memory(const std::string& pem) {
    return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
}

Error bad(const std::string& where, const std::string& what) {
    ERR_clear_error();
    return Error(Errc::invalid_argument, where + ": " + what);
}

}  // namespace

void check_certificates(const std::string& pem, const std::string& where) {
    if (pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos)
        throw bad(where,
                  "no PEM certificate in it (expected -----BEGIN CERTIFICATE-----; a -data field is the "
                  "base64 of the whole PEM file)");
    const Bio bio = memory(pem);
    int count = 0;
    while (Cert cert{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), X509_free}) ++count;
    // The loop ends at the end of the text (PEM_R_NO_START_LINE) or at a
    // certificate that does not parse.
    const unsigned long last = ERR_peek_last_error();
    if (count == 0 || (last != 0 && ERR_GET_REASON(last) != PEM_R_NO_START_LINE))
        throw bad(where, count == 0 ? "the PEM certificate does not parse (truncated or corrupted?)"
                                    : "a PEM certificate after the first " + std::to_string(count) +
                                          " does not parse (truncated or corrupted?)");
    ERR_clear_error();
}

void check_key_pair(const std::string& cert_pem, const std::string& cert_where, const std::string& key_pem,
                    const std::string& key_where) {
    const Bio cert_bio = memory(cert_pem);
    const Cert cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr), X509_free);
    if (!cert) throw bad(cert_where, "not a PEM certificate (expected -----BEGIN CERTIFICATE-----)");
    const Bio key_bio = memory(key_pem);
    const Key key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
    if (!key)
        throw bad(key_where,
                  "not an unencrypted PEM private key (expected -----BEGIN PRIVATE KEY-----, "
                  "or an RSA or EC PRIVATE KEY)");
    if (X509_check_private_key(cert.get(), key.get()) != 1)
        throw bad(key_where, "this key is not the key of the certificate in " + cert_where);
    ERR_clear_error();
}

}  // namespace cohort::k8s
