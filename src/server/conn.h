/*
 * conn.h: egsd's HTTP/1.1 server front: the listening socket, its connections, their requests and
 * replies (conn.c, conn_reply.c).  It replaced libevent's evhttp (issue 16): see
 * docs/internals/http.md for what evhttp did that this now does, and how.
 *
 * A connection reads into a buffer shared by all connections (the unparsed rest of a request is
 * kept per connection), parses every complete request in it by RFC 9112 (frame.h) and hands each to
 * the dispatcher as a struct egs_hreq: one allocation holding the request, its header fields and its
 * body.  Replies leave in request order, even when a later request is answered first (a reply held
 * for its commit, durable.c): each connection writes all its ready replies with one writev a turn,
 * and a reply's head is formatted into bytes once, its body moved by reference (no copy).
 *
 * A request that breaks a framing rule is handed to the dispatcher as a refusal
 * (egs_hreq_refusal), answered in order after the earlier requests; the connection then lingers:
 * the write side is shut down (after TLS close_notify) and what the client still sends is read and
 * discarded (bounded in bytes and time), so a client still sending a refused body reads the answer
 * instead of a reset.
 *
 * Bounds: at most max connections (the least recently active idle one is closed to make room; when
 * none is idle the new connection's first request gets 503), at most EGS_CONN_PIPELINE requests in
 * flight per connection (reading pauses beyond), an idle keep-alive connection is closed after
 * EGS_CONN_IDLE_S, a head that does not arrive whole within EGS_CONN_HEAD_S (slowloris) ends the
 * connection, and an accept() that fails for lack of descriptors closes idle connections, pauses
 * accepting for 100 ms and logs at most once a second.
 *
 * Under TLS (egsd --tls-cert) the same front reads and writes through OpenSSL (SSL_read/SSL_write on
 * the non-blocking socket); the parser and everything above it are the same.
 *
 * Threading: egsd's loop thread only.
 */
#ifndef EGS_CONN_H
#define EGS_CONN_H

#include "core/common.h"
#include "server/frame.h"

#include <event2/http.h> /* enum evhttp_cmd_type: the route tables' method constants */
#include <stdio.h>

#define EGS_CONN_PIPELINE 32 /* requests in flight per connection before reading pauses */
#define EGS_CONN_IDLE_S 90   /* an idle keep-alive connection is closed after this */
#define EGS_CONN_HEAD_S 30   /* a request head must arrive whole within this */

struct egs_conns;
struct egs_hreq;
struct event_base;
struct evbuffer;
struct ssl_ctx_st; /* OpenSSL's SSL_CTX */

/* Called once per request, in order; the callee answers it exactly once (now or later) with
 * egs_hreq_reply or a stream. */
typedef void (*egs_conns_request_cb)(struct egs_hreq *q, void *arg);

/* A new front.  max_conns 0 derives the bound from the descriptor limit (RLIMIT_NOFILE less a
 * reserve for the store, the log and outgoing calls).  tls (borrowed, must outlive the front's
 * connections; tls.h) makes every connection HTTPS; NULL serves plain HTTP.  log is borrowed.
 * Accepts nothing before egs_conns_listen.  The caller frees it with egs_conns_free. */
struct egs_conns *egs_conns_new(struct event_base *base, FILE *log, long max_conns, struct ssl_ctx_st *tls,
				egs_conns_request_cb on_request, void *arg);
/* Listens on host:port (port 0: one the kernel picks, see egs_conns_port).  EGS_ERR_IO when it
 * cannot. */
enum egs_err egs_conns_listen(struct egs_conns *cs, const char *host, int port);
/* The port listened on (0 before egs_conns_listen). */
int egs_conns_port(const struct egs_conns *cs);
/* New connections use tls from now on (a reloaded certificate); those open keep theirs.  Borrowed:
 * the caller frees the previous context (each SSL holds a reference to its own). */
void egs_conns_set_tls(struct egs_conns *cs, struct ssl_ctx_st *tls);
/* Stops accepting and closes every connection (a stream's close callback runs; requests still
 * unanswered become orphans, freed by their answer or egs_hreq_abandon). */
void egs_conns_close_all(struct egs_conns *cs);
/* Frees cs (after egs_conns_close_all).  NULL is a no-op. */
void egs_conns_free(struct egs_conns *cs);

/* Open connections (including lingering ones) and the effective bound. */
size_t egs_conns_count(const struct egs_conns *cs);
size_t egs_conns_max(const struct egs_conns *cs);

/* ---- a request (borrowed by the dispatcher until it is answered) ---- */

/* The framing refusal this request stands for (answer it with that reason's error; the connection
 * then ends), or EGS_FRAME_OK for a request to serve. */
enum egs_frame_reason egs_hreq_refusal(const struct egs_hreq *q);
enum evhttp_cmd_type egs_hreq_method(const struct egs_hreq *q);
/* The request target as sent, its path (without query and fragment; NULL for "*"), and its query
 * (after '?', without the fragment; NULL when none).  NUL-terminated, valid until the answer. */
const char *egs_hreq_target(const struct egs_hreq *q);
const char *egs_hreq_path(const struct egs_hreq *q);
const char *egs_hreq_query(const struct egs_hreq *q);
/* The first header field named name (case-insensitive), or NULL.  Valid until the answer. */
const char *egs_hreq_header(const struct egs_hreq *q, const char *name);
/* The i-th header field, in the order sent: false past the last. */
bool egs_hreq_header_at(const struct egs_hreq *q, size_t i, const char **name, const char **value);
/* The body (de-chunked; len 0 when none).  Valid until the answer. */
void egs_hreq_body(const struct egs_hreq *q, const char **p, size_t *len);
/* The peer's numeric address ("" when unknown). */
const char *egs_hreq_peer(const struct egs_hreq *q);

/* ---- its answer ---- */

/* Adds a header field to the answer (copied).  Content-Length, Transfer-Encoding, Connection and
 * Date are the front's and ignored here. */
void egs_hreq_header_add(struct egs_hreq *q, const char *name, const char *value);
/* Sets the answer's Content-Type to type, which must stay valid (a string constant). */
void egs_hreq_content_type(struct egs_hreq *q, const char *type);
/* Drops the header fields added so far (and the Content-Type). */
void egs_hreq_headers_clear(struct egs_hreq *q);
/* Answers q with status and the bytes of body (moved out of it; references stay references): they
 * leave after every earlier request's answer.  q is freed: do not use it again. */
void egs_hreq_reply(struct egs_hreq *q, int status, struct evbuffer *body);
/* Starts a streamed answer (chunked on HTTP/1.1; on HTTP/1.0 the connection ends after it). */
void egs_hreq_stream_start(struct egs_hreq *q, int status);
void egs_hreq_stream_chunk(struct egs_hreq *q, const void *data, size_t len);
/* Ends the stream; q is freed. */
void egs_hreq_stream_end(struct egs_hreq *q);
/* cb(arg) runs when q's connection ends before q's stream did; cb must then end the stream
 * (egs_hreq_stream_end).  NULL cb: none. */
void egs_hreq_on_close(struct egs_hreq *q, void (*cb)(void *arg), void *arg);
/* Answer bytes of q's connection not yet taken by the kernel. */
size_t egs_hreq_behind(const struct egs_hreq *q);
/* Frees a request that will never be answered (egsd is exiting). */
void egs_hreq_abandon(struct egs_hreq *q);

#endif
