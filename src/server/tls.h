/*
 * tls.h: egsd's TLS settings (--tls-cert, --tls-key): the one server context every HTTPS connection
 * of the connection front (conn.c) is made from.
 *
 * The context speaks TLS 1.2 and 1.3 only, with forward-secret AEAD suites for TLS 1.2 (TLS 1.3's are
 * all of that kind), no renegotiation and no compression.  Certificates are read once at start;
 * there is no reload (restart egsd to rotate them).
 */
#ifndef EGS_SERVER_TLS_H
#define EGS_SERVER_TLS_H

#include "core/common.h"

#include <openssl/ssl.h>

/* Builds the server context from cert_file (PEM: the certificate, then any intermediates) and
 * key_file (PEM private key).  On success *out is a new context the caller frees with SSL_CTX_free.
 * On failure returns EGS_ERR_INVALID with a one-line reason in msg (which file, and OpenSSL's
 * account: unreadable, not PEM, or a key that does not belong to the certificate); *out is NULL. */
enum egs_err egs_tls_server_ctx(const char *cert_file, const char *key_file, SSL_CTX **out, char *msg,
				size_t msgsz);

#endif
