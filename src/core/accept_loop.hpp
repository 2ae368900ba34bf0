// The accept loop both of cohort's servers run (the tcp:// store and the
// coordinator): hand each connection over with TCP_NODELAY set, and on an
// accept error (out of descriptors, most likely) wait a moment and try
// again rather than spin or give up, unless the error handler freed
// descriptors and says to try again at once.
#pragma once

#include "core/cloexec.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <utility>

namespace cohort::detail {

// `stopping` is read on the io thread only. on_error(ec) is told of each
// failed accept; it returns true to try again at once (it closed something,
// so the next accept can succeed), false to pause first.
template <typename OnSocket, typename OnError>
void accept_connections(boost::asio::ip::tcp::acceptor& acceptor, boost::asio::steady_timer& retry,
                        const bool& stopping, OnSocket on_socket, OnError on_error) {
    using boost::system::error_code;
    // Wait, then accept4 with SOCK_CLOEXEC: Asio's async_accept would leave
    // the connection open across a worker's exec (core/cloexec.hpp).
    acceptor.async_wait(
        boost::asio::ip::tcp::acceptor::wait_read, [&acceptor, &retry, &stopping, on_socket = std::move(on_socket),
                                                    on_error = std::move(on_error)](error_code ec) mutable {
            if (stopping || ec == boost::asio::error::operation_aborted) return;
            boost::asio::ip::tcp::socket socket(acceptor.get_executor());
            if (!ec && !accept_cloexec(acceptor, socket, ec)) {
                accept_connections(acceptor, retry, stopping, std::move(on_socket), std::move(on_error));
                return;
            }
            if (ec) {
                if (on_error(ec)) {
                    accept_connections(acceptor, retry, stopping, std::move(on_socket), std::move(on_error));
                    return;
                }
                retry.expires_after(std::chrono::milliseconds(100));
                retry.async_wait([&acceptor, &retry, &stopping, on_socket = std::move(on_socket),
                                  on_error = std::move(on_error)](error_code wait_ec) mutable {
                    if (!wait_ec && !stopping)
                        accept_connections(acceptor, retry, stopping, std::move(on_socket), std::move(on_error));
                });
                return;
            }
            error_code ignored;
            socket.set_option(boost::asio::ip::tcp::no_delay(true), ignored);
            on_socket(std::move(socket));
            accept_connections(acceptor, retry, stopping, std::move(on_socket), std::move(on_error));
        });
}

}  // namespace cohort::detail
