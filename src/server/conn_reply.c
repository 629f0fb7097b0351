/*
 * conn_reply.c: the requests of egsd's HTTP front and their answers (conn.h).
 *
 * A request is one allocation: the struct, its header fields, a copy of its head (fields and the
 * target NUL-terminated in place), its path and query, and its body.  An answer's head is formatted
 * here as bytes (status line, Date once a second, Content-Type, the added fields, Content-Length,
 * Connection), as evhttp formatted it (the same fields in the same cases), and its body is moved by
 * reference.  Answers leave in request order: one that is ready before an earlier one waits in its
 * request (pend) until the earlier ones went into the connection's output (egs__conn_advance).
 */
#include "server/conn_int.h"

#include "core/util.h"
#include "server/loop_alloc.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- the request ---- */

/* Splits target (n bytes) into path and query as evhttp's URI parser did: an absolute form or an
 * authority ("//host") is skipped to its path, the fragment dropped.  dst has room for n + 2 bytes. */
static void split_target(const char *t, size_t n, char *dst, const char **path, const char **query)
{
	*path = *query = NULL;
	if (n == 1 && t[0] == '*')
		return;
	size_t i = 0;
	if (n > 7 && strncasecmp(t, "http://", 7) == 0)
		i = 5;
	else if (n > 8 && strncasecmp(t, "https://", 8) == 0)
		i = 6;
	if (n - i >= 2 && t[i] == '/' && t[i + 1] == '/') /* an authority: up to the path */
		for (i += 2; i < n && t[i] != '/' && t[i] != '?' && t[i] != '#'; i++)
			;
	size_t pe = i;
	while (pe < n && t[pe] != '?' && t[pe] != '#')
		pe++;
	memcpy(dst, t + i, pe - i);
	dst[pe - i] = '\0';
	*path = dst;
	if (pe < n && t[pe] == '?') {
		size_t qe = pe + 1;
		while (qe < n && t[qe] != '#')
			qe++;
		char *qd = dst + (pe - i) + 1;
		memcpy(qd, t + pe + 1, qe - pe - 1);
		qd[qe - pe - 1] = '\0';
		*query = qd;
	}
}

static void enqueue(struct conn *c, struct egs_hreq *q)
{
	q->c = c;
	c->refs++;
	c->inflight++;
	if (c->qlast)
		c->qlast->next = q;
	else
		c->qfirst = q;
	c->qlast = q;
}

struct egs_hreq *egs__hreq_new(struct conn *c, const unsigned char *p, const struct egs_frame_req *req)
{
	size_t nf = req->nfields, hl = req->head_len, tl = req->target_len;
	size_t size = sizeof(struct egs_hreq) + nf * sizeof(struct egs_hfield) + hl + 1 + tl + 2 + req->body_len + 1;
	struct egs_hreq *q = egs_loop_malloc(size); /* freed a turn or so later with its turn's others */
	memset(q, 0, sizeof(*q));
	q->fields = (struct egs_hfield *)(q + 1);
	unsigned char *head = (unsigned char *)(q->fields + nf);
	memcpy(head, p, hl);
	head[hl] = '\0';
	char *pq = (char *)head + hl + 1, *body = pq + tl + 2;
	memcpy(body, p + hl, req->body_len);
	body[req->body_len] = '\0';
	q->body = body;
	q->body_len = req->body_len;
	q->method = (enum evhttp_cmd_type)(1u << req->method);
	q->http10 = req->http10;
	q->close = req->close;
	q->keep_alive = req->keep_alive;
	char *target = (char *)head + req->target_off;
	split_target(target, tl, pq, &q->path, &q->query);
	struct egs_frame_field ff[64];
	for (size_t done = 0; done < nf;) { /* the fields, in batches, NUL-terminated in the copy */
		struct egs_frame_req part = *req;
		size_t k = egs_frame_fields(head, &part, ff, done, EGS_ARRAY_LEN(ff));
		for (size_t i = 0; i < k; i++) {
			char *name = (char *)ff[i].name, *value = (char *)ff[i].value;
			name[ff[i].name_len] = '\0';
			value[ff[i].value_len] = '\0';
			q->fields[done + i].name = name;
			q->fields[done + i].value = value;
		}
		if (!k)
			break;
		done += k;
	}
	q->nfields = nf;
	target[tl] = '\0'; /* after the fields: the request line's end is not one of theirs */
	q->target = target;
	enqueue(c, q);
	return q;
}

struct egs_hreq *egs__hreq_refusal(struct conn *c, enum egs_frame_reason why)
{
	struct egs_hreq *q = egs_calloc(1, sizeof(*q));
	q->refusal = why;
	q->method = EVHTTP_REQ_GET;
	q->target = q->path = "-";
	enqueue(c, q);
	return q;
}

void egs__hreq_free(struct egs_hreq *q)
{
	struct conn *c = q->c;
	if (q->hdrs)
		evbuffer_free(q->hdrs);
	if (q->pend)
		evbuffer_free(q->pend);
	egs_loop_free(q);
	egs__conn_unref(c);
}

enum egs_frame_reason egs_hreq_refusal(const struct egs_hreq *q)
{
	return q->refusal;
}

enum evhttp_cmd_type egs_hreq_method(const struct egs_hreq *q)
{
	return q->method;
}

const char *egs_hreq_target(const struct egs_hreq *q)
{
	return q->target;
}

const char *egs_hreq_path(const struct egs_hreq *q)
{
	return q->path;
}

const char *egs_hreq_query(const struct egs_hreq *q)
{
	return q->query;
}

const char *egs_hreq_header(const struct egs_hreq *q, const char *name)
{
	for (size_t i = 0; i < q->nfields; i++)
		if (strcasecmp(q->fields[i].name, name) == 0)
			return q->fields[i].value;
	return NULL;
}

bool egs_hreq_header_at(const struct egs_hreq *q, size_t i, const char **name, const char **value)
{
	if (i >= q->nfields)
		return false;
	*name = q->fields[i].name;
	*value = q->fields[i].value;
	return true;
}

void egs_hreq_body(const struct egs_hreq *q, const char **p, size_t *len)
{
	*p = q->body;
	*len = q->body_len;
}

const char *egs_hreq_peer(const struct egs_hreq *q)
{
	return q->c ? q->c->peer : "";
}

/* ---- the answer's head ---- */

void egs_hreq_header_add(struct egs_hreq *q, const char *name, const char *value)
{
	static const char *const front[] = { "Content-Length", "Transfer-Encoding", "Connection", "Date" };
	for (size_t i = 0; i < EGS_ARRAY_LEN(front); i++)
		if (strcasecmp(name, front[i]) == 0)
			return;
	if (strcasecmp(name, "Content-Type") == 0)
		q->ctype = ""; /* given as a field: no default one */
	if (!q->hdrs)
		q->hdrs = evbuffer_new();
	EGS_ASSERT(q->hdrs);
	size_t nl = strlen(name), vl = strlen(value);
	/* A value with a line end would add a field of the caller's choosing: cut it there. */
	for (size_t i = 0; i < vl; i++)
		if (value[i] == '\r' || value[i] == '\n')
			vl = i;
	evbuffer_add(q->hdrs, name, nl);
	evbuffer_add(q->hdrs, ": ", 2);
	evbuffer_add(q->hdrs, value, vl);
	evbuffer_add(q->hdrs, "\r\n", 2);
}

void egs_hreq_content_type(struct egs_hreq *q, const char *type)
{
	q->ctype = type;
}

void egs_hreq_headers_clear(struct egs_hreq *q)
{
	q->ctype = NULL;
	if (q->hdrs)
		evbuffer_drain(q->hdrs, evbuffer_get_length(q->hdrs));
}

static void date_now(struct egs_conns *cs)
{
	static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
	static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	time_t t = time(NULL);
	if (t == cs->date_sec)
		return;
	struct tm tm;
	gmtime_r(&t, &tm);
	int n = snprintf(cs->date, sizeof(cs->date), "Date: %s, %02d %s %04d %02d:%02d:%02d GMT\r\n", days[tm.tm_wday % 7],
			 tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
	cs->date_len = n > 0 && (size_t)n < sizeof(cs->date) ? (size_t)n : 0;
	cs->date_sec = t;
}

static size_t put(char *h, size_t at, const char *s, size_t n)
{
	memcpy(h + at, s, n);
	return at + n;
}

#define PUT_LIT(h, at, s) put((h), (at), (s), sizeof(s) - 1)

/* Writes n in decimal at h + at (20 digits at most); returns the new end.  By hand: snprintf's
 * "%lld" was ~800 instructions of every answer (issue 16). */
static size_t put_uint(char *h, size_t at, unsigned long long n)
{
	char d[20];
	size_t k = 0;
	do {
		d[k++] = (char)('0' + n % 10);
		n /= 10;
	} while (n);
	while (k)
		h[at++] = d[--k];
	return at;
}

/* Writes the head of q's answer into dst.  body_len: the body's length, or -1 for a stream. */
static void put_head(struct egs_hreq *q, int status, long long body_len, struct evbuffer *dst)
{
	struct egs_conns *cs = q->c->cs;
	char h[512];
	size_t at = PUT_LIT(h, 0, "HTTP/1.1 ");
	if (q->http10)
		h[7] = '0';
	int s = status >= 100 && status <= 999 ? status : 500;
	h[at++] = (char)('0' + s / 100);
	h[at++] = (char)('0' + s / 10 % 10);
	h[at++] = (char)('0' + s % 10);
	at = status == 200 ? PUT_LIT(h, at, " OK\r\n") : PUT_LIT(h, at, " Error\r\n");
	date_now(cs);
	at = put(h, at, cs->date, cs->date_len);
	bool body = q->method != EVHTTP_REQ_HEAD && status != 204 && status != 304 && status >= 200;
	if (body && q->ctype != NULL && q->ctype[0] && strlen(q->ctype) < 200) {
		at = PUT_LIT(h, at, "Content-Type: ");
		at = put(h, at, q->ctype, strlen(q->ctype));
		at = PUT_LIT(h, at, "\r\n");
	} else if (body && q->ctype == NULL) {
		at = PUT_LIT(h, at, "Content-Type: text/html; charset=ISO-8859-1\r\n");
	}
	if (body_len < 0 && !q->http10)
		at = PUT_LIT(h, at, "Transfer-Encoding: chunked\r\n");
	else if (body_len >= 0 && body && (!q->http10 || q->keep_alive)) {
		at = PUT_LIT(h, at, "Content-Length: ");
		at = put_uint(h, at, (unsigned long long)body_len);
		at = PUT_LIT(h, at, "\r\n");
	}
	if (q->http10 && q->keep_alive && !q->close)
		at = PUT_LIT(h, at, "Connection: keep-alive\r\n");
	else if (q->close)
		at = PUT_LIT(h, at, "Connection: close\r\n");
	bool extra = q->hdrs && evbuffer_get_length(q->hdrs);
	if (!extra)
		at = PUT_LIT(h, at, "\r\n"); /* the head's end in the same add: one evbuffer_add, not two */
	EGS_ASSERT(at < sizeof(h));
	evbuffer_add(dst, h, at);
	if (extra) {
		evbuffer_add_buffer(dst, q->hdrs);
		evbuffer_add(dst, "\r\n", 2);
	}
}

/* ---- answers in order ---- */

/* Where q's answer bytes go now: the connection's output when q is first in line, else q's own. */
static struct evbuffer *sink(struct egs_hreq *q)
{
	if (q->c->qfirst == q)
		return q->c->out;
	if (!q->pend)
		q->pend = evbuffer_new();
	EGS_ASSERT(q->pend);
	return q->pend;
}

void egs__conn_advance(struct conn *c)
{
	struct egs_hreq *q;
	while ((q = c->qfirst) && q->answered) {
		if (q->pend) {
			evbuffer_add_buffer(c->out, q->pend);
			evbuffer_free(q->pend);
			q->pend = NULL;
		}
		if (!q->done)
			return; /* a stream: its next chunks go straight to the output */
		if (q->close || q->refusal)
			c->flush_close = true;
		c->qfirst = q->next;
		if (!c->qfirst)
			c->qlast = NULL;
		egs__hreq_free(q);
	}
}

/* The answer of q is complete (done) or has begun: it may leave once the earlier ones have.  A
 * request is in flight (its connection busy) until done. */
static void answered(struct egs_hreq *q, bool done)
{
	struct conn *c = q->c;
	q->answered = true;
	if (done && !q->done) {
		q->done = true;
		if (c->inflight)
			c->inflight--;
	}
	if (c->dead) {
		if (q->done) /* an orphan: nobody reads its answer */
			egs__hreq_free(q);
		return;
	}
	if (c->qfirst == q)
		egs__conn_advance(c);
	egs__conn_ready(c);
}

void egs_hreq_reply(struct egs_hreq *q, int status, struct evbuffer *body)
{
	if (q->c->dead) {
		answered(q, true);
		return;
	}
	struct evbuffer *dst = sink(q);
	size_t len = body ? evbuffer_get_length(body) : 0;
	put_head(q, status, (long long)len, dst);
	if (body && q->method != EVHTTP_REQ_HEAD)
		evbuffer_add_buffer(dst, body);
	else if (body)
		evbuffer_drain(body, len);
	answered(q, true);
}

void egs_hreq_stream_start(struct egs_hreq *q, int status)
{
	q->streaming = true;
	q->chunked = !q->http10;
	if (q->http10)
		q->close = true;
	if (!q->c->dead)
		put_head(q, status, -1, sink(q));
	answered(q, false);
}

void egs_hreq_stream_chunk(struct egs_hreq *q, const void *data, size_t len)
{
	if (q->c->dead || !len)
		return;
	struct evbuffer *dst = sink(q);
	if (q->chunked)
		evbuffer_add_printf(dst, "%zx\r\n", len);
	evbuffer_add(dst, data, len);
	if (q->chunked)
		evbuffer_add(dst, "\r\n", 2);
	egs__conn_ready(q->c);
}

void egs_hreq_stream_end(struct egs_hreq *q)
{
	q->close_cb = NULL;
	if (!q->c->dead && q->chunked)
		evbuffer_add(sink(q), "0\r\n\r\n", 5);
	answered(q, true);
}

void egs_hreq_on_close(struct egs_hreq *q, void (*cb)(void *arg), void *arg)
{
	q->close_cb = cb;
	q->close_arg = arg;
}

size_t egs_hreq_behind(const struct egs_hreq *q)
{
	if (q->c->dead)
		return 0;
	return evbuffer_get_length(q->c->out) + (q->pend ? evbuffer_get_length(q->pend) : 0);
}

void egs_hreq_abandon(struct egs_hreq *q)
{
	if (!q)
		return;
	if (!q->c->dead) { /* still queued: answer it with nothing, so the queue moves */
		struct evbuffer *b = evbuffer_new();
		EGS_ASSERT(b);
		egs_hreq_reply(q, 503, b);
		evbuffer_free(b);
		return;
	}
	egs__hreq_free(q);
}
