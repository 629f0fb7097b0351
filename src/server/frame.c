/*
 * frame.c: request parsing by RFC 9112 for egsd's connection front (see frame.h).
 *
 * Why our own: libevent 2.1's evhttp took the first of two Content-Lengths, treated an unknown
 * Transfer-Encoding as "no body", ignored a body on HEAD and answered its own refusals with an HTML
 * page.  Each of those let the bytes after a request be read as a second, smuggled request.  This
 * parser decides the length of every request once, and the front hands the handlers exactly that.
 */
#include "server/frame.h"

#include "core/common.h"
#include "core/util.h"

#include <string.h>
#include <strings.h>

enum { ST_HEAD, ST_BODY, ST_CHUNK_SIZE, ST_CHUNK_DATA, ST_CHUNK_END, ST_TRAILER };

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

bool egs_frame_in_head(const struct egs_frame *f)
{
	return f->state == ST_HEAD && !f->dead;
}

/* ---- the head ---- */

/* Length of the head at the start of p[0..n) (through its blank line), 0 when not complete yet.
 * Lines end in LF with an optional CR before it. */
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

/* The long runs of a head (the request target, the Authorization value) are checked eight bytes at
 * a time: a word without a byte of the refused ranges passes at once, a word with one (or with a
 * byte the word test cannot tell apart, such as HTAB in a value) goes through the table.  has_less
 * is exact for n <= 128 at any byte values (a byte below n borrows into its own top bit; without
 * one no byte borrows, and a byte of 0x80 or more has its top bit cleared by ~w). */
#define ONES 0x0101010101010101ull
#define TOPS 0x8080808080808080ull

static inline uint64_t word_at(const unsigned char *p)
{
	uint64_t w;
	memcpy(&w, p, sizeof(w));
	return w;
}

static inline uint64_t has_less(uint64_t w, unsigned n)
{
	return (w - ONES * n) & ~w & TOPS;
}

static inline uint64_t has_byte(uint64_t w, unsigned c)
{
	return has_less(w ^ (ONES * c), 1);
}

/* The bits of byte_class any byte of p[0..n) has, as far as mask asks: BC_BAD_TARGET or BC_BAD_VALUE. */
static inline __attribute__((always_inline)) unsigned char class_any(const unsigned char *p, size_t n,
									     unsigned char mask)
{
	unsigned char bad = 0;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w = word_at(p + i);
		/* controls and DEL are in both sets; space and bytes over 0x7f only in the target's */
		uint64_t maybe = has_less(w, mask == BC_BAD_TARGET ? 0x21 : 0x20) | has_byte(w, 0x7f);
		if (mask == BC_BAD_TARGET)
			maybe |= w & TOPS;
		if (maybe)
			for (size_t k = i; k < i + 8; k++)
				bad |= byte_class[p[k]];
	}
	for (; i < n; i++)
		bad |= byte_class[p[i]];
	return bad & mask;
}

/* name[0..n) is the lower-case want, ignoring ASCII case; name is a token (its bytes passed
 * is_tchar), so setting bit 5 folds exactly its letters (a '-' only matches '-', as CR is no token
 * byte) and no other token byte lands on a letter. */
static inline __attribute__((always_inline)) bool name_is(const unsigned char *name, size_t n, const char *want)
{
	if (strlen(want) != n)
		return false;
	size_t i = 0;
	if (n >= 8) { /* words, the last one overlapping the one before */
		for (;; i += 8) {
			if (i > n - 8)
				i = n - 8;
			if ((word_at(name + i) | ONES * 0x20) != word_at((const unsigned char *)want + i))
				return false;
			if (i == n - 8)
				return true;
		}
	}
	for (; i < n; i++)
		if ((name[i] | 0x20) != (unsigned char)want[i])
			return false;
	return true;
}

struct head {
	const unsigned char *line; /* the request line */
	size_t line_len;
	bool is_head, http10;
	int content_lengths, transfer_encodings, authorizations, hosts, connections;
	bool te_chunked, conn_close, conn_keep_alive;
	uint64_t content_length;
	size_t fields;
	uint16_t kept[EGS_FRAME_KEPT_FIELDS][4]; /* struct egs_frame_req's */
	enum egs_frame_method method;
	const unsigned char *target;
	size_t target_len;
};

static const struct method {
	const char *name;
	size_t len;
	enum egs_frame_method m;
} methods[] = { { "GET", 3, EGS_M_GET },	 { "POST", 4, EGS_M_POST }, { "PUT", 3, EGS_M_PUT },
		{ "DELETE", 6, EGS_M_DELETE },	 { "PATCH", 5, EGS_M_PATCH }, { "HEAD", 4, EGS_M_HEAD },
		{ "OPTIONS", 7, EGS_M_OPTIONS }, { NULL, 0, EGS_M_GET } };

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
	if (class_any(target, (size_t)(sp2 - target), BC_BAD_TARGET)) /* ASCII without spaces or controls */
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
	h->target = target;
	h->target_len = (size_t)(sp2 - target);
	for (const struct method *m = methods; m->name; m++) {
		if (m->len == mlen && memcmp(m->name, p, mlen) == 0) {
			h->method = m->m;
			h->is_head = m->m == EGS_M_HEAD;
			return EGS_FRAME_OK;
		}
	}
	return EGS_FRAME_METHOD;
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

/* Checks the header line p[0..n) (its line end cut off), base + off, and keeps its place in h. */
static enum egs_frame_reason parse_header_line(const unsigned char *base, size_t off, size_t n, struct head *h)
{
	const unsigned char *p = base + off;
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
	if (class_any(v, vlen, BC_BAD_VALUE))
		return EGS_FRAME_HEADER;
	v = trim_ows(v, &vlen);
	if (h->fields < EGS_FRAME_KEPT_FIELDS) {
		uint16_t *k = h->kept[h->fields];
		k[0] = (uint16_t)off;
		k[1] = (uint16_t)nlen;
		k[2] = (uint16_t)(v - base);
		k[3] = (uint16_t)vlen;
	}
	if (name_is(p, nlen, "content-length")) {
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
	} else if (name_is(p, nlen, "transfer-encoding")) {
		h->transfer_encodings++;
		h->te_chunked = vlen == 7 && strncasecmp((const char *)v, "chunked", 7) == 0;
	} else if (name_is(p, nlen, "authorization")) {
		if (++h->authorizations > 1)
			return EGS_FRAME_AUTH_TWICE;
	} else if (name_is(p, nlen, "host")) {
		if (++h->hosts > 1)
			return EGS_FRAME_HOST_TWICE;
	} else if (name_is(p, nlen, "connection") && ++h->connections == 1) { /* the first one counts */
		h->conn_close = vlen == 5 && strncasecmp((const char *)v, "close", 5) == 0;
		h->conn_keep_alive = vlen == 10 && strncasecmp((const char *)v, "keep-alive", 10) == 0;
	}
	return EGS_FRAME_OK;
}

/* Checks the head p[0..n) (blank line included) line by line.  Lines end in LF with an optional CR;
 * a CR anywhere else is refused (in a header line by parse_header_line's byte checks: a CR is neither
 * a token byte nor allowed in a value, and either way the answer is EGS_FRAME_HEADER). */
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
		if (first && memchr(p + i, '\r', len))
			return EGS_FRAME_LINE;
		if (len == 0)
			break; /* the blank line */
		enum egs_frame_reason why;
		if (first) {
			h->line = p + i;
			h->line_len = len;
			why = parse_request_line(p + i, len, h);
			first = false;
		} else {
			why = parse_header_line(p, i, len, h);
			h->fields++;
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

/* Reads the head when complete; sets f->state to what follows it. */
static enum egs_frame_reason take_head(struct egs_frame *f, const unsigned char *p, size_t n, size_t *used)
{
	size_t len = n < EGS_FRAME_MAX_HEAD ? n : EGS_FRAME_MAX_HEAD;
	/* RFC 9112 2.2: empty lines before a request line are ignored (a request line never starts
	 * with a line end, so these tests need no state). */
	if (len && (p[0] == '\n' || (len >= 2 && p[0] == '\r' && p[1] == '\n'))) {
		*used = p[0] == '\n' ? 1 : 2;
		return EGS_FRAME_OK;
	}
	if (len == 1 && p[0] == '\r')
		return EGS_FRAME_OK; /* perhaps an empty line: wait for the next byte */
	if (!method_prefix_ok(p, len))
		return EGS_FRAME_LINE;
	size_t hl = head_end(f, p, len);
	if (!hl)
		return n >= EGS_FRAME_MAX_HEAD ? EGS_FRAME_HEAD_BIG : EGS_FRAME_OK;
	struct head h;
	enum egs_frame_reason why = parse_head(p, hl, &h);
	if (why)
		return why;
	struct egs_frame_req *r = &f->req;
	r->method = h.method;
	r->http10 = h.http10;
	r->keep_alive = h.http10 && h.conn_keep_alive;
	r->close = h.http10 ? !h.conn_keep_alive : h.conn_close;
	r->target_off = (size_t)(h.target - p);
	r->target_len = h.target_len;
	r->nfields = h.fields;
	memcpy(r->kept, h.kept, sizeof(h.kept[0]) * (h.fields < EGS_FRAME_KEPT_FIELDS ? h.fields : EGS_FRAME_KEPT_FIELDS));
	r->head_len = hl;
	f->head_len = hl;
	f->body_len = 0;
	if (h.transfer_encodings) {
		f->pos = hl;
		f->trailer_len = 0;
		f->state = ST_CHUNK_SIZE;
		return EGS_FRAME_OK;
	}
	if (h.content_length > EGS_FRAME_MAX_BODY)
		return EGS_FRAME_BODY_BIG;
	f->body_len = (size_t)h.content_length;
	f->state = ST_BODY;
	return EGS_FRAME_OK;
}

/* ---- chunked bodies ---- */

/* chunk-size [ chunk-ext ]: hex digits, then nothing or ";" and an extension we ignore. */
static bool parse_chunk_size(const unsigned char *c, const unsigned char *end, uint64_t *size)
{
	uint64_t v = 0;
	size_t digits = 0;
	for (; c < end; c++, digits++) {
		int d = egs_hex_digit((char)*c);
		if (d < 0)
			break;
		if (digits >= 15)
			return false;
		v = v * 16 + (uint64_t)d;
	}
	while (c < end && (*c == ' ' || *c == '\t'))
		c++;
	if (!digits || (c < end && *c != ';'))
		return false;
	for (; c < end; c++)
		if (*c < 0x20 && *c != '\t')
			return false;
	*size = v;
	return true;
}

/* One step of a chunked body over p[f->pos..n): false when more bytes are needed.  Data bytes move
 * to p[head_len + body_len], never after the raw bytes still to read (the framing only shrinks). */
static bool chunk_step(struct egs_frame *f, unsigned char *p, size_t n, enum egs_frame_reason *why)
{
	if (f->state == ST_CHUNK_DATA) {
		size_t avail = n - f->pos;
		size_t k = avail < f->remain ? avail : (size_t)f->remain;
		if (!k)
			return false;
		memmove(p + f->head_len + f->body_len, p + f->pos, k);
		f->pos += k;
		f->body_len += k;
		f->remain -= k;
		if (!f->remain)
			f->state = ST_CHUNK_END;
		return true;
	}
	size_t avail = n - f->pos, look = avail < CHUNK_LINE_MAX ? avail : CHUNK_LINE_MAX;
	const unsigned char *line = p + f->pos, *nl = look ? memchr(line, '\n', look) : NULL;
	if (!nl) {
		if (avail >= CHUNK_LINE_MAX)
			*why = f->state == ST_TRAILER ? EGS_FRAME_HEAD_BIG : EGS_FRAME_CHUNK;
		return false;
	}
	size_t len = (size_t)(nl - line);
	f->pos += len + 1;
	if (len && line[len - 1] == '\r')
		len--;
	if (f->state == ST_CHUNK_END) {
		if (len)
			*why = EGS_FRAME_CHUNK;
		f->state = ST_CHUNK_SIZE;
	} else if (f->state == ST_CHUNK_SIZE) {
		uint64_t size;
		if (!parse_chunk_size(line, line + len, &size)) {
			*why = EGS_FRAME_CHUNK;
		} else if (size > EGS_FRAME_MAX_BODY - f->body_len) {
			*why = EGS_FRAME_BODY_BIG;
		} else {
			f->remain = size;
			f->state = size ? ST_CHUNK_DATA : ST_TRAILER;
		}
	} else { /* ST_TRAILER: fields are read and dropped; a blank line ends the request */
		f->trailer_len += len + 2;
		if (f->trailer_len > EGS_FRAME_MAX_HEAD)
			*why = EGS_FRAME_HEAD_BIG;
		else if (!len)
			f->state = ST_HEAD; /* complete */
	}
	return true;
}

/* ---- the parse ---- */

enum egs_frame_reason egs_frame_parse(struct egs_frame *f, unsigned char *p, size_t n, size_t *used,
				      const struct egs_frame_req **out)
{
	*used = 0;
	*out = NULL;
	if (f->dead)
		return f->dead;
	enum egs_frame_reason why = EGS_FRAME_OK;
	if (f->state == ST_HEAD) {
		why = take_head(f, p, n, used);
		if (why || *used || f->state == ST_HEAD)
			goto out;
	}
	if (f->state == ST_BODY) {
		if (n - f->head_len < f->body_len)
			goto out;
		*used = f->head_len + f->body_len;
	} else {
		while (f->state != ST_HEAD && !why && chunk_step(f, p, n, &why))
			;
		if (why || f->state != ST_HEAD)
			goto out;
		*used = f->pos;
	}
	f->req.body_len = f->body_len;
	*out = &f->req;
	f->state = ST_HEAD;
	f->scanned = 0;
out:
	if (why) {
		f->dead = why;
		*used = 0;
		*out = NULL;
	}
	return why;
}

size_t egs_frame_fields(const unsigned char *p, const struct egs_frame_req *req, struct egs_frame_field *fields,
			size_t skip, size_t max)
{
	size_t i = 0, k = 0, seen = 0, n = req->head_len;
	bool first = true;
	if (req->nfields <= EGS_FRAME_KEPT_FIELDS) { /* the parse kept every line's place */
		for (size_t j = skip; j < req->nfields && k < max; j++, k++) {
			const uint16_t *f = req->kept[j];
			fields[k].name = (const char *)(p + f[0]);
			fields[k].name_len = f[1];
			fields[k].value = (const char *)(p + f[2]);
			fields[k].value_len = f[3];
		}
		return k;
	}
	while (i < n && k < max && seen < req->nfields) {
		const unsigned char *nl = memchr(p + i, '\n', n - i);
		size_t len = (size_t)(nl - (p + i));
		if (len && p[i + len - 1] == '\r')
			len--;
		if (len == 0)
			break;
		if (!first && seen++ >= skip) {
			const unsigned char *colon = memchr(p + i, ':', len);
			size_t vlen = len - (size_t)(colon - (p + i)) - 1;
			const unsigned char *v = trim_ows(colon + 1, &vlen);
			fields[k].name = (const char *)(p + i);
			fields[k].name_len = (uint32_t)(colon - (p + i));
			fields[k].value = (const char *)v;
			fields[k].value_len = (uint32_t)vlen;
			k++;
		}
		first = false;
		i = (size_t)(nl - p) + 1;
	}
	return k;
}
