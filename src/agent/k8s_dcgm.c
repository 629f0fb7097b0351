/*
 * k8s_dcgm.c: GPU metrics from dcgm-exporter for the kubernetes backend (k8s_obs.h).
 *
 * One thread scrapes every target each interval, parses each answer strictly (prom.h; a malformed
 * answer is dropped whole, as Prometheus drops a scrape) into a fresh table, and swaps that table in
 * under the lock: readers (the device view's samples, the workloads) always see one complete round.
 * A node missing from a round has no metrics until a later round has it.
 *
 * Metrics read (dcgm-exporter's default counters): DCGM_FI_DEV_GPU_TEMP (C), DCGM_FI_DEV_POWER_USAGE (W),
 * DCGM_FI_DEV_GPU_UTIL (%), DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE (MiB), DCGM_FI_DEV_XID_ERRORS
 * (the last XID); labels gpu (index), UUID, Hostname, modelName, pod, namespace, container.
 */
#include "agent/k8s_internal.h"
#include "agent/clock.h"
#include "agent/log.h"
#include "agent/prom.h"

#include "core/buf.h"
#include "core/map.h"
#include "core/util.h"

#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define BODY_MAX (16u << 20) /* an exporter's answer; 8 GPUs with a few pods is ~30 KiB */
#define SCRAPE_TIMEOUT_S 5
#define GPUS_MAX 64

struct dpod {
	char *ns, *pod;
	int gpu;
};

struct dgpu {
	bool seen;
	unsigned valid;
	double power_w, temp_c, util_pct;
	int64_t fb_used, fb_free;
	int xid;
	int64_t xid_count;
};

struct dnode {
	char name[EGS_NAME_MAX]; /* the map key */
	int64_t at;              /* monotonic seconds of the round */
	struct dgpu gpus[GPUS_MAX];
	struct egs_vec pods; /* struct dpod * */
};

struct egs_k8s_dcgm {
	struct egs_k8s *k; /* borrowed */
	char *url;
	int interval_s;
	pthread_t thread;
	pthread_mutex_t mu; /* guards table, stop */
	pthread_cond_t cv;
	struct egs_map table; /* node name -> struct dnode (owned) */
	bool stop;
	unsigned failures;
	unsigned rounds; /* scrape thread only */
};

static int64_t mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static void node_free(struct dnode *n)
{
	for (size_t i = 0; i < n->pods.len; i++) {
		struct dpod *p = n->pods.items[i];
		egs_free(p->ns);
		egs_free(p->pod);
		egs_free(p);
	}
	egs_vec_cleanup(&n->pods);
	egs_free(n);
}

static void table_free(struct egs_map *m)
{
	void *v;
	for (size_t i = 0; egs_map_next(m, &i, NULL, &v);)
		node_free(v);
	egs_map_cleanup(m);
}

/* ---- parsing one answer ---- */

struct parse {
	struct egs_map *nodes; /* this target's nodes */
	const char *node;      /* the target's node (a pod's nodeName), or NULL: the Hostname label */
	int64_t at;
};

static struct dnode *node_of(struct parse *ps, const char *name)
{
	struct dnode *n = egs_map_get(ps->nodes, name);
	if (n)
		return n;
	n = egs_calloc(1, sizeof(*n));
	if (!egs_strlcpy(n->name, name, sizeof(n->name))) {
		egs_free(n);
		return NULL; /* longer than a node name egsd takes: no node of ours */
	}
	n->at = ps->at;
	egs_map_put(ps->nodes, n->name, n);
	return n;
}

static void add_pod(struct dnode *n, const char *ns, const char *pod, int gpu)
{
	for (size_t i = 0; i < n->pods.len; i++) {
		struct dpod *p = n->pods.items[i];
		if (p->gpu == gpu && !strcmp(p->ns, ns) && !strcmp(p->pod, pod))
			return;
	}
	if (n->pods.len >= 4 * GPUS_MAX)
		return;
	struct dpod *p = egs_malloc(sizeof(*p));
	*p = (struct dpod){ egs_strdup(ns), egs_strdup(pod), gpu };
	egs_vec_push(&n->pods, p);
}

static bool on_sample(void *arg, const struct egs_prom_sample *s)
{
	static const struct {
		const char *name;
		unsigned bit;
	} metrics[] = { { "DCGM_FI_DEV_GPU_TEMP", EGS_GPU_TEMP },     { "DCGM_FI_DEV_POWER_USAGE", EGS_GPU_POWER },
			{ "DCGM_FI_DEV_GPU_UTIL", EGS_GPU_UTIL },     { "DCGM_FI_DEV_FB_USED", EGS_GPU_MEM_USED },
			{ "DCGM_FI_DEV_FB_FREE", EGS_GPU_MEM_TOTAL }, { "DCGM_FI_DEV_XID_ERRORS", EGS_GPU_XID } };
	struct parse *ps = arg;
	const char *gpu = egs_prom_label(s, "gpu"), *host = ps->node ? ps->node : egs_prom_label(s, "Hostname");
	const char *pod = egs_prom_label(s, "pod"), *ns = egs_prom_label(s, "namespace");
	int64_t idx;
	size_t m;

	for (m = 0; m < EGS_ARRAY_LEN(metrics) && strcmp(s->name, metrics[m].name); m++)
		;
	if (m == EGS_ARRAY_LEN(metrics) || !gpu || !host || !*host || !egs_int_parse(gpu, 0, GPUS_MAX - 1, &idx) ||
	    !isfinite(s->value))
		return true; /* not ours, or not usable: NaN is "no reading" */
	struct dnode *n = node_of(ps, host);
	if (!n)
		return true;
	struct dgpu *g = &n->gpus[idx];
	double v = s->value;
	g->seen = true;
	g->valid |= metrics[m].bit;
	switch (metrics[m].bit) {
	case EGS_GPU_TEMP: g->temp_c = v; break;
	case EGS_GPU_POWER: g->power_w = v; break;
	case EGS_GPU_UTIL: g->util_pct = v < 0 ? 0 : v > 100 ? 100 : v; break;
	case EGS_GPU_MEM_USED: g->fb_used = v < 0 ? 0 : v > 1e12 ? (int64_t)1e12 : (int64_t)v; break;
	case EGS_GPU_MEM_TOTAL: g->fb_free = v < 0 ? 0 : v > 1e12 ? (int64_t)1e12 : (int64_t)v; break;
	default: g->xid = v < 0 || v > 1e6 ? 0 : (int)v; break;
	}
	if (pod && *pod && ns && *ns)
		add_pod(n, ns, pod, (int)idx);
	return true;
}

/* ---- fetching ---- */

struct body {
	struct egs_buf text;
	bool too_big;
};

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct body *b = arg;
	size_t n = size * nmemb;
	if (!egs_buf_put_max(&b->text, data, n, BODY_MAX)) {
		b->too_big = true;
		return 0;
	}
	return n;
}

/* GETs url into *b.  Returns false (why in err) unless the answer is a 200. */
static bool fetch(const char *url, struct body *b, char *err, size_t errsz)
{
	CURL *h = curl_easy_init();
	char cerr[CURL_ERROR_SIZE] = "";
	long status = 0;
	CURLcode rc;

	if (!h) {
		snprintf(err, errsz, "no curl handle");
		return false;
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 3L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)SCRAPE_TIMEOUT_S);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_USERAGENT, "egs-agent");
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(h);
	if (rc != CURLE_OK) {
		snprintf(err, errsz, "%s", b->too_big ? "answer over 16 MiB" : cerr[0] ? cerr : curl_easy_strerror(rc));
		return false;
	}
	if (status != 200) {
		snprintf(err, errsz, "HTTP %ld", status);
		return false;
	}
	return true;
}

/* Scrapes one target into round (nodes already there from another target win). */
static bool scrape(struct egs_k8s_dcgm *d, const char *url, const char *node, struct egs_map *round, int64_t at)
{
	struct body b = { 0 };
	struct egs_map mine;
	struct parse ps = { &mine, node, at };
	char err[300];
	bool ok;
	void *v;

	egs_map_init(&mine);
	ok = fetch(url, &b, err, sizeof(err)) &&
	     egs_prom_parse(egs_buf_cstr(&b.text), b.text.len, on_sample, &ps, err, sizeof(err)) == EGS_OK;
	if (!ok) {
		if (d->rounds % 60 == 0) /* not every few seconds for an exporter that stays broken */
			EGS_LOG_WARN("dcgm-exporter %s: %s; no GPU metrics from it this round", url, err);
		else
			EGS_LOG_DEBUG("dcgm-exporter %s: %s", url, err);
		table_free(&mine);
		egs_buf_cleanup(&b.text);
		return false;
	}
	for (size_t i = 0; egs_map_next(&mine, &i, NULL, &v);) {
		struct dnode *n = v;
		if (egs_map_get(round, n->name))
			node_free(n);
		else
			egs_map_put(round, n->name, n);
	}
	egs_map_cleanup(&mine);
	egs_buf_cleanup(&b.text);
	return true;
}

/* ---- discovery and the loop ---- */

struct target {
	char url[128];
	char node[EGS_NAME_MAX];
};

static void collect_target(void *arg, const char *key, json_t *pod)
{
	struct egs_vec *out = arg;
	json_t *st = json_object_get(pod, "status");
	const char *ip = json_string_value(json_object_get(st, "podIP"));
	const char *node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
	const char *phase = json_string_value(json_object_get(st, "phase"));
	json_int_t port = json_integer_value(json_object_get(pod, "egsMetricsPort"));

	(void)key;
	if (!egs_k8s_pod_is_dcgm(pod) || !ip || !*ip || !node || !phase || strcmp(phase, "Running") || out->len >= 10000)
		return;
	struct target *t = egs_calloc(1, sizeof(*t));
	int n = snprintf(t->url, sizeof(t->url), strchr(ip, ':') ? "http://[%s]:%d/metrics" : "http://%s:%d/metrics", ip,
			 port > 0 && port < 65536 ? (int)port : EGS_K8S_DCGM_PORT);
	if (n < 0 || (size_t)n >= sizeof(t->url) || !egs_strlcpy(t->node, node, sizeof(t->node))) {
		egs_free(t);
		return;
	}
	egs_vec_push(out, t);
}

/* Keeps the XID history across rounds: a change to a non-zero XID counts once. */
static void carry_xids(struct egs_map *old, struct egs_map *round)
{
	void *v;
	for (size_t i = 0; egs_map_next(round, &i, NULL, &v);) {
		struct dnode *n = v, *o = egs_map_get(old, n->name);
		for (int g = 0; g < GPUS_MAX; g++) {
			struct dgpu *ng = &n->gpus[g], *og = o ? &o->gpus[g] : NULL;
			int64_t before = og ? og->xid_count : 0;
			ng->xid_count = before + (ng->xid && (!og || og->xid != ng->xid));
		}
	}
}

static void scrape_round(struct egs_k8s_dcgm *d)
{
	struct egs_vec targets = { 0 };
	struct egs_map round, old;
	int64_t at = mono_s();
	unsigned failed = 0;

	egs_map_init(&round);
	if (d->url) {
		failed += !scrape(d, d->url, NULL, &round, at);
	} else {
		egs_kube_reflector_foreach(d->k->pods, collect_target, &targets);
		for (size_t i = 0; i < targets.len && !egs__k8s_stopping(d->k); i++) {
			struct target *t = targets.items[i];
			failed += !scrape(d, t->url, t->node, &round, at);
			egs_free(t);
		}
	}
	pthread_mutex_lock(&d->mu);
	carry_xids(&d->table, &round);
	old = d->table;
	d->table = round;
	d->failures += failed;
	pthread_mutex_unlock(&d->mu);
	table_free(&old);
	egs_vec_cleanup(&targets);
	d->rounds++;
}

static void *scrape_main(void *arg)
{
	struct egs_k8s_dcgm *d = arg;

	for (;;) {
		scrape_round(d);
		struct timespec until = egs_clock_after_ms((int64_t)d->interval_s * 1000);
		pthread_mutex_lock(&d->mu);
		while (!d->stop && pthread_cond_timedwait(&d->cv, &d->mu, &until) == 0)
			;
		bool stop = d->stop;
		pthread_mutex_unlock(&d->mu);
		if (stop)
			return NULL;
	}
}

struct egs_k8s_dcgm *egs_k8s_dcgm_new(struct egs_k8s *k, const char *url, int interval_s)
{
	struct egs_k8s_dcgm *d = egs_calloc(1, sizeof(*d));

	d->k = k;
	d->url = egs_strdup(url);
	d->interval_s = interval_s > 0 ? interval_s : 5;
	egs_map_init(&d->table);
	pthread_mutex_init(&d->mu, NULL);
	egs_clock_cond_init(&d->cv);
	if (pthread_create(&d->thread, NULL, scrape_main, d) != 0) {
		pthread_mutex_destroy(&d->mu);
		pthread_cond_destroy(&d->cv);
		egs_free(d->url);
		egs_free(d);
		return NULL;
	}
	return d;
}

void egs_k8s_dcgm_free(struct egs_k8s_dcgm *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	d->stop = true;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	pthread_join(d->thread, NULL);
	table_free(&d->table);
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	egs_free(d->url);
	egs_free(d);
}

/* The fresh entry of node, or NULL.  Caller holds d->mu. */
static struct dnode *fresh(struct egs_k8s_dcgm *d, const char *node)
{
	struct dnode *n = egs_map_get(&d->table, node);
	return n && mono_s() - n->at <= 3 * d->interval_s + 5 ? n : NULL;
}

bool egs_k8s_dcgm_sample(struct egs_k8s_dcgm *d, const char *node, int n, struct egs_gpu_sample *out)
{
	struct dnode *dn;

	pthread_mutex_lock(&d->mu);
	dn = fresh(d, node);
	for (int i = 0; dn && i < n && i < GPUS_MAX; i++) {
		const struct dgpu *g = &dn->gpus[i];
		struct egs_gpu_sample *s = &out[i];
		if (!g->seen)
			continue;
		s->valid = g->valid & (EGS_GPU_TEMP | EGS_GPU_POWER | EGS_GPU_UTIL | EGS_GPU_MEM_USED | EGS_GPU_XID);
		s->temp_c = g->temp_c;
		s->power_w = g->power_w;
		s->util_pct = g->util_pct;
		s->mem_used_mib = g->fb_used;
		if ((g->valid & EGS_GPU_MEM_TOTAL) && (g->valid & EGS_GPU_MEM_USED)) {
			s->valid |= EGS_GPU_MEM_TOTAL;
			s->mem_total_mib = g->fb_used + g->fb_free;
		}
		s->last_xid = g->xid;
		s->xid_count = g->xid_count;
		s->fatal_xid = g->xid && egs_xid_fatal(g->xid) ? g->xid : 0;
	}
	pthread_mutex_unlock(&d->mu);
	return dn != NULL;
}

void egs_k8s_dcgm_pods(struct egs_k8s_dcgm *d, const char *node,
		       void (*fn)(void *arg, const char *ns, const char *pod, int gpu), void *arg)
{
	struct dnode *dn;

	pthread_mutex_lock(&d->mu);
	dn = fresh(d, node);
	for (size_t i = 0; dn && i < dn->pods.len; i++) {
		struct dpod *p = dn->pods.items[i];
		fn(arg, p->ns, p->pod, p->gpu);
	}
	pthread_mutex_unlock(&d->mu);
}

unsigned egs_k8s_dcgm_failures(struct egs_k8s_dcgm *d)
{
	pthread_mutex_lock(&d->mu);
	unsigned n = d->failures;
	pthread_mutex_unlock(&d->mu);
	return n;
}
