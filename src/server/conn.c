/*
 * conn.c: egsd's connection front (conn.h): a framing filter (frame.c) in front of evhttp on every
 * connection, the count and recency list of connections, lingering close, and the accept back-off.
 *
 * Ownership: evhttp owns the filter bufferevent it was given, and the filter owns the socket's
 * bufferevent under it (BEV_OPT_CLOSE_ON_FREE); struct conn is freed with the filter (free_ctx).
 * evhttp ends a connection by itself (Connection: close, errors, its timeouts); this module ends one
 * by shutdown(), which evhttp reads as the end of file (idle eviction, the end of a linger).
 *
 * Busy or idle: a connection is busy from the dispatch of a request until its reply is sent
 * (egs_conns_begin and evhttp's on-complete callback): long polls and event streams stay busy.
 * Every other connection may be closed to make room, least recently active first.
 *
 * TLS (egsd --tls-cert): the socket's bufferevent is an OpenSSL one, so the filter reads and writes
 * plain text above it, and every byte this module writes itself (filter_out's direct write, the
 * close_notify before a lingering close) goes through the connection's SSL, never to the socket.
 */
#include "server/conn.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#define FD_RESERVE 64            /* descriptors kept for the store, the log, agents' calls, webhooks */
#define LINGER_BYTES (16u << 20) /* after a refusal, discard at most this much ... */
#define LINGER_READ_S 2          /* ... for at most this long */
#define EVICT_ON_EMFILE 16
#define ACCEPT_PAUSE_US 100000
#define REFUSED_PATH "/_egs/refused/"
#define TLS_WRITE_MAX 16384 /* one TLS record per direct write */

struct conn {
	struct egs_conns *cs;
	struct bufferevent *filt;  /* what evhttp reads and writes; it frees it (and the socket under it) */
	struct bufferevent *under; /* the socket's bufferevent (an OpenSSL one under TLS) */
	SSL *ssl;                  /* under TLS, the connection's (owned by under); else NULL */
	size_t tls_retry;          /* a direct SSL_write of this many bytes wanted the socket: repeat it */
	struct conn *prev, *next;  /* cs->served, least recently active first */
	struct egs_frame frame;
	struct event *flush_ev;    /* moves the output on (filter_out) */
	struct event *write_ev;    /* one-shot: the socket takes more output again */
	struct event *linger_ev;   /* after a refusal: the end of the lingering read */
	int fd;        /* registered in cs->by_fd; -1 until the first input */
	int busy;      /* requests dispatched and not answered */
	bool full;     /* accepted over the limit: its first request is refused with 503 */
	bool refused;  /* a refusal was handed to evhttp: the rest of the input is discarded */
	bool closing;  /* shut down by us (idle, or the end of a linger): evhttp frees it on the end of file */
	bool flushing; /* inside on_flush: filter_out may move output */
	size_t drained;
};

struct egs_conns {
	struct event_base *base;
	FILE *log;
	struct evconnlistener *lev;
	struct event *resume_ev;
	SSL_CTX *tls; /* borrowed; NULL = plain HTTP */
	struct conn *first, *last; /* least recently active first */
	size_t count, closing, max; /* closing: shut down, waiting for evhttp to free them */
	struct conn **by_fd;
	size_t by_fd_len;
	char prefix[sizeof(REFUSED_PATH) + 40];
	size_t prefix_len;
	bool stopping;
	int64_t log_sec;
	uint64_t accept_fails, evicted;
};

/* evhttp owns its listener's user data, so the accept error callback finds the front here.  egsd
 * has one listener. */
static struct egs_conns *listener_front;

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

static void register_fd(struct conn *c)
{
	struct egs_conns *cs = c->cs;
	if (c->fd >= 0)
		return;
	int fd = bufferevent_getfd(c->under);
	if (fd < 0)
		return;
	if ((size_t)fd >= cs->by_fd_len) {
		size_t n = cs->by_fd_len ? cs->by_fd_len : 256;
		while (n <= (size_t)fd)
			n *= 2;
		cs->by_fd = egs_realloc(cs->by_fd, n * sizeof(*cs->by_fd));
		memset(cs->by_fd + cs->by_fd_len, 0, (n - cs->by_fd_len) * sizeof(*cs->by_fd));
		cs->by_fd_len = n;
	}
	cs->by_fd[fd] = c;
	c->fd = fd;
}

/* Ends the connection: evhttp reads the end of file and frees it through its usual path. */
static void conn_shutdown(struct conn *c)
{
	if (c->closing)
		return;
	int fd = bufferevent_getfd(c->under);
	if (fd < 0)
		return;
	shutdown(fd, SHUT_RDWR);
	c->closing = true;
	c->cs->closing++;
}

/* Closes up to n idle connections, least recently active first; returns how many. */
static size_t evict_idle(struct egs_conns *cs, size_t n)
{
	size_t done = 0;
	for (struct conn *c = cs->first; c && done < n; c = c->next) {
		if (c->busy || c->closing || bufferevent_getfd(c->under) < 0)
			continue;
		conn_shutdown(c);
		cs->evicted++;
		done++;
	}
	return done;
}

/* ---- the filter ---- */

static void refuse(struct conn *c, enum egs_frame_reason why, struct evbuffer *dst)
{
	c->refused = true;
	/* Not "Connection: close": evhttp would shut the socket right after the reply, and a client still
	 * sending its body would get a reset instead of the answer.  on_refusal_sent lingers instead. */
	evbuffer_add_printf(dst, "GET %s%d HTTP/1.1\r\n\r\n", c->cs->prefix, (int)why);
}

static enum bufferevent_filter_result filter_in(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
						enum bufferevent_flush_mode mode, void *arg)
{
	(void)limit;
	(void)mode;
	struct conn *c = arg;
	struct egs_conns *cs = c->cs;
	register_fd(c);
	if (cs->last != c) { /* most recently active last */
		list_unlink(cs, c);
		list_append(cs, c);
	}
	if (c->refused) {
		c->drained += evbuffer_get_length(src);
		evbuffer_drain(src, evbuffer_get_length(src));
		if (c->drained > LINGER_BYTES)
			conn_shutdown(c);
		return BEV_NEED_MORE;
	}
	if (c->full) {
		evbuffer_drain(src, evbuffer_get_length(src));
		refuse(c, EGS_FRAME_FULL, dst);
		return BEV_OK;
	}
	bool progress;
	enum egs_frame_reason why = egs_frame_feed(&c->frame, src, dst, &progress);
	if (why) {
		refuse(c, why, dst);
		return BEV_OK;
	}
	return progress ? BEV_OK : BEV_NEED_MORE;
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn *c = arg;
	c->flushing = true;
	bufferevent_flush(c->filt, EV_WRITE, BEV_FLUSH);
	c->flushing = false;
}

/* evbuffer callback of the filter's output (evhttp added a reply) and of the socket's output (it
 * drained to the kernel): move the output on from the flush event, outside evhttp's own calls. */
static void on_output_change(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct conn *c = arg;
	bool wanted = buf == bufferevent_get_output(c->filt) ? info->n_added > 0
							   : info->n_deleted > 0 && evbuffer_get_length(buf) == 0;
	if (wanted && evbuffer_get_length(bufferevent_get_output(c->filt)))
		event_active(c->flush_ev, EV_WRITE, 0);
}

/* Writes the start of src to the kernel, bypassing the socket's bufferevent (whose output must be
 * empty): plainly, or as one TLS record through the connection's SSL.  Returns the bytes taken from
 * src, or 0 when the socket takes nothing now.  A TLS write that wanted the socket must be repeated
 * with the same bytes before any other (OpenSSL's rule), so c->tls_retry keeps its length and nothing
 * else may move meanwhile.  A TLS failure ends the connection. */
static size_t conn_write(struct conn *c, struct evbuffer *src, int fd)
{
	if (!c->ssl) {
		int n = evbuffer_write(src, fd);
		return n > 0 ? (size_t)n : 0;
	}
	size_t len = evbuffer_get_length(src);
	size_t n = c->tls_retry ? c->tls_retry : len < TLS_WRITE_MAX ? len : TLS_WRITE_MAX;
	EGS_ASSERT(n <= len);
	ERR_clear_error();
	int r = SSL_write(c->ssl, evbuffer_pullup(src, (ev_ssize_t)n), (int)n);
	if (r > 0) {
		evbuffer_drain(src, (size_t)r);
		c->tls_retry = 0;
		return (size_t)r;
	}
	if (SSL_get_error(c->ssl, r) == SSL_ERROR_WANT_WRITE) {
		c->tls_retry = n;
		return 0;
	}
	ERR_clear_error();
	c->tls_retry = 0;
	conn_shutdown(c); /* evhttp reads the end of file and frees the connection */
	return 0;
}

static void wait_writable(struct conn *c, int fd)
{
	if (!c->write_ev)
		c->write_ev = event_new(c->cs->base, fd, EV_WRITE, on_flush, c);
	event_add(c->write_ev, NULL);
}

/* evhttp takes an empty output buffer for "sent", and on Connection: close shuts the socket down at
 * once, which would lose what still waits in the socket's bufferevent.  So output moves only from
 * the flush event, and its last byte leaves the filter only by a direct write the kernel accepted
 * (conn_write: under TLS, an SSL_write, whose record is then in the kernel).  Moving it from inside
 * evhttp's evbuffer_add would also call evhttp's write callback before evhttp has set it. */
static enum bufferevent_filter_result filter_out(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
						 enum bufferevent_flush_mode mode, void *arg)
{
	(void)limit;
	(void)mode;
	struct conn *c = arg;
	int fd = bufferevent_getfd(c->under);
	if (!c->flushing || fd < 0 || c->closing)
		return BEV_NEED_MORE;
	bool moved = false;
	if (evbuffer_get_length(dst) == 0) {
		while (evbuffer_get_length(src) && !c->closing && conn_write(c, src, fd) > 0)
			moved = true;
	}
	if (c->closing)
		return moved ? BEV_OK : BEV_NEED_MORE;
	size_t len = evbuffer_get_length(src);
	if (c->tls_retry) {
		wait_writable(c, fd); /* the repeated write goes first; nothing moves under it meanwhile */
	} else if (len > 1) {
		evbuffer_remove_buffer(src, dst, len - 1);
		moved = true;
	} else if (len == 1 && evbuffer_get_length(dst) == 0) {
		wait_writable(c, fd); /* the kernel took nothing: wait until it takes more */
	}
	return moved ? BEV_OK : BEV_NEED_MORE;
}

/* evhttp freed the connection; the filter freed the socket. */
static void free_ctx(void *arg)
{
	struct conn *c = arg;
	struct egs_conns *cs = c->cs;
	list_unlink(cs, c);
	if (c->fd >= 0 && (size_t)c->fd < cs->by_fd_len && cs->by_fd[c->fd] == c)
		cs->by_fd[c->fd] = NULL;
	if (c->closing)
		cs->closing--;
	cs->count--;
	event_free(c->flush_ev);
	if (c->write_ev)
		event_free(c->write_ev);
	if (c->linger_ev)
		event_free(c->linger_ev);
	egs_frame_cleanup(&c->frame);
	free(c);
}

static struct bufferevent *new_bev(struct event_base *base, void *arg)
{
	struct egs_conns *cs = arg;
	struct conn *c = egs_calloc(1, sizeof(*c));
	c->cs = cs;
	c->fd = -1;
	egs_frame_init(&c->frame);
	if (cs->tls) {
		c->ssl = SSL_new(cs->tls);
		EGS_ASSERT(c->ssl);
		c->under = bufferevent_openssl_socket_new(base, -1, c->ssl, BUFFEREVENT_SSL_ACCEPTING,
							  BEV_OPT_CLOSE_ON_FREE);
		EGS_ASSERT(c->under);
		/* A client that ends without close_notify (after a complete answer) is an end of file. */
		bufferevent_openssl_set_allow_dirty_shutdown(c->under, 1);
	} else {
		c->under = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
		EGS_ASSERT(c->under);
	}
	c->filt = bufferevent_filter_new(c->under, filter_in, filter_out, BEV_OPT_CLOSE_ON_FREE, free_ctx, c);
	EGS_ASSERT(c->filt);
	c->flush_ev = event_new(base, -1, 0, on_flush, c);
	EGS_ASSERT(c->flush_ev);
	evbuffer_add_cb(bufferevent_get_output(c->filt), on_output_change, c);
	evbuffer_add_cb(bufferevent_get_output(c->under), on_output_change, c);
	list_append(cs, c);
	cs->count++;
	if (cs->count - cs->closing > cs->max && !evict_idle(cs, 1))
		c->full = true;
	return c->filt;
}

void egs_conns_set_tls(struct egs_conns *cs, SSL_CTX *tls)
{
	cs->tls = tls;
}

/* ---- accepting ---- */

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
	(void)arg;
	struct egs_conns *cs = listener_front;
	int err = EVUTIL_SOCKET_ERROR();
	if (!cs)
		return;
	cs->accept_fails++;
	size_t closed = evict_idle(cs, EVICT_ON_EMFILE);
	/* Pause instead of spinning: the pending connection stays in the kernel's backlog. */
	evconnlistener_disable(lev);
	struct timeval tv = { 0, ACCEPT_PAUSE_US };
	event_add(cs->resume_ev, &tv);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if ((int64_t)ts.tv_sec == cs->log_sec)
		return;
	cs->log_sec = (int64_t)ts.tv_sec;
	fprintf(cs->log,
		"level=warn msg=\"accept failed; paused 100 ms\" error=\"%s\" failures=%llu connections=%zu "
		"closed_idle=%zu max_connections=%zu\n",
		evutil_socket_error_to_string(err), (unsigned long long)cs->accept_fails, cs->count, closed, cs->max);
	fflush(cs->log);
	cs->accept_fails = 0;
}

/* ---- the module ---- */

struct egs_conns *egs_conns_new(struct event_base *base, struct evhttp *http, FILE *log, long max_conns,
				struct ssl_ctx_st *tls)
{
	struct egs_conns *cs = egs_calloc(1, sizeof(*cs));
	cs->base = base;
	cs->log = log;
	cs->tls = tls;
	struct rlimit rl;
	size_t limit = 1u << 20;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < limit)
		limit = (size_t)rl.rlim_cur;
	size_t derived = limit > FD_RESERVE + 16 ? limit - FD_RESERVE : 16;
	cs->max = max_conns > 0 ? (size_t)max_conns : derived;
	unsigned char secret[16];
	char hex[sizeof(secret) * 2 + 1];
	randombytes_buf(secret, sizeof(secret));
	sodium_bin2hex(hex, sizeof(hex), secret, sizeof(secret));
	snprintf(cs->prefix, sizeof(cs->prefix), "%s%s/", REFUSED_PATH, hex);
	cs->prefix_len = strlen(cs->prefix);
	cs->resume_ev = evtimer_new(base, on_resume, cs);
	EGS_ASSERT(cs->resume_ev);
	evhttp_set_bevcb(http, new_bev, cs);
	return cs;
}

void egs_conns_watch(struct egs_conns *cs, struct evhttp_bound_socket *bs)
{
	cs->lev = evhttp_bound_socket_get_listener(bs);
	listener_front = cs;
	evconnlistener_set_error_cb(cs->lev, on_accept_error);
}

void egs_conns_stopping(struct egs_conns *cs)
{
	if (!cs)
		return;
	cs->stopping = true;
	event_del(cs->resume_ev);
}

void egs_conns_free(struct egs_conns *cs)
{
	if (!cs)
		return;
	if (listener_front == cs)
		listener_front = NULL;
	event_free(cs->resume_ev);
	free(cs->by_fd);
	free(cs);
}

static void on_complete(struct evhttp_request *ev, void *arg)
{
	(void)ev;
	struct conn *c = arg;
	if (c->busy > 0)
		c->busy--;
}

static void on_linger_end(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_shutdown(arg);
}

/* The refusal is in the kernel: send FIN, keep reading and discarding (filter_in) what the client
 * still sends, and end the connection after LINGER_READ_S or at its end of file. */
static void on_refusal_sent(struct evhttp_request *ev, void *arg)
{
	struct conn *c = arg;
	on_complete(ev, c);
	int fd = bufferevent_getfd(c->under);
	if (fd < 0 || c->closing)
		return;
	if (c->ssl) { /* close_notify first, so a TLS client reads the answer's end as an end, not a cut */
		ERR_clear_error();
		if (SSL_shutdown(c->ssl) < 0)
			ERR_clear_error();
	}
	shutdown(fd, SHUT_WR);
	if (!c->linger_ev)
		c->linger_ev = evtimer_new(c->cs->base, on_linger_end, c);
	struct timeval tv = { LINGER_READ_S, 0 };
	event_add(c->linger_ev, &tv);
}

static struct conn *conn_of(struct egs_conns *cs, struct evhttp_request *ev)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(ev);
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
	int fd = bev ? bufferevent_getfd(bev) : -1;
	if (!cs || fd < 0 || (size_t)fd >= cs->by_fd_len)
		return NULL;
	return cs->by_fd[fd];
}

void egs_conns_begin(struct egs_conns *cs, struct evhttp_request *ev)
{
	struct conn *c = conn_of(cs, ev);
	if (!c)
		return;
	c->busy++;
	evhttp_request_set_on_complete_cb(ev, on_complete, c);
}

bool egs_conns_refusal(struct egs_conns *cs, struct evhttp_request *ev, const char *path,
		       const struct egs_frame_reason_info **out)
{
	if (!cs || strncmp(path, cs->prefix, cs->prefix_len) != 0)
		return false;
	char *end;
	long n = strtol(path + cs->prefix_len, &end, 10);
	if (*end || n <= 0 || n >= EGS_FRAME_NREASONS)
		return false;
	*out = &egs_frame_reasons[n];
	struct conn *c = conn_of(cs, ev);
	if (c)
		evhttp_request_set_on_complete_cb(ev, on_refusal_sent, c);
	return true;
}

size_t egs_conns_count(const struct egs_conns *cs)
{
	return cs ? cs->count : 0;
}

size_t egs_conns_max(const struct egs_conns *cs)
{
	return cs ? cs->max : 0;
}
