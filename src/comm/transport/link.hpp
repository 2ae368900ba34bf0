// One data connection as a stream: plain TCP, or TLS over the same socket.
// The framing code (engine.cpp) and the handshakes (mesh.cpp) read and
// write a Link with asio::async_read / async_write and never ask which it
// is; the one branch is here, in async_read_some and async_write_some. A
// stream type instead of templating the engine on it, because the choice is
// made per communicator at run time and the engine is one compiled unit; the
// cost of the branch for plain TCP is one well-predicted test per read or
// write of up to 64 KiB (asio's composed operations cut them so), against a
// system call each.
//
// Why not asio::ssl::stream: it binds the TLS state to one io_context,
// while a connection is made on the set-up's io_context and then moves to
// the engine's by its descriptor. TlsSession (tls.hpp) runs OpenSSL on the
// descriptor itself and waits for readiness on the socket, so it moves with
// the descriptor.
#pragma once

#include "comm/transport/tls.hpp"

#include <boost/asio/compose.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cerrno>
#include <cstddef>

namespace cohort::comm {

class Link {
public:
    using executor_type = boost::asio::ip::tcp::socket::executor_type;
    using error_code = boost::system::error_code;

    // `tls` null: plain TCP. Neither is owned; both outlive the Link's use.
    Link(boost::asio::ip::tcp::socket& socket, TlsSession* tls) : socket_(&socket), tls_(tls) {}

    executor_type get_executor() { return socket_->get_executor(); }
    boost::asio::ip::tcp::socket& socket() { return *socket_; }
    TlsSession* tls() const { return tls_; }

    // What an error of this link means, in words: TLS failures say why.
    std::string explain(const error_code& ec) const {
        if (tls_ && ec.category() == boost::asio::error::get_ssl_category() && !tls_->failure().empty())
            return "TLS: " + tls_->failure();
        return ec == boost::asio::error::eof ? std::string("the peer closed the connection") : ec.message();
    }
    // A TLS failure (bad certificate, protocol), as opposed to the
    // connection's own failure (reset, end of stream).
    static bool is_tls_failure(const error_code& ec) {
        return ec.category() == boost::asio::error::get_ssl_category();
    }

    template <typename Buffers, typename Token>
    auto async_read_some(const Buffers& buffers, Token&& token) {
        if (!tls_) return socket_->async_read_some(buffers, std::forward<Token>(token));
        return boost::asio::async_compose<Token, void(error_code, std::size_t)>(
            Io<false>{this, first_buffer<boost::asio::mutable_buffer>(buffers)}, token, *socket_);
    }

    template <typename Buffers, typename Token>
    auto async_write_some(const Buffers& buffers, Token&& token) {
        if (!tls_) return socket_->async_write_some(buffers, std::forward<Token>(token));
        return boost::asio::async_compose<Token, void(error_code, std::size_t)>(
            Io<true>{this, first_buffer<boost::asio::const_buffer>(buffers)}, token, *socket_);
    }

    // One write that never waits (the socket must be non-blocking); for the
    // best-effort abort frame. would_block when nothing could go out.
    template <typename Buffers>
    std::size_t write_some(const Buffers& buffers, error_code& ec) {
        if (!tls_) return socket_->write_some(buffers, ec);
        const auto b = first_buffer<boost::asio::const_buffer>(buffers);
        std::size_t n = 0;
        ec = {};
        if (b.size() == 0) return 0;
        const int rc = SSL_write_ex(tls_->native(), b.data(), b.size(), &n);
        if (rc == 1) return n;
        ec = failure(SSL_get_error(tls_->native(), rc));
        return 0;
    }

    // The TLS handshake (either end, as the session was made); completes
    // with an error in the ssl category when the peer or its certificate is
    // refused, explain() saying why.
    template <typename Token>
    auto async_handshake(Token&& token) {
        return boost::asio::async_compose<Token, void(error_code)>(Handshake{this}, token, *socket_);
    }

private:
    template <typename Buffer, typename Buffers>
    static Buffer first_buffer(const Buffers& buffers) {
        for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers);
             ++it) {
            Buffer b(*it);
            if (b.size() > 0) return b;
        }
        return Buffer();
    }

    // After an OpenSSL call on the session failed with `error`
    // (SSL_get_error): the error_code that says so, the reason kept for
    // explain(). An end of stream, with or without TLS's close_notify, is
    // eof, as on plain TCP, so that a dead peer looks the same (the frames'
    // lengths catch a connection cut short).
    error_code failure(int error) {
        namespace asio = boost::asio;
        switch (error) {
            case SSL_ERROR_WANT_READ:
            case SSL_ERROR_WANT_WRITE: return asio::error::would_block;
            case SSL_ERROR_ZERO_RETURN: return asio::error::eof;
            case SSL_ERROR_SYSCALL: {
                const int e = errno;
                ERR_clear_error();
                return e != 0 && e != EAGAIN ? error_code(e, boost::system::system_category())
                                             : error_code(asio::error::eof);
            }
            default: break;
        }
        const unsigned long first = ERR_peek_error();
        if (ERR_GET_REASON(first) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
            ERR_clear_error();
            return asio::error::eof;
        }
        unsigned long code = 0;
        tls_->set_failure(take_tls_error(tls_->native(), &code));
        return error_code(static_cast<int>(code != 0 ? code : 1), asio::error::get_ssl_category());
    }

    // Reads or writes as much as the session takes without waiting, waits
    // for the socket when it took nothing, and completes with the bytes
    // moved. Never completes inside the initiating call (asio's rule): a
    // result ready at once is posted.
    template <bool Write>
    struct Io {
        using Buffer = std::conditional_t<Write, boost::asio::const_buffer, boost::asio::mutable_buffer>;
        Link* link;
        Buffer buffer;
        std::size_t done = 0;
        bool started = false;
        bool posted = false;
        bool wants_read = false;
        error_code result{};

        template <typename Self>
        void operator()(Self& self, error_code ec = {}) {
            if (posted) return self.complete(result, done);
            const bool first = !started;
            started = true;
            if (!ec) ec = step();
            if (ec == boost::asio::error::would_block) {
                link->socket_->async_wait(wants_read ? boost::asio::socket_base::wait_read
                                                     : boost::asio::socket_base::wait_write,
                                          std::move(self));
                return;
            }
            if (first) {
                result = ec;
                posted = true;
                return boost::asio::post(std::move(self));
            }
            self.complete(ec, done);
        }

        // would_block: nothing moved and the session waits for the socket
        // (wants_read says which way).
        error_code step() {
            SSL* ssl = link->tls_->native();
            auto* data = static_cast<unsigned char*>(const_cast<void*>(static_cast<const void*>(buffer.data())));
            while (done < buffer.size()) {
                std::size_t n = 0;
                const int rc = Write ? SSL_write_ex(ssl, data + done, buffer.size() - done, &n)
                                     : SSL_read_ex(ssl, data + done, buffer.size() - done, &n);
                if (rc == 1) {
                    done += n;
                    continue;
                }
                const int error = SSL_get_error(ssl, rc);
                if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
                    if (done > 0) return {};
                    wants_read = error == SSL_ERROR_WANT_READ;
                    return boost::asio::error::would_block;
                }
                // Bytes already moved are reported; the failure repeats on the next call.
                const error_code ec = link->failure(error);
                return done > 0 ? error_code() : ec;
            }
            return {};
        }
    };

    struct Handshake {
        Link* link;
        bool started = false;
        bool posted = false;
        error_code result{};

        template <typename Self>
        void operator()(Self& self, error_code ec = {}) {
            if (posted) return self.complete(result);
            const bool first = !started;
            started = true;
            if (!ec) {
                SSL* ssl = link->tls_->native();
                const int rc = SSL_do_handshake(ssl);
                if (rc != 1) {
                    const int error = SSL_get_error(ssl, rc);
                    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
                        link->socket_->async_wait(error == SSL_ERROR_WANT_READ ? boost::asio::socket_base::wait_read
                                                                               : boost::asio::socket_base::wait_write,
                                                  std::move(self));
                        return;
                    }
                    ec = link->failure(error);
                    if (ec == boost::asio::error::eof) {
                        // Cut off in the handshake: say so in the TLS words.
                        link->tls_->set_failure("the peer closed the connection during the TLS handshake");
                    }
                }
            }
            if (first) {
                result = ec;
                posted = true;
                return boost::asio::post(std::move(self));
            }
            self.complete(ec);
        }
    };

    boost::asio::ip::tcp::socket* socket_;
    TlsSession* tls_;
};

}  // namespace cohort::comm
