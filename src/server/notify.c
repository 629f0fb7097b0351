/*
 * notify.c: the webhook worker; see notify.h.
 *
 * One mutex guards the queue, the result list and the stop flag.  A message stays in the queue
 * while it is being attempted (flag `busy`), so that it keeps holding back later messages to its
 * URL; it leaves the queue only when it is delivered or given up.  The worker reuses one curl
 * handle, so a receiver that keeps connections alive costs one connection.
 */
#include "server/notify.h"

#include "core/util.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <strings.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define URL_MAX 512

struct msg {
	struct msg *next;
	char *url, *payload; /* owned */
	char tag[64];
	char key[EGS_NOTIFY_KEY_MAX];
	int attempts;
	int64_t due_ms; /* monotonic */
	bool busy;
};

struct egs_notify {
	struct egs_notify_config cfg;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	bool started;
	atomic_bool stop;
	struct msg *head, *tail; /* queue order */
	size_t len;
	struct egs_notify_result *results; /* handed to the loop */
	size_t n_results, cap_results;
	int pipe_r, pipe_w;
	struct event *ev;
	struct curl_slist *headers;
	egs_notify_done_fn done;
	void *arg;
	uint64_t rng;
	bool refused_private; /* worker thread only: the last attempt met a private address */
};

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool egs_notify_url_valid(const char *url, const char **why)
{
	const char *dummy;
	why = why ? why : &dummy;
	size_t len = strlen(url);
	if (len > URL_MAX) {
		*why = "must be at most 512 characters";
		return false;
	}
	const char *host = !strncmp(url, "https://", 8) ? url + 8 : !strncmp(url, "http://", 7) ? url + 7 : NULL;
	if (!host || !*host || *host == '/') {
		*why = "must be an http:// or https:// URL with a host";
		return false;
	}
	for (const char *c = url; *c; c++) {
		if ((unsigned char)*c <= 0x20 || *c == '"' || *c == '\\' || *c == '<' || *c == '>' || (unsigned char)*c >= 0x7f) {
			*why = "must not contain spaces, quotes or control characters";
			return false;
		}
	}
	return true;
}

/* ---- private addresses ---- */

/* Loopback, "this host", link-local (which holds the cloud metadata address 169.254.169.254) and
 * Alibaba's metadata address 100.100.100.200.  a is in host byte order. */
static bool ip4_private(uint32_t a)
{
	return (a >> 24) == 127 || (a >> 24) == 0 || (a >> 16) == 0xa9fe || a == 0x646464c8;
}

static bool ip6_private(const struct in6_addr *a)
{
	static const unsigned char aws_metadata[16] = { 0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54 };
	const unsigned char *b = a->s6_addr;
	if (IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_LINKLOCAL(a) ||
	    memcmp(b, aws_metadata, 16) == 0)
		return true;
	if (IN6_IS_ADDR_V4MAPPED(a) || IN6_IS_ADDR_V4COMPAT(a))
		return ip4_private((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15]);
	return false;
}

/* True for an address egsd must not post to unless allowed (a connected socket's peer). */
static bool sockaddr_private(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ip4_private(ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr));
	if (sa->sa_family == AF_INET6)
		return ip6_private(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
	return true; /* no other family is a webhook receiver */
}

bool egs_notify_url_private(const char *url)
{
	const char *host = strstr(url, "://");
	if (!host)
		return false;
	host += 3;
	size_t alen = strcspn(host, "/?#");
	const char *at = memchr(host, '@', alen);
	while (at) { /* user info: the host follows the last '@' */
		alen -= (size_t)(at + 1 - host);
		host = at + 1;
		at = memchr(host, '@', alen);
	}
	char h[256];
	size_t hlen;
	if (host[0] == '[') {
		const char *close = memchr(host, ']', alen);
		if (!close)
			return false;
		hlen = (size_t)(close - host - 1);
		host++;
	} else {
		const char *colon = memchr(host, ':', alen);
		hlen = colon ? (size_t)(colon - host) : alen;
	}
	if (hlen == 0 || hlen >= sizeof(h))
		return false;
	memcpy(h, host, hlen);
	h[hlen] = '\0';
	if (h[hlen - 1] == '.')
		h[--hlen] = '\0';
	struct in_addr a4;
	struct in6_addr a6;
	if (inet_aton(h, &a4)) /* also the forms curl accepts: 127.1, 0x7f.0.0.1, 2130706433 */
		return ip4_private(ntohl(a4.s_addr));
	if (inet_pton(AF_INET6, h, &a6) == 1)
		return ip6_private(&a6);
	size_t n = strlen(h);
	return strcasecmp(h, "localhost") == 0 || (n > 10 && strcasecmp(h + n - 10, ".localhost") == 0) ||
	       strcasecmp(h, "metadata.google.internal") == 0;
}

/* ---- worker side ---- */

/* curl's socket opener: a name that resolves to a private address is refused at connect time too,
 * so a DNS name cannot reach what a literal address may not. */
static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct egs_notify *n = arg;
	(void)purpose;
	if (!n->cfg.allow_private && sockaddr_private(&a->addr)) {
		n->refused_private = true;
		return CURL_SOCKET_BAD;
	}
	return socket(a->family, a->socktype, a->protocol);
}

/* Called with mu held: appends a result and wakes the loop. */
static void post_result(struct egs_notify *n, enum egs_notify_outcome outcome, const struct msg *m, long status,
			const char *error, int64_t retry_ms)
{
	if (n->n_results == n->cap_results) {
		n->cap_results = n->cap_results ? 2 * n->cap_results : 16;
		n->results = egs_realloc(n->results, n->cap_results * sizeof(*n->results));
	}
	struct egs_notify_result *r = &n->results[n->n_results++];
	memset(r, 0, sizeof(*r));
	r->outcome = outcome;
	egs_strlcpy(r->tag, m->tag, sizeof(r->tag));
	egs_strlcpy(r->key, m->key, sizeof(r->key));
	r->attempts = m->attempts;
	r->retry_ms = retry_ms;
	r->http_status = status;
	egs_strlcpy(r->error, error ? error : "", sizeof(r->error));
	ssize_t w = write(n->pipe_w, "x", 1); /* a full pipe already means "wake up" */
	(void)w;
}

static void msg_free(struct msg *m)
{
	if (!m)
		return;
	free(m->url);
	free(m->payload);
	free(m);
}

/* Called with mu held: unlinks m from the queue. */
static void unlink_msg(struct egs_notify *n, struct msg *m)
{
	struct msg **pp = &n->head, *prev = NULL;
	while (*pp && *pp != m) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	EGS_ASSERT(*pp == m);
	*pp = m->next;
	if (n->tail == m)
		n->tail = prev;
	n->len--;
}

/* Called with mu held: the first due message whose URL no earlier message holds back, or NULL;
 * *wait_ms receives how long until the next one may be due. */
static struct msg *pick(struct egs_notify *n, int64_t now, int64_t *wait_ms)
{
	const char *blocked[64];
	size_t nb = 0;
	*wait_ms = 60000;
	for (struct msg *m = n->head; m; m = m->next) {
		bool held = false;
		for (size_t i = 0; i < nb && !held; i++)
			held = !strcmp(blocked[i], m->url);
		if (held)
			continue;
		if (!m->busy && m->due_ms <= now)
			return m;
		if (!m->busy && m->due_ms - now < *wait_ms)
			*wait_ms = m->due_ms - now;
		if (nb < EGS_ARRAY_LEN(blocked))
			blocked[nb++] = m->url;
	}
	return NULL;
}

static size_t discard(char *p, size_t size, size_t nmemb, void *arg)
{
	(void)p;
	(void)arg;
	return size * nmemb;
}

static int abort_on_stop(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a, (void)b, (void)c, (void)d;
	return atomic_load(&((struct egs_notify *)arg)->stop) ? 1 : 0;
}

/* One POST of m; returns true on 2xx.  *retry says whether a failure is worth retrying. */
static bool attempt(struct egs_notify *n, CURL *h, const struct msg *m, long *status, bool *retry, char *err,
		    size_t errlen)
{
	char ebuf[CURL_ERROR_SIZE] = "", keyhdr[EGS_NOTIFY_KEY_MAX + 20];
	snprintf(keyhdr, sizeof(keyhdr), "Idempotency-Key: %s", m->key);
	struct curl_slist key = { keyhdr, n->headers }; /* this message's header, then the shared ones */
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, m->url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, m->payload);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(m->payload));
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, &key);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "egsd-webhook/1");
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, n->cfg.timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, n->cfg.timeout_ms < 3000 ? n->cfg.timeout_ms : 3000L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, abort_on_stop);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, n);
	curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, n);
	n->refused_private = false;
	CURLcode rc = curl_easy_perform(h);
	*status = 0;
	if (n->refused_private && rc != CURLE_OK) {
		egs_strlcpy(err, "the webhook URL resolves to a loopback, link-local or metadata address", errlen);
		*retry = false;
		return false;
	}
	if (rc != CURLE_OK) {
		egs_strlcpy(err, ebuf[0] ? ebuf : curl_easy_strerror(rc), errlen);
		*retry = true;
		return false;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	if (*status >= 200 && *status < 300)
		return true;
	snprintf(err, errlen, "the receiver answered HTTP %ld", *status);
	*retry = *status == 408 || *status == 429 || *status >= 500;
	return false;
}

static int64_t backoff(struct egs_notify *n, int attempts)
{
	int64_t d = n->cfg.backoff_ms;
	for (int i = 1; i < attempts && d < n->cfg.backoff_max_ms; i++)
		d *= 2;
	if (d > n->cfg.backoff_max_ms)
		d = n->cfg.backoff_max_ms;
	n->rng ^= n->rng << 13;
	n->rng ^= n->rng >> 7;
	n->rng ^= n->rng << 17;
	int64_t jitter = d / 5;
	return jitter ? d - jitter + (int64_t)(n->rng % (uint64_t)(2 * jitter + 1)) : d;
}

static void *worker(void *arg)
{
	struct egs_notify *n = arg;
	CURL *h = curl_easy_init();
	EGS_ASSERT(h);
	pthread_mutex_lock(&n->mu);
	while (!atomic_load(&n->stop)) {
		int64_t wait_ms;
		struct msg *m = pick(n, mono_ms(), &wait_ms);
		if (!m) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			int64_t ns = ts.tv_nsec + (wait_ms % 1000) * 1000000;
			ts.tv_sec += wait_ms / 1000 + ns / 1000000000;
			ts.tv_nsec = ns % 1000000000;
			pthread_cond_timedwait(&n->cv, &n->mu, &ts);
			continue;
		}
		m->busy = true;
		m->attempts++;
		pthread_mutex_unlock(&n->mu);
		long status;
		bool retry = false;
		char err[160] = "";
		bool ok = attempt(n, h, m, &status, &retry, err, sizeof(err));
		pthread_mutex_lock(&n->mu);
		m->busy = false;
		if (atomic_load(&n->stop))
			break;
		if (ok || !retry || m->attempts >= n->cfg.max_attempts) {
			unlink_msg(n, m);
			post_result(n, ok ? EGS_NOTIFY_DELIVERED : EGS_NOTIFY_FAILED, m, status, ok ? NULL : err, 0);
			msg_free(m);
		} else {
			int64_t delay = backoff(n, m->attempts);
			m->due_ms = mono_ms() + delay;
			post_result(n, EGS_NOTIFY_RETRY, m, status, err, delay);
		}
	}
	pthread_mutex_unlock(&n->mu);
	curl_easy_cleanup(h);
	return NULL;
}

/* ---- loop side ---- */

static void on_results(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct egs_notify *n = arg;
	char buf[256];
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	pthread_mutex_lock(&n->mu);
	struct egs_notify_result *res = n->results;
	size_t count = n->n_results;
	n->results = NULL;
	n->n_results = n->cap_results = 0;
	pthread_mutex_unlock(&n->mu);
	for (size_t i = 0; i < count && n->done; i++)
		n->done(n->arg, &res[i]);
	free(res);
}

enum egs_err egs_notify_new(struct event_base *base, const struct egs_notify_config *cfg, egs_notify_done_fn done,
			    void *arg, struct egs_notify **out)
{
	struct egs_notify *n = egs_calloc(1, sizeof(*n));
	int fds[2];
	*out = NULL;
	n->cfg = (struct egs_notify_config){ 1000, 10, 1000, 60000, 5000, false };
	if (cfg) {
		if (cfg->max_queue)
			n->cfg.max_queue = cfg->max_queue;
		if (cfg->max_attempts > 0)
			n->cfg.max_attempts = cfg->max_attempts;
		if (cfg->backoff_ms > 0)
			n->cfg.backoff_ms = cfg->backoff_ms;
		if (cfg->backoff_max_ms > 0)
			n->cfg.backoff_max_ms = cfg->backoff_max_ms;
		if (cfg->timeout_ms > 0)
			n->cfg.timeout_ms = cfg->timeout_ms;
		n->cfg.allow_private = cfg->allow_private;
	}
	n->done = done;
	n->arg = arg;
	n->rng = (uint64_t)mono_ms() * 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid();
	n->rng |= 1;
	n->pipe_r = n->pipe_w = -1;
	pthread_mutex_init(&n->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&n->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
		goto fail;
	n->pipe_r = fds[0];
	n->pipe_w = fds[1];
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		goto fail;
	n->headers = curl_slist_append(NULL, "Content-Type: application/json");
	n->ev = event_new(base, n->pipe_r, EV_READ | EV_PERSIST, on_results, n);
	if (!n->ev || event_add(n->ev, NULL) != 0)
		goto fail;
	if (pthread_create(&n->thread, NULL, worker, n) != 0)
		goto fail;
	n->started = true;
	*out = n;
	return EGS_OK;
fail:
	egs_notify_free(n);
	return EGS_ERR_IO;
}

void egs_notify_free(struct egs_notify *n)
{
	if (!n)
		return;
	if (n->started) {
		pthread_mutex_lock(&n->mu);
		atomic_store(&n->stop, true);
		pthread_cond_broadcast(&n->cv);
		pthread_mutex_unlock(&n->mu);
		pthread_join(n->thread, NULL);
	}
	if (n->ev)
		event_free(n->ev);
	for (struct msg *m = n->head, *next; m; m = next) {
		next = m->next;
		msg_free(m);
	}
	free(n->results);
	if (n->headers) { /* set right after curl_global_init */
		curl_slist_free_all(n->headers);
		curl_global_cleanup();
	}
	if (n->pipe_r >= 0)
		close(n->pipe_r);
	if (n->pipe_w >= 0)
		close(n->pipe_w);
	pthread_cond_destroy(&n->cv);
	pthread_mutex_destroy(&n->mu);
	free(n);
}

bool egs_notify_send(struct egs_notify *n, const char *url, const char *tag, const char *key, const char *payload,
		     int attempts, int64_t delay_ms)
{
	struct msg *m = egs_calloc(1, sizeof(*m));
	m->url = egs_strdup(url);
	m->payload = egs_strdup(payload);
	egs_strlcpy(m->tag, tag, sizeof(m->tag));
	egs_strlcpy(m->key, key, sizeof(m->key));
	m->attempts = attempts > 0 ? attempts : 0;
	m->due_ms = mono_ms() + (delay_ms > 0 ? delay_ms : 0);
	pthread_mutex_lock(&n->mu);
	bool fits = n->len < n->cfg.max_queue;
	if (fits) {
		if (n->tail)
			n->tail->next = m;
		else
			n->head = m;
		n->tail = m;
		n->len++;
		pthread_cond_signal(&n->cv);
	} else {
		post_result(n, EGS_NOTIFY_DROPPED, m, 0, "the notification queue is full", 0);
	}
	pthread_mutex_unlock(&n->mu);
	if (!fits)
		msg_free(m);
	return fits;
}

size_t egs_notify_pending(struct egs_notify *n)
{
	pthread_mutex_lock(&n->mu);
	size_t len = n->len;
	pthread_mutex_unlock(&n->mu);
	return len;
}
