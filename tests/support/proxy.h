// A loopback TCP proxy whose link the test can cut and restore: a network partition between
// an agent and the coordinator, without namespaces or root.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ladder::testing {

class TcpProxy {
 public:
  // Listens on 127.0.0.1 (a free port) and forwards each connection to 127.0.0.1:target_port.
  explicit TcpProxy(int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  // Drops every open connection and refuses new ones until Restore().
  void Cut();
  void Restore();

 private:
  void AcceptLoop();
  void Pump(int client, int upstream);

  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> cut_{false};
  std::mutex mu_;
  std::vector<int> open_fds_;         // guarded by mu_
  std::vector<std::thread> threads_;  // guarded by mu_
  std::thread acceptor_;
};

}  // namespace ladder::testing
