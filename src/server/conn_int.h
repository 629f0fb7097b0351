/*
 * conn_int.h: the layouts shared by conn.c (connections: accept, read, parse, write, close) and
 * conn_reply.c (requests and their answers).  Not for other modules: they use conn.h.
 *
 * Ownership: a connection owns its queue of requests until each is answered; an answered request's
 * bytes move into the connection's output in order and the request is freed.  A request outlives
 * its connection when the connection ends first (an orphan: its answer frees it), so a connection's
 * memory stays until its last request is freed (refs).
 */
#ifndef EGS_CONN_INT_H
#define EGS_CONN_INT_H

#include "server/conn.h"

#include <openssl/ssl.h>

struct evconnlistener;
struct event;

struct egs_hfield {
	const char *name, *value; /* NUL-terminated, in the request's own memory */
};

struct egs_hreq {
	struct conn *c;            /* its connection (dead ones included) */
	struct egs_hreq *next;     /* the connection's queue, in request order */
	enum egs_frame_reason refusal;
	enum evhttp_cmd_type method;
	bool http10, close, keep_alive;
	bool answered;             /* replied, or a stream started (its bytes may go out) */
	bool done;                 /* nothing more will be added (a reply, or a stream's end) */
	bool streaming, chunked;
	const char *target, *path, *query;
	struct egs_hfield *fields;
	size_t nfields;
	const char *body;
	size_t body_len;
	const char *ctype;         /* Content-Type of the answer (a constant), or NULL */
	struct evbuffer *hdrs;     /* other header lines of the answer, as bytes; NULL when none */
	struct evbuffer *pend;     /* answer bytes waiting for earlier answers of the connection */
	void (*close_cb)(void *arg);
	void *close_arg;
};

struct conn {
	struct egs_conns *cs;
	int fd;
	SSL *ssl;                 /* under TLS; else NULL */
	struct event *rev, *wev;  /* read (persistent), write (added while output waits) */
	struct event *kick;       /* answers arrived from outside the connection's own turn */
	struct conn *prev, *next; /* cs's list, least recently active first */
	unsigned char *in;        /* the unparsed rest of the input */
	size_t in_len, in_cap;
	struct egs_frame frame;
	struct egs_hreq *qfirst, *qlast;
	unsigned inflight;        /* requests dispatched and not answered */
	unsigned refs;            /* requests not yet freed */
	struct evbuffer *out;
	size_t tls_retry;         /* an SSL_write of this many bytes wanted the socket: repeat it */
	int64_t active_s, head_s, write_s; /* coarse monotonic seconds: last read, partial head since, output since */
	int64_t linger_until;
	size_t drained;
	bool reading;             /* rev is added */
	bool full;                /* accepted over the limit: its first request is refused with 503 */
	bool refused;             /* a refusal was dispatched: no more requests */
	bool close_after;         /* a request asked to close: no more requests after it */
	bool flush_close;         /* close (or linger) once the output is written */
	bool lingering, eof, dead, in_turn, wev_on;
	bool read_wants_write;    /* SSL_read wanted the socket writable */
	bool stalled;             /* parsing stopped at a bound (pipeline, output), not for want of bytes */
	char peer[48];
};

struct egs_conns {
	struct event_base *base;
	FILE *log;
	struct evconnlistener *lev;
	struct event *resume_ev, *sweep_ev;
	SSL_CTX *tls; /* borrowed; NULL = plain HTTP */
	egs_conns_request_cb on_request;
	void *arg;
	struct conn *first, *last; /* least recently active first */
	size_t count, max;
	int port;
	bool stopping;
	int64_t now_s, log_sec;
	int64_t head_limit_s; /* EGS_CONN_HEAD_S (shorter under a test's EGS_TEST_HEAD_TIMEOUT_S) */
	uint64_t accept_fails, evicted;
	unsigned char *rbuf; /* the read buffer all connections share */
	time_t date_sec;
	char date[40];       /* "Date: Wed, 25 Nov 2026 20:37:34 GMT\r\n" */
	size_t date_len;
};

/* conn_reply.c */
/* Builds the request of the complete head and body at p (req from egs_frame_parse), owned by c's
 * queue. */
struct egs_hreq *egs__hreq_new(struct conn *c, const unsigned char *p, const struct egs_frame_req *req);
/* A refusal standing for the request that broke a rule. */
struct egs_hreq *egs__hreq_refusal(struct conn *c, enum egs_frame_reason why);
/* Frees q (its connection's reference too). */
void egs__hreq_free(struct egs_hreq *q);
/* Moves the answers at the front of c's queue that may go into c->out, in order. */
void egs__conn_advance(struct conn *c);

/* conn.c */
/* An answer of c is ready: writes now, or at the end of the turn c is reading in. */
void egs__conn_ready(struct conn *c);
/* Frees c once it is dead and no request refers to it. */
void egs__conn_unref(struct conn *c);

#endif
