// Channel security for every gRPC endpoint ladder opens: the agent's and the CLI's channels to
// the coordinator, and the coordinator's listening port. One place reads the PEM files, so an
// unreadable or empty file is an error everywhere (never a silent fall back to no CA, no
// client certificate or no TLS).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"

namespace ladder::proto {

// A client's TLS settings. TLS is on when `enabled` or any file is given. Without `ca_file` the
// system's CA roots verify the coordinator; `cert_file` and `key_file` (both or neither)
// present a client certificate for mutual TLS.
struct ClientTls {
  bool enabled = false;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

// Insecure credentials when TLS is off; otherwise SSL credentials from the files. Errors
// (InvalidArgument, NotFound) name the flag's file and why it cannot be used.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientTls& tls);

// A server's TLS settings: off when `cert_file` is empty. With `client_ca_file`, clients must
// present a certificate that CA signed (mutual TLS).
struct ServerTls {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
};

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTls& tls);

// The whole of a PEM file; an error when it cannot be read or is empty. `what` names the file's
// role in the message ("--tls-ca").
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what);

}  // namespace ladder::proto
