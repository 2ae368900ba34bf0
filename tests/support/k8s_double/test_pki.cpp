// Made with OpenSSL's X509 calls rather than the openssl program, so that a
// C++ test needs no subprocess; the double's --make-pki writes the same
// files for tests in other languages.
#include "test_pki.hpp"

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include <sys/stat.h>

namespace cohort::k8s_double {

namespace {

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;

void check(bool ok, const std::string& step) {
    if (!ok) throw std::runtime_error("test PKI: " + step + " failed");
}

Key new_key() {
    Key key(EVP_EC_gen("P-256"), EVP_PKEY_free);
    check(key != nullptr, "generating a P-256 key");
    return key;
}

void extend(X509* cert, X509* issuer, int nid, const char* value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    check(ext != nullptr, std::string("making the extension ") + OBJ_nid2sn(nid) + "=" + value);
    const int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    check(ok == 1, std::string("adding the extension ") + OBJ_nid2sn(nid));
}

enum class Role { ca, server, client };

// issuer/issuer_key null: self-signed (the CA).
Cert new_cert(Role role, const std::string& cn, const std::string& org, EVP_PKEY* key, X509* issuer,
              EVP_PKEY* issuer_key) {
    static long serial = 1;
    Cert cert(X509_new(), X509_free);
    check(cert != nullptr, "X509_new");
    X509* c = cert.get();
    check(X509_set_version(c, 2) == 1, "setting the version");
    ASN1_INTEGER_set(X509_get_serialNumber(c), serial++);
    X509_gmtime_adj(X509_getm_notBefore(c), -3600);
    X509_gmtime_adj(X509_getm_notAfter(c), 7 * 24 * 3600);
    check(X509_set_pubkey(c, key) == 1, "setting the public key");
    X509_NAME* name = X509_get_subject_name(c);
    if (!org.empty())
        X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(org.c_str()), -1, -1,
                                   0);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509* signer = issuer != nullptr ? issuer : c;
    check(X509_set_issuer_name(c, X509_get_subject_name(signer)) == 1, "setting the issuer");
    extend(c, signer, NID_subject_key_identifier, "hash");
    extend(c, signer, NID_authority_key_identifier, "keyid:always");
    switch (role) {
        case Role::ca:
            extend(c, signer, NID_basic_constraints, "critical,CA:TRUE");
            extend(c, signer, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature");
            break;
        case Role::server:
            extend(c, signer, NID_basic_constraints, "critical,CA:FALSE");
            extend(c, signer, NID_key_usage, "critical,digitalSignature");
            extend(c, signer, NID_ext_key_usage, "serverAuth");
            extend(c, signer, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
            break;
        case Role::client:
            extend(c, signer, NID_basic_constraints, "critical,CA:FALSE");
            extend(c, signer, NID_key_usage, "critical,digitalSignature");
            extend(c, signer, NID_ext_key_usage, "clientAuth");
            break;
    }
    check(X509_sign(c, issuer_key != nullptr ? issuer_key : key, EVP_sha256()) > 0, "signing " + cn);
    return cert;
}

using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;

void write(const std::filesystem::path& file, const std::string& text, bool secret) {
    {
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        if (!out) throw std::runtime_error("test PKI: cannot write " + file.string());
        if (secret) ::chmod(file.c_str(), 0600);  // before a byte of the key is in it
        out << text;
        if (!out.flush()) throw std::runtime_error("test PKI: cannot write " + file.string());
    }
}

std::string pem_of(X509* cert) {
    Bio bio(BIO_new(BIO_s_mem()), BIO_free);
    check(PEM_write_bio_X509(bio.get(), cert) == 1, "writing a certificate");
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<std::size_t>(n));
}

std::string pem_of(EVP_PKEY* key) {
    Bio bio(BIO_new(BIO_s_mem()), BIO_free);
    check(PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1, "writing a key");
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<std::size_t>(n));
}

}  // namespace

TestPki make_test_pki(const std::filesystem::path& dir, const std::string& ca_name, const std::string& client_user) {
    std::filesystem::create_directories(dir);
    const Key ca_key = new_key(), server_key = new_key(), client_key = new_key();
    const Cert ca = new_cert(Role::ca, ca_name, "", ca_key.get(), nullptr, nullptr);
    const Cert server = new_cert(Role::server, "kube-apiserver", "", server_key.get(), ca.get(), ca_key.get());
    const Cert client = new_cert(Role::client, client_user, "system:masters", client_key.get(), ca.get(), ca_key.get());
    TestPki p{dir / "ca.crt",     dir / "ca.key",     dir / "server.crt",
              dir / "server.key", dir / "client.crt", dir / "client.key"};
    write(p.ca_cert, pem_of(ca.get()), false);
    write(p.ca_key, pem_of(ca_key.get()), true);
    write(p.server_cert, pem_of(server.get()), false);
    write(p.server_key, pem_of(server_key.get()), true);
    write(p.client_cert, pem_of(client.get()), false);
    write(p.client_key, pem_of(client_key.get()), true);
    return p;
}

std::string read_text(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + file.string());
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

}  // namespace cohort::k8s_double
