/*
 * frame.h: the HTTP/1.1 request framing checker of egsd's connection front (conn.c).
 *
 * It reads a connection's raw bytes and writes to its output only complete, unambiguous requests:
 * a head that passed the RFC 9112 checks, followed by exactly Content-Length body bytes.  Chunked
 * bodies are collected (up to EGS_FRAME_MAX_BODY) and written as a Content-Length request without
 * Transfer-Encoding, so the parser behind (evhttp) never has to decide the length of a body itself.
 * On a rule broken it stops and reports why; the caller then discards the connection's input.
 *
 * No I/O and no clock: the caller feeds bytes as they arrive.  Memory held per connection is
 * bounded by the head bound plus the body bound.
 */
#ifndef EGS_FRAME_H
#define EGS_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;

#define EGS_FRAME_MAX_HEAD (16 * 1024)  /* request line and header lines, blank line included */
#define EGS_FRAME_MAX_BODY (1024 * 1024)

/* Why a request was refused; index into egs_frame_reasons. */
enum egs_frame_reason {
	EGS_FRAME_OK = 0,
	EGS_FRAME_LINE,      /* malformed request line */
	EGS_FRAME_VERSION,   /* not HTTP/1.0 or HTTP/1.1 */
	EGS_FRAME_METHOD,    /* a method egsd does not serve */
	EGS_FRAME_HEADER,    /* malformed header line (no colon, space before it, control bytes, folding) */
	EGS_FRAME_CL_TWICE,  /* Content-Length more than once */
	EGS_FRAME_CL_BAD,    /* Content-Length not a decimal number */
	EGS_FRAME_CL_TE,     /* Content-Length together with Transfer-Encoding */
	EGS_FRAME_TE,        /* a transfer coding other than chunked, or Transfer-Encoding on HTTP/1.0 */
	EGS_FRAME_AUTH_TWICE,/* Authorization more than once */
	EGS_FRAME_HOST_TWICE,/* Host more than once */
	EGS_FRAME_HEAD_BODY, /* a body on HEAD */
	EGS_FRAME_HEAD_BIG,  /* head (or chunk trailer) over EGS_FRAME_MAX_HEAD */
	EGS_FRAME_BODY_BIG,  /* body over EGS_FRAME_MAX_BODY */
	EGS_FRAME_CHUNK,     /* malformed chunked body */
	EGS_FRAME_FULL,      /* set by the caller: no room for the connection */
	EGS_FRAME_NREASONS
};

/* Status class and text of each reason: err is an enum egs_err value. */
struct egs_frame_reason_info {
	int err;
	const char *key;
	const char *message;
};
extern const struct egs_frame_reason_info egs_frame_reasons[EGS_FRAME_NREASONS];

/* One connection's framing state.  Zero-initialise with egs_frame_init, free with egs_frame_cleanup. */
struct egs_frame {
	int state;
	size_t scanned;            /* head bytes already searched for the blank line */
	uint64_t remain;           /* body bytes still to pass (Content-Length) or chunk bytes still to read */
	size_t body_len;           /* de-chunked body so far */
	size_t trailer_len;        /* chunk trailer bytes so far */
	struct evbuffer *held;     /* chunked: the rewritten head, written out when the body is complete */
	struct evbuffer *body;     /* chunked: the de-chunked body */
	uint64_t requests;         /* complete requests written to dst */
};

void egs_frame_init(struct egs_frame *f);
void egs_frame_cleanup(struct egs_frame *f);

/* Consumes what it can of src and appends complete requests (or their bodies, as they arrive) to dst.
 * Returns EGS_FRAME_OK, or the reason of a refusal: then f is dead and every later call discards
 * its input and returns the same reason.  *progress tells whether anything was written to dst. */
enum egs_frame_reason egs_frame_feed(struct egs_frame *f, struct evbuffer *src, struct evbuffer *dst, bool *progress);

/* True when f holds no partial request: a connection in this state between requests is idle. */
bool egs_frame_between(const struct egs_frame *f, const struct evbuffer *src);

#endif
