/*
 * conn.h: egsd's connection front, between the listening socket and evhttp.
 *
 * Every accepted connection gets a bufferevent filter that reads the raw bytes before evhttp does and
 * checks the framing of each request by RFC 9112: the request line, the header lines, one
 * Content-Length, no Content-Length with Transfer-Encoding, no transfer coding but chunked, one
 * Authorization and one Host, the head and body bounds.  evhttp only ever sees requests whose length
 * it and the client agree on: chunked bodies are de-chunked here into a Content-Length request.  A
 * request that breaks a rule is replaced by an internal "refusal" request that the dispatcher answers
 * in the JSON envelope (400/405/413/503), in order after earlier requests of the connection; the
 * connection then ends, and nothing sent after the refused request runs.
 *
 * After a refusal the connection lingers: the reply is flushed, the write side shut down, and what
 * the client still sends is read and discarded (bounded in bytes and time), so a client still
 * sending a refused body reads the answer instead of a reset.
 *
 * Under TLS (egsd --tls-cert) the socket's bufferevent is OpenSSL's and the filter sees plain text;
 * a client that speaks plain HTTP to the port fails the handshake and is closed without an answer.
 *
 * The front also bounds descriptors: at most max connections (the oldest idle one is closed to make
 * room for a new one), and an accept() that fails for lack of descriptors closes idle connections,
 * pauses accepting for 100 ms and logs at most once a second with a count, instead of spinning.
 */
#ifndef EGS_CONN_H
#define EGS_CONN_H

#include "core/common.h"
#include "server/frame.h"

#include <stdio.h>

struct egs_conns;
struct event_base;
struct evhttp;
struct evhttp_bound_socket;
struct evhttp_request;
struct ssl_ctx_st; /* OpenSSL's SSL_CTX */

/* Installs the front on http (evhttp_set_bevcb).  max_conns 0 derives the bound from the descriptor
 * limit (RLIMIT_NOFILE less a reserve for the store, the log and outgoing calls).  tls (borrowed,
 * must outlive the front; tls.h) makes every connection HTTPS; NULL serves plain HTTP.  log is
 * borrowed.  Returns a new object the caller frees with egs_conns_free after event_base_free. */
struct egs_conns *egs_conns_new(struct event_base *base, struct evhttp *http, FILE *log, long max_conns,
				struct ssl_ctx_st *tls);
/* New connections use tls from now on (a reloaded certificate); those open keep theirs.  Borrowed:
 * the caller frees the previous context (each SSL holds a reference to its own). */
void egs_conns_set_tls(struct egs_conns *cs, struct ssl_ctx_st *tls);
/* Watches the listener of a bound socket for accept() failures (back-off instead of a busy loop). */
void egs_conns_watch(struct egs_conns *cs, struct evhttp_bound_socket *bs);
/* Before evhttp_free: accepting is not resumed any more. */
void egs_conns_stopping(struct egs_conns *cs);
/* Frees cs (after event_base_free, which runs the connections' finalizers).  NULL is a no-op. */
void egs_conns_free(struct egs_conns *cs);

/* Called by the dispatcher for every request: marks the request's connection busy (not closable as
 * idle) until its reply has been sent. */
void egs_conns_begin(struct egs_conns *cs, struct evhttp_request *ev);
/* True when path (of request ev, after egs_conns_begin) is the front's internal refusal request;
 * *out tells what to answer.  The connection then ends after the reply.  The path carries a
 * per-process random secret, so a client cannot forge one. */
bool egs_conns_refusal(struct egs_conns *cs, struct evhttp_request *ev, const char *path,
		       const struct egs_frame_reason_info **out);

/* Open connections (including lingering ones) and the effective bound. */
size_t egs_conns_count(const struct egs_conns *cs);
size_t egs_conns_max(const struct egs_conns *cs);

#endif
