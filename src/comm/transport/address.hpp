// Which local address a rank listens on and advertises to its peers.
#pragma once

#include <boost/asio/ip/address.hpp>

#include <cstdint>
#include <string>

namespace cohort::comm {

struct ListenAddress {
    boost::asio::ip::address ip;
    uint16_t port = 0;   // 0: any free port
    std::string source;  // why this address: "COHORT_SOCKET_IFNAME=eth1", ...
};

// A setting and where it came from, for messages: "the address option",
// "COHORT_SOCKET_IFNAME=eth1", ...
struct Setting {
    std::string value;
    std::string source;
};

// In order: `address` ("HOST", "HOST:PORT", "[V6]:PORT"), interface
// `ifname`, the interface that routes to `store_host` (loopback when the
// store is local), else the interface of the default route, else loopback.
// (The environment's defaults are already in the options:
// with_env_defaults.) Error(invalid_argument) for a bad address or an
// unknown interface, naming its source and the interfaces there are.
ListenAddress choose_listen_address(const Setting& address, const Setting& ifname, const std::string& store_host);

// "HOST:PORT" pieces of a URL authority; the host keeps no brackets.
bool split_host_port(const std::string& text, std::string& host, std::string& port);

}  // namespace cohort::comm
