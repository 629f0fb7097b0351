/*
 * tls.c: egsd's TLS server context (tls.h).  Each HTTPS connection gets its SSL from here in conn.c.
 */
#include "server/tls.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

/* TLS 1.2 suites: ECDHE key exchange and AEAD ciphers only (TLS 1.3 keeps OpenSSL's list, which is
 * all AEAD with forward secrecy). */
#define TLS12_CIPHERS "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL"

/* The first error on OpenSSL's queue as text (the queue is cleared): a system error as strerror's
 * text, else OpenSSL's reason, or why when the queue is empty.  Returns the error. */
static unsigned long openssl_reason(char *buf, size_t n, const char *why)
{
	unsigned long e = ERR_peek_error(); /* the first: the cause */
	const char *r = e ? ERR_reason_error_string(e) : NULL;
	if (e && ERR_SYSTEM_ERROR(e))
		snprintf(buf, n, "%s", strerror(ERR_GET_REASON(e)));
	else
		snprintf(buf, n, "%s", r ? r : why);
	ERR_clear_error();
	return e;
}

enum egs_err egs_tls_server_ctx(const char *cert_file, const char *key_file, SSL_CTX **out, char *msg,
				size_t msgsz)
{
	char why[256];
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	*out = NULL;
	if (!ctx || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1) {
		openssl_reason(why, sizeof(why), "cannot set up");
		snprintf(msg, msgsz, "TLS: %s", why);
		goto fail;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	/* conn.c repeats a TLS write that wanted the socket from an evbuffer, whose bytes may move. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
		openssl_reason(why, sizeof(why), "no certificate");
		snprintf(msg, msgsz, "cannot load --tls-cert %s (PEM certificates): %s", cert_file, why);
		goto fail;
	}
	/* OpenSSL compares the key with the certificate as it loads it (and again below). */
	if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
		unsigned long e = openssl_reason(why, sizeof(why), "no private key");
		if (ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH)
			goto mismatch;
		snprintf(msg, msgsz, "cannot load --tls-key %s (a PEM private key): %s", key_file, why);
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		openssl_reason(why, sizeof(why), "mismatch");
		goto mismatch;
	}
	*out = ctx;
	return EGS_OK;
mismatch:
	snprintf(msg, msgsz, "--tls-key %s does not match the certificate in --tls-cert %s", key_file, cert_file);
fail:
	SSL_CTX_free(ctx);
	return EGS_ERR_INVALID;
}
