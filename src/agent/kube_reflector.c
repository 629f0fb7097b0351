/*
 * kube_reflector.c: list + watch of one resource kind into a local cache (kube_reflector.h).
 *
 * The loop: list (paged, 100 per page) and replace the cache whole; then watch from the list's
 * resourceVersion with allowWatchBookmarks, following the newest resourceVersion seen (a bookmark
 * moves it without an object) so that a watch the server ends is resumed where it stopped.  A 410
 * Gone (as an HTTP status or an ERROR event) means the server no longer has that history: list
 * again.  Any other failure backs off (0.5 s doubling to 8 s) and lists again, because events may
 * have been lost meanwhile.  A watch silent for longer than its timeout plus slack is treated as a
 * dead connection.
 */
#include "agent/kube_reflector.h"

#include "agent/clock.h"
#include "agent/log.h"
#include "core/map.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE 100 /* objects per list page: the whole page is parsed before it is trimmed */
#define WATCH_TIMEOUT_S 240 /* the server ends each watch after this; we resume it */
#define IDLE_S 30           /* bookmarks come about every minute; the watch asks for them, and a
			     * silent connection longer than this is probed by a new watch */
#define KEY_MAX 512
#define RV_MAX 64
#define BACKOFF_MAX_MS 8000

struct egs_kube_reflector {
	struct egs_kube *k;
	char *path, *selector;
	egs_kube_transform_fn transform;
	egs_kube_changed_fn fn;
	void *arg;
	pthread_t thread;
	bool started;
	atomic_bool stop;
	atomic_bool connected;
	atomic_uint lists;
	pthread_mutex_t mu;  /* guards cache, synced */
	pthread_cond_t cv;
	struct egs_map cache; /* key -> struct entry * (owned; the map borrows the entry's key) */
	bool synced;
	char rv[RV_MAX];      /* reflector thread only */
	bool gone;            /* reflector thread only: the watch saw 410 */
};

/* One cached object; the map's key points into it. */
struct entry {
	json_t *obj; /* owned reference */
	char key[];
};

bool egs_kube_object_key(json_t *obj, char *key, size_t keysz)
{
	json_t *md = json_object_get(obj, "metadata");
	const char *name = json_string_value(json_object_get(md, "name"));
	const char *ns = json_string_value(json_object_get(md, "namespace"));
	int n;

	if (!name || !*name)
		return false;
	n = ns && *ns ? snprintf(key, keysz, "%s/%s", ns, name) : snprintf(key, keysz, "%s", name);
	return n > 0 && (size_t)n < keysz;
}

struct egs_kube_reflector *egs_kube_reflector_new(struct egs_kube *k, const char *path, const char *selector,
						  egs_kube_transform_fn transform, egs_kube_changed_fn fn, void *arg)
{
	struct egs_kube_reflector *r = egs_calloc(1, sizeof(*r));

	r->k = k;
	r->transform = transform;
	r->path = egs_strdup(path);
	r->selector = selector && *selector ? egs_strdup(selector) : NULL;
	r->fn = fn;
	r->arg = arg;
	pthread_mutex_init(&r->mu, NULL);
	egs_clock_cond_init(&r->cv);
	egs_map_init(&r->cache);
	return r;
}

static void entry_free(struct entry *e)
{
	if (e) {
		json_decref(e->obj);
		egs_free(e);
	}
}

static void clear_cache(struct egs_map *m)
{
	void *v;
	for (size_t i = 0; egs_map_next(m, &i, NULL, &v);)
		entry_free(v);
	egs_map_cleanup(m);
	egs_map_init(m);
}

/* Stores obj (trimmed by transform when not NULL; a new reference is taken) under its key in m
 * (replacing what was there). */
static void map_put(struct egs_map *m, json_t *obj, egs_kube_transform_fn transform)
{
	char key[KEY_MAX];
	struct entry *e, *old;
	size_t n;

	if (!egs_kube_object_key(obj, key, sizeof(key)))
		return;
	n = strlen(key) + 1;
	e = egs_malloc(sizeof(*e) + n);
	memcpy(e->key, key, n);
	e->obj = transform ? transform(obj) : json_incref(obj);
	old = egs_map_del(m, key); /* its key dies with it: take it out first */
	egs_map_put(m, e->key, e);
	entry_free(old);
}

/* Caller holds mu. */
static void cache_put(struct egs_kube_reflector *r, json_t *obj)
{
	map_put(&r->cache, obj, r->transform);
}

static void cache_del(struct egs_kube_reflector *r, json_t *obj)
{
	char key[KEY_MAX];
	if (egs_kube_object_key(obj, key, sizeof(key)))
		entry_free(egs_map_del(&r->cache, key));
}

static void notify(struct egs_kube_reflector *r)
{
	if (r->fn)
		r->fn(r->arg);
}

static bool stopped(void *arg)
{
	return atomic_load(&((struct egs_kube_reflector *)arg)->stop);
}

/* The path with the query parameters q (already escaped), joined with '?' or '&'. */
static void build_path(const struct egs_kube_reflector *r, const char *q, char *out, size_t outsz)
{
	char sel[600] = "";

	if (r->selector) {
		char esc[512];
		if (egs_kube_escape(r->selector, esc, sizeof(esc)))
			snprintf(sel, sizeof(sel), "&labelSelector=%s", esc);
	}
	snprintf(out, outsz, "%s%s%s%s", r->path, strchr(r->path, '?') ? "&" : "?", q, sel);
}

/* Lists the whole collection into a fresh cache; sets rv.  Returns EGS_OK or the failure. */
static enum egs_err list_all(struct egs_kube_reflector *r, char *err, size_t errsz)
{
	struct egs_map fresh;
	char cont[1024] = "", path[2048], q[1200];
	enum egs_err rc = EGS_OK;

	egs_map_init(&fresh);
	do {
		json_t *ans = NULL, *items, *it;
		long status;
		size_t i;
		char esc[1100];
		if (!egs_kube_escape(cont, esc, sizeof(esc)))
			esc[0] = '\0';
		snprintf(q, sizeof(q), "limit=%d%s%s", PAGE, cont[0] ? "&continue=" : "", cont[0] ? esc : "");
		build_path(r, q, path, sizeof(path));
		rc = egs_kube_call(r->k, "GET", path, NULL, NULL, 60, &status, &ans, err, errsz);
		if (rc != EGS_OK) {
			json_decref(ans);
			break;
		}
		items = json_object_get(ans, "items");
		json_array_foreach(items, i, it)
			map_put(&fresh, it, r->transform);
		json_t *md = json_object_get(ans, "metadata");
		const char *c = json_string_value(json_object_get(md, "continue"));
		egs_strlcpy(cont, c ? c : "", sizeof(cont));
		if (!cont[0])
{
			const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
			egs_strlcpy(r->rv, rv ? rv : "", sizeof(r->rv));
		}
		json_decref(ans);
	} while (cont[0] && !stopped(r));
	if (rc != EGS_OK) {
		clear_cache(&fresh);
		egs_map_cleanup(&fresh);
		return rc;
	}
	pthread_mutex_lock(&r->mu);
	clear_cache(&r->cache);
	egs_map_cleanup(&r->cache);
	r->cache = fresh;
	r->synced = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	atomic_fetch_add(&r->lists, 1);
	malloc_trim(0); /* the pages were parsed whole; give their memory back (lists are rare) */
	notify(r);
	return EGS_OK;
}

/* One watch event. */
static bool on_event(void *arg, json_t *ev)
{
	struct egs_kube_reflector *r = arg;
	const char *type = json_string_value(json_object_get(ev, "type"));
	json_t *obj = json_object_get(ev, "object");
	const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));

	if (!type || !json_is_object(obj))
		return false;
	if (strcmp(type, "ERROR") == 0) {
		r->gone = json_integer_value(json_object_get(obj, "code")) == 410;
		return false;
	}
	atomic_store(&r->connected, true);
	if (rv)
		egs_strlcpy(r->rv, rv, sizeof(r->rv));
	if (strcmp(type, "BOOKMARK") == 0)
		return true;
	pthread_mutex_lock(&r->mu);
	if (strcmp(type, "DELETED") == 0)
		cache_del(r, obj);
	else
		cache_put(r, obj);
	pthread_mutex_unlock(&r->mu);
	notify(r);
	return !stopped(r);
}

/* Sleeps ms (monotonic) unless stopped. */
static void nap(struct egs_kube_reflector *r, int ms)
{
	struct timespec ts = egs_clock_after_ms(ms);
	pthread_mutex_lock(&r->mu);
	while (!stopped(r) && pthread_cond_timedwait(&r->cv, &r->mu, &ts) == 0)
		;
	pthread_mutex_unlock(&r->mu);
}

/* Watches from rv until the watch ends.  Returns true when it may resume from rv (the server just
 * ended it), false when a list is needed. */
static bool watch_once(struct egs_kube_reflector *r, char *err, size_t errsz)
{
	char path[2048], q[400], esc[RV_MAX * 3];
	long status;
	enum egs_err rc;

	egs_kube_escape(r->rv, esc, sizeof(esc));
	snprintf(q, sizeof(q), "watch=1&allowWatchBookmarks=true&timeoutSeconds=%d&resourceVersion=%s",
		 WATCH_TIMEOUT_S, esc);
	build_path(r, q, path, sizeof(path));
	r->gone = false;
	rc = egs_kube_watch(r->k, path, IDLE_S, on_event, r, stopped, r, &status, err, errsz);
	if (rc == EGS_ERR_EXPIRED)
		r->gone = true;
	if (r->gone)
		snprintf(err, errsz, "410 Gone: resourceVersion %s is too old", r->rv);
	return rc == EGS_OK && !r->gone;
}

static void *reflector_main(void *arg)
{
	struct egs_kube_reflector *r = arg;
	char err[512], last[512] = "";
	int backoff = 500;

	while (!stopped(r)) {
		if (list_all(r, err, sizeof(err)) != EGS_OK) {
			atomic_store(&r->connected, false);
			if (stopped(r))
				break;
			egs_agent_log(strcmp(err, last) ? EGS_ALOG_WARN : EGS_ALOG_DEBUG, "list %s: %s; again in %d ms",
				      r->path, err, backoff);
			egs_strlcpy(last, err, sizeof(last));
			nap(r, backoff);
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
			continue;
		}
		if (last[0])
			EGS_LOG_INFO("list %s: the API server answers again", r->path);
		last[0] = '\0';
		backoff = 500;
		atomic_store(&r->connected, true);
		while (!stopped(r) && watch_once(r, err, sizeof(err)))
			;
		if (!stopped(r))
			EGS_LOG_DEBUG("watch %s ended: %s; listing again", r->path, err);
	}
	return NULL;
}

enum egs_err egs_kube_reflector_start(struct egs_kube_reflector *r)
{
	if (pthread_create(&r->thread, NULL, reflector_main, r) != 0)
		return EGS_ERR_IO;
	r->started = true;
	return EGS_OK;
}

bool egs_kube_reflector_wait_synced(struct egs_kube_reflector *r, int timeout_ms)
{
	struct timespec ts = egs_clock_after_ms(timeout_ms);
	bool ok;

	pthread_mutex_lock(&r->mu);
	while (!r->synced && !stopped(r) && pthread_cond_timedwait(&r->cv, &r->mu, &ts) == 0)
		;
	ok = r->synced;
	pthread_mutex_unlock(&r->mu);
	return ok;
}

bool egs_kube_reflector_connected(struct egs_kube_reflector *r)
{
	return atomic_load(&r->connected);
}

json_t *egs_kube_reflector_get(struct egs_kube_reflector *r, const char *key)
{
	struct entry *e;
	json_t *o;
	pthread_mutex_lock(&r->mu);
	e = egs_map_get(&r->cache, key);
	o = e ? json_deep_copy(e->obj) : NULL;
	pthread_mutex_unlock(&r->mu);
	return o;
}

bool egs_kube_reflector_read(struct egs_kube_reflector *r, const char *key, void (*fn)(void *arg, json_t *obj),
			     void *arg)
{
	struct entry *e;
	pthread_mutex_lock(&r->mu);
	e = egs_map_get(&r->cache, key);
	if (e)
		fn(arg, e->obj);
	pthread_mutex_unlock(&r->mu);
	return e != NULL;
}

void egs_kube_reflector_foreach(struct egs_kube_reflector *r, void (*fn)(void *arg, const char *key, json_t *obj),
				void *arg)
{
	const char *key;
	void *v;
	pthread_mutex_lock(&r->mu);
	for (size_t i = 0; egs_map_next(&r->cache, &i, &key, &v);)
		fn(arg, key, ((struct entry *)v)->obj);
	pthread_mutex_unlock(&r->mu);
}

/* obj's metadata.resourceVersion as a number into *out; false when it has none or it is not one. */
static bool rv_number(const json_t *obj, unsigned long long *out)
{
	const char *s = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
	char *end;
	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return !errno && !*end;
}

/* True when the cache holds obj's object at a newer resourceVersion than obj's (caller holds mu).
 * resourceVersions are opaque to clients, but every API server we talk to (etcd's revision, the
 * fake's counter) gives decimal numbers that grow with each write; a version that is not one is
 * never judged older. */
static bool cached_newer(struct egs_kube_reflector *r, json_t *obj)
{
	char key[KEY_MAX];
	unsigned long long have, put;
	struct entry *e;
	if (!egs_kube_object_key(obj, key, sizeof(key)) || !(e = egs_map_get(&r->cache, key)))
		return false;
	return rv_number(e->obj, &have) && rv_number(obj, &put) && have > put;
}

void egs_kube_reflector_put(struct egs_kube_reflector *r, json_t *obj)
{
	json_t *copy = json_deep_copy(obj);
	bool stale;
	pthread_mutex_lock(&r->mu);
	stale = cached_newer(r, copy);
	if (!stale)
		cache_put(r, copy);
	pthread_mutex_unlock(&r->mu);
	json_decref(copy);
	if (!stale)
		notify(r);
}

unsigned egs_kube_reflector_lists(struct egs_kube_reflector *r)
{
	return atomic_load(&r->lists);
}

void egs_kube_reflector_stop(struct egs_kube_reflector *r)
{
	if (r)
		atomic_store(&r->stop, true);
}

void egs_kube_reflector_free(struct egs_kube_reflector *r)
{
	if (!r)
		return;
	atomic_store(&r->stop, true);
	pthread_mutex_lock(&r->mu);
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (r->started)
		pthread_join(r->thread, NULL);
	clear_cache(&r->cache);
	egs_map_cleanup(&r->cache);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	egs_free(r->path);
	egs_free(r->selector);
	egs_free(r);
}
