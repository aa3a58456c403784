// A small blocking HTTP/1.1 client over POSIX sockets for the server tests: every read has a
// timeout, so a server that stalls fails the test instead of hanging it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_message.h"

namespace flint::server::testing {

using namespace std::chrono_literals;

struct Response {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;  // decoded
  std::vector<std::string> chunks;

  std::string header(std::string_view name) const {
    std::size_t pos = 0;
    while ((pos = head.find("\r\n", pos)) != std::string::npos) {
      pos += 2;
      std::size_t colon = head.find(':', pos);
      std::size_t end = head.find("\r\n", pos);
      if (colon == std::string::npos || colon > end) continue;
      if (iequals(std::string_view(head).substr(pos, colon - pos), name)) {
        std::size_t v = head.find_first_not_of(' ', colon + 1);
        return head.substr(v, end - v);
      }
    }
    return "";
  }
};

// A blocking client with a receive timeout (so nothing here can hang).
class Client {
 public:
  explicit Client(std::uint16_t port, std::chrono::milliseconds timeout = 5000ms) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket() failed");
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::runtime_error(std::string("connect() failed: ") + std::strerror(errno));
    }
  }
  ~Client() { close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

  // False if the server has closed (the bytes may be lost then: fine for the fuzz test).
  bool send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Everything up to and including `delim`; throws on timeout or EOF before it.
  std::string read_until(std::string_view delim) {
    for (;;) {
      if (std::size_t pos = buf_.find(delim); pos != std::string::npos) {
        std::string out = buf_.substr(0, pos + delim.size());
        buf_.erase(0, pos + delim.size());
        return out;
      }
      if (!fill()) throw std::runtime_error("connection ended before '" + std::string(delim) + "'");
    }
  }
  std::string read_exact(std::size_t n) {
    while (buf_.size() < n) {
      if (!fill()) throw std::runtime_error("connection ended mid-body");
    }
    std::string out = buf_.substr(0, n);
    buf_.erase(0, n);
    return out;
  }

  Response read_head() {
    Response r;
    r.head = read_until("\r\n\r\n");
    r.status = std::stoi(r.head.substr(9, 3));
    return r;
  }
  std::string read_chunk() {  // "" for the last chunk
    std::string line = read_until("\r\n");
    std::size_t size = std::stoul(line, nullptr, 16);
    if (size == 0) {
      read_until("\r\n");
      return "";
    }
    std::string data = read_exact(size);
    read_exact(2);
    return data;
  }
  Response read_response() {
    Response r = read_head();
    if (iequals(r.header("Transfer-Encoding"), "chunked")) {
      for (std::string c; !(c = read_chunk()).empty();) {
        r.body += c;
        r.chunks.push_back(c);
      }
    } else {
      r.body = read_exact(std::stoul(r.header("Content-Length")));
    }
    return r;
  }

  // True if the server closes the connection (EOF or reset) with nothing more sent before
  // the receive timeout; `rest` gets whatever arrived before.
  bool closed_by_server(std::string* rest = nullptr) {
    while (fill()) {
    }
    if (rest) *rest = buf_;
    return last_error_ != EAGAIN && last_error_ != EWOULDBLOCK;
  }

 private:
  bool fill() {
    char tmp[16384];
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) {
      last_error_ = n == 0 ? 0 : errno;
      return false;
    }
    buf_.append(tmp, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  int last_error_ = 0;
  std::string buf_;
};

}  // namespace flint::server::testing
