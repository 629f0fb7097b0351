/*
 * frame.c: request framing by RFC 9112 for egsd's connection front (see frame.h).
 *
 * Why here and not in evhttp: libevent 2.1 takes the first of two Content-Lengths, treats an unknown
 * Transfer-Encoding as "no body", ignores a body on HEAD and answers its own refusals with an HTML
 * page.  Each of those lets the bytes after a request be read as a second, smuggled request.  This
 * checker decides the length of every request once; evhttp then reads exactly what it is given.
 */
#include "server/frame.h"

#include "core/common.h"

#include <event2/buffer.h>
#include <string.h>
#include <strings.h>

enum { ST_HEAD, ST_BODY, ST_CHUNK_SIZE, ST_CHUNK_DATA, ST_CHUNK_END, ST_TRAILER, ST_DEAD };

#define CHUNK_LINE_MAX 1024

/* Values of enum egs_err (egs/err.h), spelled out here so that the table reads alone. */
const struct egs_frame_reason_info egs_frame_reasons[EGS_FRAME_NREASONS] = {
	[EGS_FRAME_OK] = { EGS_OK, "", "" },
	[EGS_FRAME_LINE] = { EGS_ERR_BAD_REQUEST, "BAD_REQUEST", "the request line is malformed" },
	[EGS_FRAME_VERSION] = { EGS_ERR_BAD_REQUEST, "BAD_REQUEST", "the HTTP version must be HTTP/1.1 or HTTP/1.0" },
	[EGS_FRAME_METHOD] = { EGS_ERR_METHOD, "METHOD_NOT_ALLOWED", "egsd serves GET, POST, PUT, DELETE, PATCH, HEAD and OPTIONS" },
	[EGS_FRAME_HEADER] = { EGS_ERR_BAD_REQUEST, "BAD_REQUEST", "a header line is malformed" },
	[EGS_FRAME_CL_TWICE] = { EGS_ERR_BAD_REQUEST, "BAD_REQUEST", "Content-Length is given more than once" },
	[EGS_FRAME_CL_BAD] = { EGS_ERR_BAD_REQUEST, "BAD_REQUEST", "Content-Length must be a decimal number" },
	[EGS_FRAME_CL_TE] = { EGS_ERR_BAD_REQUEST, "BAD_REQUEST", "Content-Length and Transfer-Encoding must not be given together" },
	[EGS_FRAME_TE] = { EGS_ERR_BAD_REQUEST, "BAD_REQUEST", "the only transfer coding accepted is chunked, and only on HTTP/1.1" },
	[EGS_FRAME_AUTH_TWICE] = { EGS_ERR_BAD_REQUEST, "BAD_REQUEST", "Authorization is given more than once" },
	[EGS_FRAME_HOST_TWICE] = { EGS_ERR_BAD_REQUEST, "BAD_REQUEST", "Host is given more than once" },
	[EGS_FRAME_HEAD_BODY] = { EGS_ERR_BAD_REQUEST, "BAD_REQUEST", "a HEAD request must not have a body" },
	[EGS_FRAME_HEAD_BIG] = { EGS_ERR_TOO_LARGE, "REQUEST_TOO_LARGE", "the request line and headers exceed 16384 bytes" },
	[EGS_FRAME_BODY_BIG] = { EGS_ERR_TOO_LARGE, "REQUEST_TOO_LARGE", "the request body exceeds 1048576 bytes" },
	[EGS_FRAME_CHUNK] = { EGS_ERR_BAD_REQUEST, "BAD_REQUEST", "the chunked body is malformed" },
	[EGS_FRAME_FULL] = { EGS_ERR_UNAVAILABLE, "TOO_MANY_CONNECTIONS", "egsd is at its connection limit; retry later" },
};

void egs_frame_init(struct egs_frame *f)
{
	memset(f, 0, sizeof(*f));
	f->state = ST_HEAD;
}

void egs_frame_cleanup(struct egs_frame *f)
{
	if (f->held)
		evbuffer_free(f->held);
	if (f->body)
		evbuffer_free(f->body);
	f->held = f->body = NULL;
}

bool egs_frame_between(const struct egs_frame *f, const struct evbuffer *src)
{
	return f->state == ST_HEAD && evbuffer_get_length(src) == 0;
}

/* ---- the head ---- */

/* Length of the head at the start of p[0..n) (through its blank line), 0 when not complete yet.
 * Lines end in LF with an optional CR before it, as evhttp reads them. */
static size_t head_end(struct egs_frame *f, const unsigned char *p, size_t n)
{
	const unsigned char *nl;
	for (size_t i = f->scanned; i < n && (nl = memchr(p + i, '\n', n - i)) != NULL; i++) {
		i = (size_t)(nl - p);
		if (i + 1 >= n || (p[i + 1] == '\r' && i + 2 >= n)) {
			f->scanned = i;
			return 0;
		}
		if (p[i + 1] == '\n')
			return i + 2;
		if (p[i + 1] == '\r' && p[i + 2] == '\n')
			return i + 3;
	}
	f->scanned = n;
	return 0;
}

/* Byte classes, one table lookup per byte instead of comparisons (and a strchr) per byte: every
 * request's head goes through these loops.  BC_TCHAR: a token character (RFC 9110 5.6.2);
 * BC_BAD_VALUE: a control byte other than HTAB, not allowed in a field value; BC_BAD_TARGET: not in a
 * request target (controls, space, DEL and bytes over 0x7f). */
enum { BC_TCHAR = 1, BC_BAD_VALUE = 2, BC_BAD_TARGET = 4 };
static const unsigned char byte_class[256] = {
	6, 6, 6, 6, 6, 6, 6, 6, 6, 4, 6, 6, 6, 6, 6, 6, /* 0x00 */
	6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, /* 0x10 */
	4, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, /* 0x20 */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, /* 0x30 */
	0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x40 */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, /* 0x50 */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x60 */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 6, /* 0x70 */
	4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, /* 0x80 */
	4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, /* 0x90 */
	4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, /* 0xa0 */
	4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, /* 0xb0 */
	4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, /* 0xc0 */
	4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, /* 0xd0 */
	4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, /* 0xe0 */
	4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, /* 0xf0 */
};

static bool is_tchar(unsigned char c)
{
	return byte_class[c] & BC_TCHAR;
}

struct head {
	const unsigned char *line; /* the request line */
	size_t line_len;
	bool is_head, http10;
	int content_lengths, transfer_encodings, authorizations, hosts;
	bool te_chunked;
	uint64_t content_length;
};

static const struct method {
	const char *name;
	size_t len;
} methods[] = { { "GET", 3 },   { "POST", 4 }, { "PUT", 3 },     { "DELETE", 6 },
		{ "PATCH", 5 }, { "HEAD", 4 }, { "OPTIONS", 7 }, { NULL, 0 } };

static enum egs_frame_reason parse_request_line(const unsigned char *p, size_t n, struct head *h)
{
	const unsigned char *sp1 = memchr(p, ' ', n);
	if (!sp1 || sp1 == p)
		return EGS_FRAME_LINE;
	size_t mlen = (size_t)(sp1 - p);
	for (size_t i = 0; i < mlen; i++)
		if (!is_tchar(p[i]))
			return EGS_FRAME_LINE;
	const unsigned char *target = sp1 + 1, *end = p + n;
	const unsigned char *sp2 = memchr(target, ' ', (size_t)(end - target));
	if (!sp2 || sp2 == target)
		return EGS_FRAME_LINE;
	for (const unsigned char *c = target; c < sp2; c++)
		if (byte_class[*c] & BC_BAD_TARGET) /* the request target is ASCII without spaces or controls */
			return EGS_FRAME_LINE;
	if (target[0] != '/' && !(sp2 - target == 1 && target[0] == '*') &&
	    !(sp2 - target > 7 && strncasecmp((const char *)target, "http://", 7) == 0) &&
	    !(sp2 - target > 8 && strncasecmp((const char *)target, "https://", 8) == 0))
		return EGS_FRAME_LINE;
	size_t vlen = (size_t)(end - (sp2 + 1));
	if (vlen != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0)
		return vlen >= 5 && memcmp(sp2 + 1, "HTTP/", 5) == 0 ? EGS_FRAME_VERSION : EGS_FRAME_LINE;
	if (sp2[8] != '0' && sp2[8] != '1')
		return EGS_FRAME_VERSION;
	h->http10 = sp2[8] == '0';
	bool known = false;
	for (const struct method *m = methods; m->name && !known; m++)
		known = m->len == mlen && memcmp(m->name, p, mlen) == 0;
	if (!known)
		return EGS_FRAME_METHOD;
	h->is_head = mlen == 4 && memcmp(p, "HEAD", 4) == 0;
	return EGS_FRAME_OK;
}

/* Trims optional white space around v[0..*n). */
static const unsigned char *trim_ows(const unsigned char *v, size_t *n)
{
	while (*n && (v[0] == ' ' || v[0] == '\t')) {
		v++;
		(*n)--;
	}
	while (*n && (v[*n - 1] == ' ' || v[*n - 1] == '\t'))
		(*n)--;
	return v;
}

static bool name_is(const unsigned char *name, size_t n, const char *want)
{
	return strlen(want) == n && strncasecmp((const char *)name, want, n) == 0;
}

static enum egs_frame_reason parse_header_line(const unsigned char *p, size_t n, struct head *h)
{
	if (n && (p[0] == ' ' || p[0] == '\t'))
		return EGS_FRAME_HEADER; /* obsolete line folding */
	const unsigned char *colon = memchr(p, ':', n);
	if (!colon || colon == p)
		return EGS_FRAME_HEADER;
	size_t nlen = (size_t)(colon - p);
	for (size_t i = 0; i < nlen; i++)
		if (!is_tchar(p[i])) /* includes white space before the colon */
			return EGS_FRAME_HEADER;
	size_t vlen = n - nlen - 1;
	const unsigned char *v = colon + 1;
	unsigned char bad = 0;
	for (size_t i = 0; i < vlen; i++)
		bad |= byte_class[v[i]];
	if (bad & BC_BAD_VALUE)
		return EGS_FRAME_HEADER;
	v = trim_ows(v, &vlen);
	if (name_is(p, nlen, "Content-Length")) {
		if (++h->content_lengths > 1)
			return EGS_FRAME_CL_TWICE;
		if (vlen == 0 || vlen > 18)
			return EGS_FRAME_CL_BAD;
		uint64_t cl = 0;
		for (size_t i = 0; i < vlen; i++) {
			if (v[i] < '0' || v[i] > '9')
				return EGS_FRAME_CL_BAD;
			cl = cl * 10 + (uint64_t)(v[i] - '0');
		}
		h->content_length = cl;
	} else if (name_is(p, nlen, "Transfer-Encoding")) {
		h->transfer_encodings++;
		h->te_chunked = vlen == 7 && strncasecmp((const char *)v, "chunked", 7) == 0;
	} else if (name_is(p, nlen, "Authorization")) {
		if (++h->authorizations > 1)
			return EGS_FRAME_AUTH_TWICE;
	} else if (name_is(p, nlen, "Host")) {
		if (++h->hosts > 1)
			return EGS_FRAME_HOST_TWICE;
	}
	return EGS_FRAME_OK;
}

/* Checks the head p[0..n) (blank line included) line by line.  Lines end in LF with an optional CR;
 * a CR anywhere else is refused. */
static enum egs_frame_reason parse_head(const unsigned char *p, size_t n, struct head *h)
{
	memset(h, 0, sizeof(*h));
	bool first = true;
	size_t i = 0;
	while (i < n) {
		const unsigned char *nl = memchr(p + i, '\n', n - i);
		EGS_ASSERT(nl); /* head_end found the blank line */
		size_t len = (size_t)(nl - (p + i));
		if (len && p[i + len - 1] == '\r')
			len--;
		if (memchr(p + i, '\r', len))
			return first ? EGS_FRAME_LINE : EGS_FRAME_HEADER;
		if (len == 0)
			break; /* the blank line */
		enum egs_frame_reason why;
		if (first) {
			h->line = p + i;
			h->line_len = len;
			why = parse_request_line(p + i, len, h);
			first = false;
		} else {
			why = parse_header_line(p + i, len, h);
		}
		if (why)
			return why;
		i = (size_t)(nl - p) + 1;
	}
	if (first)
		return EGS_FRAME_LINE;
	if (h->transfer_encodings && h->content_lengths)
		return EGS_FRAME_CL_TE;
	if (h->transfer_encodings && (h->transfer_encodings > 1 || !h->te_chunked || h->http10))
		return EGS_FRAME_TE;
	if (h->is_head && (h->transfer_encodings || h->content_length))
		return EGS_FRAME_HEAD_BODY;
	return EGS_FRAME_OK;
}

/* Copies the head p[0..n) into f->held without its Transfer-Encoding line and blank line. */
static void hold_head(struct egs_frame *f, const unsigned char *p, size_t n)
{
	f->held = evbuffer_new();
	f->body = evbuffer_new();
	EGS_ASSERT(f->held && f->body);
	size_t i = 0;
	while (i < n) {
		const unsigned char *nl = memchr(p + i, '\n', n - i);
		size_t len = (size_t)(nl - (p + i)) + 1;
		bool blank = len <= 2 && (p[i] == '\n' || p[i] == '\r');
		bool te = len > 18 && strncasecmp((const char *)p + i, "transfer-encoding:", 18) == 0;
		if (!blank && !te)
			evbuffer_add(f->held, p + i, len);
		i += len;
	}
}

/* The method (RFC 9110 9.1) is a token: a byte before the first space that cannot be in one refuses
 * the request as soon as it arrives, instead of waiting for a line end that may never come (a TLS
 * ClientHello sent to a plain-HTTP egsd: the client then fails at once, not at its timeout).  A lone
 * CR may still become an empty line. */
static bool method_prefix_ok(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n && i < 64 && p[i] != ' '; i++)
		if (!is_tchar(p[i]) && !(p[i] == '\r' && i + 1 == n))
			return p[i] == '\n' || p[i] == '\r'; /* a line end: the whole line's parse decides */
	return true;
}

/* Takes one head from src, if complete.  Returns OK with *took telling whether a head was taken. */
static enum egs_frame_reason take_head(struct egs_frame *f, struct evbuffer *src, struct evbuffer *dst, bool *took)
{
	*took = false;
	size_t avail = evbuffer_get_length(src);
	size_t n = avail < EGS_FRAME_MAX_HEAD ? avail : EGS_FRAME_MAX_HEAD;
	const unsigned char *p = evbuffer_pullup(src, (ev_ssize_t)n);
	/* RFC 9112 2.2: empty lines before a request line are ignored. */
	if (f->scanned == 0 && n && (p[0] == '\n' || (n >= 2 && p[0] == '\r' && p[1] == '\n'))) {
		evbuffer_drain(src, p[0] == '\n' ? 1 : 2);
		*took = true; /* consumed: the caller looks again */
		return EGS_FRAME_OK;
	}
	if (!method_prefix_ok(p, n))
		return EGS_FRAME_LINE;
	size_t len = head_end(f, p, n);
	if (!len)
		return avail >= EGS_FRAME_MAX_HEAD ? EGS_FRAME_HEAD_BIG : EGS_FRAME_OK;
	struct head h;
	enum egs_frame_reason why = parse_head(p, len, &h);
	if (why)
		return why;
	f->scanned = 0;
	*took = true;
	if (h.transfer_encodings) {
		hold_head(f, p, len);
		evbuffer_drain(src, len);
		f->body_len = f->trailer_len = 0;
		f->state = ST_CHUNK_SIZE;
		return EGS_FRAME_OK;
	}
	if (h.content_length > EGS_FRAME_MAX_BODY)
		return EGS_FRAME_BODY_BIG;
	evbuffer_remove_buffer(src, dst, len);
	f->remain = h.content_length;
	f->state = f->remain ? ST_BODY : ST_HEAD;
	if (!f->remain)
		f->requests++;
	return EGS_FRAME_OK;
}

/* ---- chunked bodies ---- */

/* Reads one line of at most max bytes from src into line (NUL-terminated, CR LF stripped).
 * Returns 1 when read, 0 when more bytes are needed, -1 when the line is too long. */
static int read_line(struct evbuffer *src, char *line, size_t max)
{
	size_t avail = evbuffer_get_length(src);
	size_t n = avail < max ? avail : max;
	const unsigned char *p = evbuffer_pullup(src, (ev_ssize_t)n);
	const unsigned char *nl = n ? memchr(p, '\n', n) : NULL;
	if (!nl)
		return avail >= max ? -1 : 0;
	size_t len = (size_t)(nl - p);
	memcpy(line, p, len);
	line[len] = '\0';
	if (len && line[len - 1] == '\r')
		line[len - 1] = '\0';
	evbuffer_drain(src, len + 1);
	return 1;
}

/* chunk-size [ chunk-ext ]: hex digits, then nothing or ";" and an extension we ignore. */
static bool parse_chunk_size(const char *line, uint64_t *size)
{
	uint64_t v = 0;
	size_t digits = 0;
	const char *c = line;
	for (; *c; c++, digits++) {
		int d = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
			: *c >= 'A' && *c <= 'F' ? *c - 'A' + 10 : -1;
		if (d < 0)
			break;
		if (digits >= 15)
			return false;
		v = v * 16 + (uint64_t)d;
	}
	while (*c == ' ' || *c == '\t')
		c++;
	if (!digits || (*c && *c != ';'))
		return false;
	for (; *c; c++)
		if ((unsigned char)*c < 0x20 && *c != '\t')
			return false;
	*size = v;
	return true;
}

/* One step of a chunked body.  *moved tells whether input was consumed. */
static enum egs_frame_reason chunk_step(struct egs_frame *f, struct evbuffer *src, struct evbuffer *dst, bool *moved)
{
	char line[CHUNK_LINE_MAX + 1];
	*moved = false;
	if (f->state == ST_CHUNK_DATA) {
		size_t avail = evbuffer_get_length(src);
		size_t n = avail < f->remain ? avail : (size_t)f->remain;
		evbuffer_remove_buffer(src, f->body, n);
		f->remain -= n;
		if (!f->remain)
			f->state = ST_CHUNK_END;
		*moved = n > 0;
		return EGS_FRAME_OK;
	}
	int got = read_line(src, line, CHUNK_LINE_MAX);
	if (got < 0)
		return f->state == ST_TRAILER ? EGS_FRAME_HEAD_BIG : EGS_FRAME_CHUNK;
	if (!got)
		return EGS_FRAME_OK;
	*moved = true;
	if (f->state == ST_CHUNK_END) {
		if (line[0])
			return EGS_FRAME_CHUNK;
		f->state = ST_CHUNK_SIZE;
	} else if (f->state == ST_CHUNK_SIZE) {
		uint64_t size;
		if (!parse_chunk_size(line, &size))
			return EGS_FRAME_CHUNK;
		if (size > EGS_FRAME_MAX_BODY - f->body_len)
			return EGS_FRAME_BODY_BIG;
		f->body_len += (size_t)size;
		f->remain = size;
		f->state = size ? ST_CHUNK_DATA : ST_TRAILER;
	} else { /* ST_TRAILER: fields are read and dropped; a blank line ends the request */
		f->trailer_len += strlen(line) + 2;
		if (f->trailer_len > EGS_FRAME_MAX_HEAD)
			return EGS_FRAME_HEAD_BIG;
		if (line[0])
			return EGS_FRAME_OK;
		evbuffer_add_buffer(dst, f->held);
		evbuffer_add_printf(dst, "Content-Length: %zu\r\n\r\n", f->body_len);
		evbuffer_add_buffer(dst, f->body);
		egs_frame_cleanup(f);
		f->state = ST_HEAD;
		f->requests++;
	}
	return EGS_FRAME_OK;
}

/* ---- the feed ---- */

enum egs_frame_reason egs_frame_feed(struct egs_frame *f, struct evbuffer *src, struct evbuffer *dst, bool *progress)
{
	size_t before = evbuffer_get_length(dst);
	enum egs_frame_reason why = EGS_FRAME_OK;
	while (f->state != ST_DEAD && evbuffer_get_length(src)) {
		bool moved = false;
		if (f->state == ST_HEAD) {
			why = take_head(f, src, dst, &moved);
		} else if (f->state == ST_BODY) {
			size_t avail = evbuffer_get_length(src);
			size_t n = avail < f->remain ? avail : (size_t)f->remain;
			evbuffer_remove_buffer(src, dst, n);
			f->remain -= n;
			if (!f->remain) {
				f->state = ST_HEAD;
				f->requests++;
			}
			moved = true;
		} else {
			why = chunk_step(f, src, dst, &moved);
		}
		if (why) {
			egs_frame_cleanup(f);
			f->state = ST_DEAD;
			f->remain = (uint64_t)why;
			break;
		}
		if (!moved)
			break;
	}
	*progress = evbuffer_get_length(dst) > before;
	if (f->state == ST_DEAD) {
		evbuffer_drain(src, evbuffer_get_length(src));
		return (enum egs_frame_reason)f->remain;
	}
	return EGS_FRAME_OK;
}
