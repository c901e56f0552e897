#include "ladder/proto/tls.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/status.h"
#include "ladder/status_macros.h"

namespace ladder::proto {

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(what + ": cannot read " + path + ": " + std::strerror(errno));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(what + ": error while reading " + path);
  std::string pem = buffer.str();
  // gRPC accepts an empty string as "no certificate" and would quietly use its defaults.
  if (pem.find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(what + ": " + path + " holds no PEM block (-----BEGIN ...)");
  }
  return pem;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientTls& tls) {
  const bool on =
      tls.enabled || !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty();
  if (!on) return grpc::InsecureChannelCredentials();
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together (a client certificate needs its key)");
  }
  grpc::SslCredentialsOptions ssl;
  if (!tls.ca_file.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPemFile(tls.ca_file, "--tls-ca"));
  }
  if (!tls.cert_file.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPemFile(tls.cert_file, "--tls-cert"));
    ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPemFile(tls.key_file, "--tls-key"));
  }
  return grpc::SslCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTls& tls) {
  if (tls.cert_file.empty()) {
    if (!tls.key_file.empty() || !tls.client_ca_file.empty()) {
      return absl::InvalidArgumentError("--tls-key and --tls-client-ca need --tls-cert");
    }
    return grpc::InsecureServerCredentials();
  }
  if (tls.key_file.empty()) return absl::InvalidArgumentError("--tls-cert needs --tls-key");
  grpc::SslServerCredentialsOptions ssl(
      tls.client_ca_file.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                 : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.private_key, ReadPemFile(tls.key_file, "--tls-key"));
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPemFile(tls.cert_file, "--tls-cert"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!tls.client_ca_file.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPemFile(tls.client_ca_file, "--tls-client-ca"));
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace ladder::proto
