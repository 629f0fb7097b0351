/*
 * frame.h: the HTTP/1.1 request parser of egsd's connection front (conn.c).
 *
 * It reads a connection's raw bytes, held contiguous by the caller, and finds complete, unambiguous
 * requests by RFC 9112: a head that passed the checks (the request line, the header lines, one
 * Content-Length, no Content-Length with Transfer-Encoding, no transfer coding but chunked, one
 * Authorization and one Host, the head and body bounds), followed by its body.  A chunked body is
 * de-chunked in place, right after the head, so a request's body is always one contiguous run of
 * bytes whose length egsd alone decided.  On a rule broken it stops and reports why; the caller then
 * answers that refusal in order and discards the connection's input.
 *
 * No I/O, no clock, no allocation: the caller feeds the bytes of one request as they arrive, always
 * from the request's first byte (the buffer may move between calls; offsets are kept relative to
 * it).  Memory held per connection is the caller's buffer, bounded by the head bound plus the body
 * bound plus the chunk framing.
 */
#ifndef EGS_FRAME_H
#define EGS_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EGS_FRAME_MAX_HEAD (16 * 1024)  /* request line and header lines, blank line included */
#define EGS_FRAME_MAX_BODY (1024 * 1024)
#define EGS_FRAME_KEPT_FIELDS 8 /* header lines whose places a parse keeps (struct egs_frame_req) */

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

/* The methods egsd serves, in the order of libevent's enum evhttp_cmd_type bits (so route tables
 * keep their EVHTTP_REQ_ constants): index i is the method of bit 1 << i. */
enum egs_frame_method { EGS_M_GET, EGS_M_POST, EGS_M_HEAD, EGS_M_PUT, EGS_M_DELETE, EGS_M_OPTIONS, EGS_M_TRACE,
			EGS_M_CONNECT, EGS_M_PATCH };

/* One header line of a parsed head: both point into the caller's buffer (not NUL-terminated);
 * the value without the white space around it. */
struct egs_frame_field {
	const char *name, *value;
	uint32_t name_len, value_len;
};

/* A complete request found by egs_frame_parse; pointers into the caller's buffer. */
struct egs_frame_req {
	enum egs_frame_method method;
	bool http10;
	bool close;      /* the connection ends after this request's reply (HTTP/1.0 without keep-alive,
			  * or Connection: close) */
	bool keep_alive; /* HTTP/1.0 with Connection: keep-alive */
	size_t target_off; /* the request target: an offset from the request's first byte (the buffer may
			    * move between calls), and its length */
	size_t target_len;
	size_t nfields;  /* header lines (how many egs_frame_fields can fill) */
	/* The first EGS_FRAME_KEPT_FIELDS header lines as the parse found them, offsets from the
	 * request's first byte (a head is at most 16 KiB): name, name length, value (white space
	 * trimmed), value length.  egs_frame_fields reads them instead of scanning the head again. */
	uint16_t kept[EGS_FRAME_KEPT_FIELDS][4];
	size_t head_len; /* the head, blank line included: the body starts there */
	size_t body_len; /* de-chunked */
};

/* One request's parse state.  Zero it with egs_frame_init (no cleanup: it holds no memory). */
struct egs_frame {
	int state;
	size_t scanned;   /* head bytes already searched for the blank line */
	size_t head_len;  /* once the head is complete */
	size_t pos;       /* chunked: the next raw byte to read (relative to the request's first byte) */
	size_t body_len;  /* the body bytes now in place after the head */
	uint64_t remain;  /* chunk bytes still to read */
	size_t trailer_len;
	struct egs_frame_req req; /* what the head said */
	enum egs_frame_reason dead; /* a refusal is final */
};

void egs_frame_init(struct egs_frame *f);

/* Reads the request at p[0..n) (its first byte at p[0]; n grows between calls, p may move).
 * Returns EGS_FRAME_OK with *used = 0 when more bytes are needed; EGS_FRAME_OK with *used > 0 when
 * that many bytes were taken: *out is set when they were a complete request (f is then ready for
 * the next one, which starts at p[*used]), or *out is NULL when they were empty lines before a
 * request line (RFC 9112 2.2).  Else the reason of a refusal, the same on every later call.
 * A chunked body is moved into place after the head (p is written). */
enum egs_frame_reason egs_frame_parse(struct egs_frame *f, unsigned char *p, size_t n, size_t *used,
				      const struct egs_frame_req **out);

/* Fills fields (room for max) with the header lines of the complete head p[0..req->head_len) that
 * egs_frame_parse accepted, from the skip-th on; returns how many (0 past the last). */
size_t egs_frame_fields(const unsigned char *p, const struct egs_frame_req *req, struct egs_frame_field *fields,
			size_t skip, size_t max);

/* True while the head of a request is still arriving (bytes were fed, no complete head yet). */
bool egs_frame_in_head(const struct egs_frame *f);

#endif
