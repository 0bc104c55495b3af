#include "shared/security/testing/test_pki.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <memory>

#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::security::testing {
namespace {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;
using CertPtr = std::unique_ptr<X509, CertFree>;

bool AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for key, named cn, signed by issuer_key (self-signed when issuer is null).
CertPtr MakeCert(EVP_PKEY* key, const char* cn, X509* issuer, EVP_PKEY* issuer_key, bool ca, long serial) {
  CertPtr cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 7 * 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : name);
  X509* iss = issuer ? issuer : cert.get();
  bool ok = ca ? AddExt(cert.get(), iss, NID_basic_constraints, "critical,CA:TRUE") &&
                     AddExt(cert.get(), iss, NID_key_usage, "critical,keyCertSign,cRLSign")
               : AddExt(cert.get(), iss, NID_basic_constraints, "CA:FALSE") &&
                     AddExt(cert.get(), iss, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost") &&
                     AddExt(cert.get(), iss, NID_ext_key_usage, "serverAuth,clientAuth");
  if (!ok || X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256()) == 0) return nullptr;
  return cert;
}

bool WritePem(const std::string& path, X509* cert, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  bool ok = cert ? PEM_write_X509(f, cert) == 1 : PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  return std::fclose(f) == 0 && ok;
}

}  // namespace

absl::StatusOr<TestPki> MakeTestPki(const std::string& dir) {
  TestPki pki;
  pki.dir = dir;
  pki.ca_cert = dir + "/ca.crt";
  auto fail = [](std::string_view what) { return absl::InternalError(kelp::StrCat("test PKI: ", what)); };
  KeyPtr ca_key(EVP_EC_gen("P-256"));
  KeyPtr rogue_ca_key(EVP_EC_gen("P-256"));
  if (!ca_key || !rogue_ca_key) return fail("key generation");
  CertPtr ca = MakeCert(ca_key.get(), "kelp test CA", nullptr, nullptr, true, 1);
  CertPtr rogue_ca = MakeCert(rogue_ca_key.get(), "kelp test CA", nullptr, nullptr, true, 1);
  if (!ca || !rogue_ca) return fail("CA certificate");
  if (!WritePem(pki.ca_cert, ca.get(), nullptr) || !WritePem(dir + "/rogue_ca.crt", rogue_ca.get(), nullptr)) {
    return fail("write CA");
  }
  long serial = 2;
  for (const char* name : {"filer", "volume", "client", "rogue"}) {
    bool rogue = std::string_view(name) == "rogue";
    KeyPtr key(EVP_EC_gen("P-256"));
    if (!key) return fail("key generation");
    CertPtr cert = MakeCert(key.get(), name, rogue ? rogue_ca.get() : ca.get(),
                            rogue ? rogue_ca_key.get() : ca_key.get(), false, serial++);
    if (!cert) return fail(kelp::StrCat("certificate ", name));
    if (!WritePem(pki.Cert(name), cert.get(), nullptr) || !WritePem(pki.Key(name), nullptr, key.get())) {
      return fail(kelp::StrCat("write ", name));
    }
  }
  return pki;
}

std::string SecurityToml(const TomlOptions& o) {
  std::string t;
  auto jwt = [&](const char* section, const std::string& key) {
    if (key.empty()) return;
    kelp::StrAppend(&t, "[", section, "]\nkey = \"", key, "\"\nexpires_after_seconds = ", o.expires_after_seconds,
                    "\n\n");
  };
  jwt("jwt.signing", o.volume_write_key);
  jwt("jwt.signing.read", o.volume_read_key);
  jwt("jwt.filer_signing", o.filer_write_key);
  jwt("jwt.filer_signing.read", o.filer_read_key);
  if (o.pki) {
    kelp::StrAppend(&t, "[grpc]\nca = \"", o.pki->ca_cert, "\"\n\n");
    for (const char* c : {"filer", "volume", "client"}) {
      kelp::StrAppend(&t, "[grpc.", c, "]\ncert = \"", o.pki->Cert(c), "\"\nkey = \"", o.pki->Key(c), "\"\n\n");
    }
  }
  return t;
}

}  // namespace kelp::security::testing
