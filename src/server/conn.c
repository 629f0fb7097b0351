/*
 * conn.c: egsd's HTTP/1.1 server front (conn.h): accepting, reading and parsing, writing, closing,
 * lingering after a refusal, the connection bound and the timeouts.
 *
 * One read per readiness into a 64 KiB buffer all connections share (no FIONREAD, no buffer per
 * idle connection); the unparsed rest of a request is copied to the connection's own buffer and the
 * next read appends there.  The complete requests in the bytes are parsed and dispatched in that turn
 * (up to EGS_CONN_PIPELINE in flight; after TURN_REQUESTS the rest waits for the connections ready
 * after it), and the answers ready by then leave with one writev (evbuffer_write; under TLS one
 * SSL_write per record).  The read event stays registered for
 * the connection's life: it is dropped only while the pipeline is full or after the client's end of
 * file, so a request costs no epoll_ctl.  Output the kernel does not take waits for EV_WRITE.
 *
 * Timeouts are swept once a second over the list of connections (least recently active first):
 * idle keep-alive, a head arriving too slowly, output not taken, the end of a linger.
 */
#include "server/conn_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FD_RESERVE 64            /* descriptors kept for the store, the log, agents' calls, webhooks */
#define LINGER_BYTES (16u << 20) /* after a refusal, discard at most this much ... */
#define LINGER_READ_S 2          /* ... for at most this long */
#define EVICT_ON_EMFILE 16
#define ACCEPT_PAUSE_US 100000
#define READ_BUF (64 * 1024)
#define TLS_WRITE_MAX 16384       /* one TLS record per SSL_write */
#define WRITE_STALL_S 90          /* output the client does not read for this long ends it */
#define OUT_PAUSE (1u << 20)      /* answers not taken by the client: reading pauses beyond this */
#define TURN_REQUESTS 8           /* requests of one connection dispatched before the others' turn */
/* A request's raw bytes (a chunked body's framing included) are bounded too. */
#define MAX_RAW (EGS_FRAME_MAX_HEAD + 4 * EGS_FRAME_MAX_BODY)

static int64_t mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec;
}

/* ---- the list, least recently active first ---- */

static void list_unlink(struct egs_conns *cs, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		cs->first = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		cs->last = c->prev;
	c->prev = c->next = NULL;
}

static void list_append(struct egs_conns *cs, struct conn *c)
{
	c->next = NULL;
	c->prev = cs->last;
	if (cs->last)
		cs->last->next = c;
	else
		cs->first = c;
	cs->last = c;
}

/* ---- closing ---- */

void egs__conn_unref(struct conn *c)
{
	EGS_ASSERT(c->refs > 0);
	c->refs--;
	if (c->dead && !c->refs)
		free(c);
}

/* Ends c now: the socket is closed, queued answers dropped; a request still unanswered stays (an
 * orphan) and a stream's close callback runs.  c's memory goes with its last request. */
static void conn_close(struct conn *c)
{
	if (c->dead)
		return;
	struct egs_conns *cs = c->cs;
	c->dead = true;
	list_unlink(cs, c);
	cs->count--;
	event_free(c->rev);
	event_free(c->wev);
	event_free(c->kick);
	if (c->ssl)
		SSL_free(c->ssl);
	close(c->fd);
	free(c->in);
	evbuffer_free(c->out);
	c->out = NULL;
	c->refs++; /* c stays while its queue is walked */
	struct egs_hreq *q = c->qfirst;
	c->qfirst = c->qlast = NULL;
	while (q) {
		struct egs_hreq *next = q->next;
		q->next = NULL;
		if (q->done)
			egs__hreq_free(q);
		else if (q->close_cb)
			q->close_cb(q->close_arg); /* ends the stream: q is freed */
		q = next;
	}
	egs__conn_unref(c);
}

/* Closes up to n idle connections, least recently active first; returns how many. */
static size_t evict_idle(struct egs_conns *cs, size_t n, const struct conn *keep)
{
	size_t done = 0;
	for (struct conn *c = cs->first, *next; c && done < n; c = next) {
		next = c->next;
		if (c == keep || c->inflight || c->in_turn || evbuffer_get_length(c->out))
			continue; /* busy, or an answer still to write */
		conn_close(c);
		cs->evicted++;
		done++;
	}
	return done;
}

/* Whether c reads now: not while its pipeline is full, its answers wait for the client, or it
 * asked to close; a refused or lingering connection reads to discard. */
static bool may_read(const struct conn *c)
{
	if (c->eof || c->dead)
		return false;
	if (c->lingering || c->refused)
		return true;
	return !c->close_after && c->inflight < EGS_CONN_PIPELINE && evbuffer_get_length(c->out) < OUT_PAUSE;
}

/* Registers or drops c's read interest as may_read says: an epoll_ctl only when that changes. */
static void sync_reading(struct conn *c)
{
	bool want = may_read(c);
	if (want && c->stalled && !c->refused && !c->lingering)
		event_active(c->kick, EV_WRITE, 0); /* requests read before the pause: parse them now */
	if (want == c->reading)
		return;
	if (want)
		event_add(c->rev, NULL);
	else
		event_del(c->rev);
	c->reading = want;
}

/* The refusal is in the kernel: send FIN (after TLS close_notify, so a TLS client reads the answer's
 * end as an end), then read and discard what the client still sends, for a while. */
static void linger(struct conn *c)
{
	if (c->ssl) {
		ERR_clear_error();
		if (SSL_shutdown(c->ssl) < 0)
			ERR_clear_error();
	}
	shutdown(c->fd, SHUT_WR);
	if (c->eof) { /* the client has ended its side: nothing to wait for */
		conn_close(c);
		return;
	}
	c->lingering = true;
	c->linger_until = c->cs->now_s + LINGER_READ_S;
	sync_reading(c);
}

/* ---- writing ---- */

/* Writes what the kernel takes of c->out.  False when c was closed (a write error). */
static bool write_out(struct conn *c)
{
	while (evbuffer_get_length(c->out)) {
		if (!c->ssl) {
			int n = evbuffer_write(c->out, c->fd);
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
				break;
			if (n <= 0) {
				conn_close(c);
				return false;
			}
			c->write_s = c->cs->now_s;
			continue;
		}
		size_t len = evbuffer_get_length(c->out);
		size_t n = c->tls_retry ? c->tls_retry : len < TLS_WRITE_MAX ? len : TLS_WRITE_MAX;
		ERR_clear_error();
		int r = SSL_write(c->ssl, evbuffer_pullup(c->out, (ev_ssize_t)n), (int)n);
		if (r > 0) {
			evbuffer_drain(c->out, (size_t)r);
			c->tls_retry = 0;
			c->write_s = c->cs->now_s;
			continue;
		}
		int e = SSL_get_error(c->ssl, r);
		if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
			c->tls_retry = n; /* OpenSSL's rule: the same write again, before any other */
			break;
		}
		ERR_clear_error();
		conn_close(c);
		return false;
	}
	return true;
}

/* Writes the output, then waits for the socket, closes, or lingers as the state asks. */
static void conn_flush(struct conn *c)
{
	if (c->dead || c->lingering)
		return;
	size_t before = evbuffer_get_length(c->out);
	if (before && !write_out(c))
		return;
	if (evbuffer_get_length(c->out)) {
		if (!before || !c->wev_on) {
			if (!c->wev_on)
				c->write_s = c->cs->now_s;
			event_add(c->wev, NULL);
			c->wev_on = true;
		}
		sync_reading(c);
		return;
	}
	if (c->wev_on) {
		event_del(c->wev);
		c->wev_on = false;
	}
	if (c->flush_close) {
		if (c->refused)
			linger(c);
		else
			conn_close(c);
	} else if (c->eof && !c->inflight) {
		conn_close(c);
	} else {
		sync_reading(c);
	}
}

static void parse_all(struct conn *c, unsigned char *p, size_t n);

void egs__conn_ready(struct conn *c)
{
	if (!c->in_turn)
		event_active(c->kick, EV_WRITE, 0);
}

/* Answers arrived from outside c's turn: write them; a pipeline that was full may take more. */
static void kick_turn(struct conn *c)
{
	if (c->dead)
		return;
	if (c->stalled && !c->refused && !c->lingering && may_read(c)) {
		c->in_turn = true;
		parse_all(c, c->in, c->in_len); /* requests read while the pipeline was full */
		c->in_turn = false;
		if (c->dead)
			return;
	}
	conn_flush(c);
}

static void read_turn(struct conn *c);

/* The event callbacks hold a reference on c for their whole run, so that c->dead may be read after
 * anything that could have closed it. */
static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn *c = arg;
	c->refs++;
	kick_turn(c);
	egs__conn_unref(c);
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn *c = arg;
	c->refs++;
	if (c->read_wants_write) { /* a TLS handshake's answer waited for the socket */
		c->read_wants_write = false;
		read_turn(c);
	}
	conn_flush(c);
	egs__conn_unref(c);
}

/* ---- reading ---- */

/* Refuses the connection's next request: answered in order, then the connection lingers. */
static void refuse(struct conn *c, enum egs_frame_reason why)
{
	c->refused = true;
	c->in_len = 0;
	c->cs->on_request(egs__hreq_refusal(c, why), c->cs->arg);
}

/* Keeps p[0..n), the unparsed rest, in c's own buffer (p may already be it). */
static void keep_rest(struct conn *c, const unsigned char *p, size_t n)
{
	if (n > c->in_cap) {
		size_t cap = c->in_cap ? c->in_cap : 4096;
		while (cap < n)
			cap *= 2;
		unsigned char *in = egs_malloc(cap);
		memcpy(in, p, n);
		free(c->in);
		c->in = in;
		c->in_cap = cap;
	} else if (n && p != c->in) {
		memmove(c->in, p, n);
	}
	c->in_len = n;
	if (!n && c->in_cap > 2 * READ_BUF) { /* a large body passed: give its room back */
		free(c->in);
		c->in = NULL;
		c->in_cap = 0;
	}
}

/* Parses and dispatches the complete requests of p[0..n) (while the pipeline has room), keeping
 * the rest.  At most TURN_REQUESTS in one go: the rest of a long pipeline is parsed from the
 * connection's kick, which runs after the other connections ready in this loop turn (and after the
 * answers so far were written), so one client's 32 pipelined requests delay another's by 8, not 32. */
static void parse_all(struct conn *c, unsigned char *p, size_t n)
{
	size_t at = 0;
	unsigned dispatched = 0;
	c->stalled = false;
	for (;;) {
		if (c->refused || c->close_after || c->dead)
			break;
		if (c->inflight >= EGS_CONN_PIPELINE || evbuffer_get_length(c->out) >= OUT_PAUSE) {
			c->stalled = true; /* complete requests may wait in the rest: parsed when this changes */
			break;
		}
		if (dispatched >= TURN_REQUESTS && at < n) {
			c->stalled = true;
			event_active(c->kick, EV_WRITE, 0); /* behind the connections already ready */
			break;
		}
		size_t used;
		const struct egs_frame_req *req;
		enum egs_frame_reason why = egs_frame_parse(&c->frame, p + at, n - at, &used, &req);
		if (why || (!used && n - at > MAX_RAW)) {
			refuse(c, why ? why : EGS_FRAME_BODY_BIG);
			return;
		}
		if (!used)
			break;
		if (req) {
			struct egs_hreq *q = egs__hreq_new(c, p + at, req);
			c->close_after = req->close;
			c->cs->on_request(q, c->cs->arg);
			dispatched++;
		}
		at += used;
	}
	if (c->dead || c->refused)
		return;
	keep_rest(c, p + at, n - at);
	c->head_s = c->in_len && egs_frame_in_head(&c->frame) ? (c->head_s ? c->head_s : c->cs->now_s) : 0;
}

/* One read into dst (room for cap): > 0 bytes, 0 at the end of file, -1 when nothing is there now,
 * -2 on an error. */
static ssize_t conn_read(struct conn *c, unsigned char *dst, size_t cap)
{
	if (!c->ssl) {
		ssize_t n = read(c->fd, dst, cap);
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : -2;
		return n;
	}
	size_t got = 0;
	while (got < cap) {
		ERR_clear_error();
		int n = SSL_read(c->ssl, dst + got, (int)(cap - got));
		if (n > 0) {
			got += (size_t)n;
			if (!SSL_pending(c->ssl))
				break;
			continue;
		}
		int e = SSL_get_error(c->ssl, n);
		ERR_clear_error();
		if (got)
			break;
		if (e == SSL_ERROR_WANT_READ)
			return -1;
		if (e == SSL_ERROR_WANT_WRITE) { /* the handshake's answer waits for the socket */
			c->read_wants_write = true;
			if (!c->wev_on) {
				event_add(c->wev, NULL);
				c->wev_on = true;
			}
			return -1;
		}
		/* close_notify, or an end without it (most clients after a complete answer): an end */
		return e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0) ? 0 : -2;
	}
	return (ssize_t)got;
}

static void on_eof(struct conn *c)
{
	c->eof = true;
	if (c->reading) {
		event_del(c->rev);
		c->reading = false;
	}
	bool stream = false;
	for (struct egs_hreq *q = c->qfirst; q; q = q->next)
		stream = stream || q->streaming;
	if (stream || c->lingering)
		conn_close(c);
	else
		conn_flush(c); /* closes once the answers in flight are out */
	if (!c->dead)
		sync_reading(c);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn *c = arg;
	c->refs++;
	read_turn(c);
	egs__conn_unref(c);
}

static void read_turn(struct conn *c)
{
	struct egs_conns *cs = c->cs;
	if (c->dead)
		return;
	if (c->tls_retry && c->wev_on) { /* a TLS write waits for this readiness too (WANT_READ) */
		conn_flush(c);
		if (c->dead)
			return;
	}
	c->active_s = cs->now_s;
	if (cs->last != c) { /* most recently active last */
		list_unlink(cs, c);
		list_append(cs, c);
	}
	bool own = c->in_len > 0;
	if (own && c->in_cap - c->in_len < READ_BUF / 4) {
		unsigned char *in = egs_realloc(c->in, c->in_cap * 2);
		c->in = in;
		c->in_cap *= 2;
	}
	unsigned char *dst = own ? c->in + c->in_len : cs->rbuf;
	size_t cap = own ? c->in_cap - c->in_len : READ_BUF;
	ssize_t n = conn_read(c, dst, cap);
	if (n == -1)
		return;
	if (n == -2) {
		conn_close(c);
		return;
	}
	if (n == 0) {
		on_eof(c);
		return;
	}
	if (c->lingering || c->refused) {
		c->drained += (size_t)n;
		if (c->drained > LINGER_BYTES)
			conn_close(c);
		return;
	}
	c->in_turn = true;
	if (c->full) {
		refuse(c, EGS_FRAME_FULL);
	} else if (own) {
		c->in_len += (size_t)n;
		parse_all(c, c->in, c->in_len);
	} else {
		parse_all(c, cs->rbuf, (size_t)n);
	}
	c->in_turn = false;
	if (!c->dead)
		conn_flush(c); /* and pauses reading when the pipeline is full */
}

/* ---- accepting ---- */

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa, int socklen, void *arg)
{
	(void)lev;
	struct egs_conns *cs = arg;
	struct conn *c = egs_calloc(1, sizeof(*c));
	c->cs = cs;
	c->fd = fd;
	egs_frame_init(&c->frame);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* streams' chunks go at once */
	if (sa->sa_family == AF_INET && (size_t)socklen >= sizeof(struct sockaddr_in))
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, c->peer, sizeof(c->peer));
	else if (sa->sa_family == AF_INET6 && (size_t)socklen >= sizeof(struct sockaddr_in6))
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, c->peer, sizeof(c->peer));
	c->rev = event_new(cs->base, fd, EV_READ | EV_PERSIST, on_read, c);
	c->wev = event_new(cs->base, fd, EV_WRITE | EV_PERSIST, on_writable, c);
	c->kick = event_new(cs->base, -1, 0, on_kick, c);
	c->out = evbuffer_new();
	EGS_ASSERT(c->rev && c->wev && c->kick && c->out);
	if (cs->tls) {
		c->ssl = SSL_new(cs->tls);
		EGS_ASSERT(c->ssl && SSL_set_fd(c->ssl, fd) == 1);
		SSL_set_mode(c->ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
		SSL_set_accept_state(c->ssl);
	}
	c->active_s = c->write_s = cs->now_s;
	list_append(cs, c);
	cs->count++;
	if (cs->count > cs->max && !evict_idle(cs, 1, c))
		c->full = true;
	event_add(c->rev, NULL);
	c->reading = true;
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct egs_conns *cs = arg;
	if (cs->lev && !cs->stopping)
		evconnlistener_enable(cs->lev);
}

static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	struct egs_conns *cs = arg;
	int err = EVUTIL_SOCKET_ERROR();
	cs->accept_fails++;
	size_t closed = evict_idle(cs, EVICT_ON_EMFILE, NULL);
	/* Pause instead of spinning: the pending connection stays in the kernel's backlog. */
	evconnlistener_disable(lev);
	struct timeval tv = { 0, ACCEPT_PAUSE_US };
	event_add(cs->resume_ev, &tv);
	int64_t now = mono_s();
	if (now == cs->log_sec)
		return;
	cs->log_sec = now;
	fprintf(cs->log,
		"level=warn msg=\"accept failed; paused 100 ms\" error=\"%s\" failures=%llu connections=%zu "
		"closed_idle=%zu max_connections=%zu\n",
		evutil_socket_error_to_string(err), (unsigned long long)cs->accept_fails, cs->count, closed, cs->max);
	fflush(cs->log);
	cs->accept_fails = 0;
}

/* Once a second: the coarse clock, and the connections that waited too long. */
static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct egs_conns *cs = arg;
	int64_t now = cs->now_s = mono_s();
	for (struct conn *c = cs->first, *next; c; c = next) {
		next = c->next;
		bool out = evbuffer_get_length(c->out) > 0;
		if ((c->lingering && now >= c->linger_until) ||
		    (!c->inflight && !out && now - (c->active_s > c->write_s ? c->active_s : c->write_s) >= EGS_CONN_IDLE_S) ||
		    (c->head_s && now - c->head_s >= cs->head_limit_s) ||
		    (c->wev_on && now - c->write_s >= WRITE_STALL_S)) /* waiting for the socket that long */
			conn_close(c);
	}
}

/* ---- the module ---- */

struct egs_conns *egs_conns_new(struct event_base *base, FILE *log, long max_conns, struct ssl_ctx_st *tls,
				egs_conns_request_cb on_request, void *arg)
{
	struct egs_conns *cs = egs_calloc(1, sizeof(*cs));
	cs->base = base;
	cs->log = log;
	cs->tls = tls;
	cs->on_request = on_request;
	cs->arg = arg;
	struct rlimit rl;
	size_t limit = 1u << 20;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < limit)
		limit = (size_t)rl.rlim_cur;
	size_t derived = limit > FD_RESERVE + 16 ? limit - FD_RESERVE : 16;
	cs->max = max_conns > 0 ? (size_t)max_conns : derived;
	cs->rbuf = egs_malloc(READ_BUF);
	/* Tests shorten the slow-head bound (tests/api/test_http_front.py); nothing else sets it. */
	const char *hs = getenv("EGS_TEST_HEAD_TIMEOUT_S");
	long hv = hs ? strtol(hs, NULL, 10) : 0;
	cs->head_limit_s = hv > 0 && hv < EGS_CONN_HEAD_S ? hv : EGS_CONN_HEAD_S;
	cs->now_s = mono_s();
	cs->resume_ev = evtimer_new(base, on_resume, cs);
	cs->sweep_ev = event_new(base, -1, EV_PERSIST, on_sweep, cs);
	EGS_ASSERT(cs->resume_ev && cs->sweep_ev);
	struct timeval sec = { 1, 0 };
	event_add(cs->sweep_ev, &sec);
	return cs;
}

enum egs_err egs_conns_listen(struct egs_conns *cs, const char *host, int port)
{
	char ps[16];
	snprintf(ps, sizeof(ps), "%d", port);
	struct addrinfo hints, *ai = NULL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_ADDRCONFIG;
	if (getaddrinfo(host, ps, &hints, &ai) != 0 || !ai)
		return EGS_ERR_IO;
	for (struct addrinfo *a = ai; a && !cs->lev; a = a->ai_next)
		cs->lev = evconnlistener_new_bind(cs->base, on_accept, cs,
						  LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 1024,
						  a->ai_addr, (int)a->ai_addrlen);
	freeaddrinfo(ai);
	if (!cs->lev)
		return EGS_ERR_IO;
	evconnlistener_set_error_cb(cs->lev, on_accept_error);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getsockname(evconnlistener_get_fd(cs->lev), (struct sockaddr *)&ss, &len) == 0)
		cs->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
							  : ((struct sockaddr_in *)&ss)->sin_port);
	return EGS_OK;
}

int egs_conns_port(const struct egs_conns *cs)
{
	return cs ? cs->port : 0;
}

void egs_conns_set_tls(struct egs_conns *cs, SSL_CTX *tls)
{
	cs->tls = tls;
}

void egs_conns_close_all(struct egs_conns *cs)
{
	if (!cs)
		return;
	cs->stopping = true;
	event_del(cs->resume_ev);
	if (cs->lev) {
		evconnlistener_free(cs->lev);
		cs->lev = NULL;
	}
	while (cs->first)
		conn_close(cs->first);
}

void egs_conns_free(struct egs_conns *cs)
{
	if (!cs)
		return;
	egs_conns_close_all(cs);
	event_free(cs->resume_ev);
	event_free(cs->sweep_ev);
	free(cs->rbuf);
	free(cs);
}

size_t egs_conns_count(const struct egs_conns *cs)
{
	return cs ? cs->count : 0;
}

size_t egs_conns_max(const struct egs_conns *cs)
{
	return cs ? cs->max : 0;
}
