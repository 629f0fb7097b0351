/*
 * state.c: object registry, change log and event ring of the control plane; see state.h.
 * Invariant: every object in a map is owned by the state; an object appears in `changes` at most
 * once per turn (its `dirty` flag says whether it is there already, deleted objects are unlinked).
 */
#include "core/state.h"

#include "core/aging.h"
#include "core/fair.h"
#include "core/policy.h"
#include "core/share_gpr.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- strlist ---- */

void egs_strlist_add(struct egs_strlist *l, const char *s)
{
	l->v = egs_realloc(l->v, (l->n + 1) * sizeof(char *));
	l->v[l->n++] = egs_strdup(s);
}

bool egs_strlist_has(const struct egs_strlist *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return true;
	return false;
}

bool egs_strlist_equal(const struct egs_strlist *a, const struct egs_strlist *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i], b->v[i]) != 0)
			return false;
	return true;
}

bool egs_strlist_remove(struct egs_strlist *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++) {
		if (strcmp(l->v[i], s) == 0) {
			free(l->v[i]);
			memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof(char *));
			l->n--;
			return true;
		}
	}
	return false;
}

void egs_strlist_copy(struct egs_strlist *dst, const struct egs_strlist *src)
{
	egs_strlist_cleanup(dst);
	for (size_t i = 0; i < src->n; i++)
		egs_strlist_add(dst, src->v[i]);
}

void egs_strlist_cleanup(struct egs_strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* ---- enums ---- */

static const char *const role_names[] = { "Admin", "Owner", "Viewer", "Agent", "Editor" };
static const char *const health_names[] = { "Healthy", "Unhealthy", "Unschedulable" };
static const char *const gpr_state_names[] = {
	"Pending", "Queued", "Provisioning", "Provisioned", "Releasing",
	"Complete", "Cancelled", "Rejected", "Error",
};

/* names[i] where i is in range, "Unknown" otherwise. */
static const char *name_of(const char *const *names, size_t n, size_t i)
{
	return i < n ? names[i] : "Unknown";
}

/* Sets *out to the index of s among names (ignoring case when nocase) and returns true; false,
 * leaving *out, when s is none of them. */
static bool index_of(const char *const *names, size_t n, const char *s, bool nocase, int *out)
{
	for (size_t i = 0; i < n; i++) {
		if ((nocase ? strcasecmp(s, names[i]) : strcmp(s, names[i])) == 0) {
			*out = (int)i;
			return true;
		}
	}
	return false;
}

const char *egs_role_name(enum egs_role r)
{
	return name_of(role_names, EGS_ARRAY_LEN(role_names), (size_t)r);
}

bool egs_role_parse(const char *s, enum egs_role *out)
{
	int i;
	if (!index_of(role_names, EGS_ARRAY_LEN(role_names), s, true, &i))
		return false;
	*out = (enum egs_role)i;
	return true;
}

const char *egs_health_name(enum egs_health h)
{
	return name_of(health_names, EGS_ARRAY_LEN(health_names), (size_t)h);
}

bool egs_health_parse(const char *s, enum egs_health *out)
{
	int i;
	if (!index_of(health_names, EGS_ARRAY_LEN(health_names), s, true, &i))
		return false;
	*out = (enum egs_health)i;
	return true;
}

const char *egs_gpr_state_name(enum egs_gpr_state s)
{
	return name_of(gpr_state_names, EGS_ARRAY_LEN(gpr_state_names), (size_t)s);
}

bool egs_gpr_state_parse(const char *s, enum egs_gpr_state *out)
{
	int i;
	if (!index_of(gpr_state_names, EGS_ARRAY_LEN(gpr_state_names), s, false, &i)) /* exact case */
		return false;
	*out = (enum egs_gpr_state)i;
	return true;
}

bool egs_gpr_state_unfinished(enum egs_gpr_state s)
{
	return s == EGS_GPR_PENDING || s == EGS_GPR_QUEUED || s == EGS_GPR_PROVISIONING || s == EGS_GPR_PROVISIONED;
}

void egs_state_count_gpr(struct egs_state *st, const struct egs_gpr *g, int delta)
{
	struct egs_workspace *w = egs_gpr_state_unfinished(g->state) ? egs_state_workspace(st, g->workspace) : NULL;
	if (w)
		w->unfinished += delta;
}

bool egs_gpr_state_terminal(enum egs_gpr_state s)
{
	return s == EGS_GPR_COMPLETE || s == EGS_GPR_CANCELLED || s == EGS_GPR_REJECTED || s == EGS_GPR_ERROR;
}

/* ---- object lifetimes ---- */

void egs_project_free(struct egs_project *p)
{
	free(p);
}

void egs_cluster_free(struct egs_cluster *c)
{
	if (!c)
		return;
	free(c->api_server);
	free(c->ca_data);
	free(c);
}

void egs_node_free(struct egs_node *n)
{
	if (!n)
		return;
	free(n->gpus);
	egs_strlist_cleanup(&n->attached_shared);
	egs_vec_cleanup(&n->shared);
	free(n);
}

void egs_node_keep_samples(struct egs_node *n, const struct egs_node *old)
{
	for (int i = 0; i < n->n_gpus; i++) {
		for (int j = 0; j < old->n_gpus; j++) {
			const struct egs_gpu *o = &old->gpus[j];
			struct egs_gpu *g = &n->gpus[i];
			if (strcmp(o->uuid, g->uuid) != 0)
				continue;
			g->power_w = o->power_w;
			g->temp_c = o->temp_c;
			g->util_pct = o->util_pct;
			g->mem_used_mib = o->mem_used_mib;
			g->sampled_at = o->sampled_at;
		}
	}
}

void egs_workspace_free(struct egs_workspace *w)
{
	if (!w)
		return;
	free(w->description);
	egs_strlist_cleanup(&w->clusters);
	for (size_t i = 0; i < w->n_namespaces; i++)
		egs_strlist_cleanup(&w->namespaces[i].clusters);
	free(w->namespaces);
	free(w->users);
	free(w->webhook_url);
	free(w->policy_json);
	egs_policy_free(w->policy);
	free(w);
}

struct egs_gpr *egs_gpr_new(void)
{
	struct egs_gpr *g = egs_calloc(1, sizeof(*g));
	g->heap_idx = SIZE_MAX;
	g->fair = -INFINITY;
	return g;
}

void egs_gpr_free(struct egs_gpr *g)
{
	if (!g)
		return;
	egs_strlist_cleanup(&g->preferred_clusters);
	egs_strlist_cleanup(&g->nodes);
	egs_strlist_cleanup(&g->held_nodes);
	free(g->failure_reason);
	free(g->pending_reason);
	free(g->shares);
	free(g);
}

void egs_gpr_note_check_run(struct egs_gpr *g, const char *node_key, bool post, bool ok, const char *checks_json,
			    int64_t now)
{
	size_t i = 0;
	while (i < g->n_check_runs && !(g->check_runs[i].post == post && !strcmp(g->check_runs[i].node, node_key)))
		i++;
	if (i == g->n_check_runs && i == EGS_CHECK_RUNS_MAX)
		i = 0; /* full: the oldest goes (runs are kept oldest first) */
	if (i < g->n_check_runs) {
		free(g->check_runs[i].checks);
		memmove(&g->check_runs[i], &g->check_runs[i + 1], (g->n_check_runs - i - 1) * sizeof(*g->check_runs));
		g->n_check_runs--;
	}
	if (!g->check_runs)
		g->check_runs = egs_calloc(EGS_CHECK_RUNS_MAX, sizeof(*g->check_runs));
	struct egs_check_run *run = &g->check_runs[g->n_check_runs++];
	egs_strlcpy(run->node, node_key, sizeof(run->node));
	run->post = post;
	run->ok = ok;
	run->time = now;
	run->checks = egs_strdup(checks_json);
}

void egs_gpr_clear_check_runs(struct egs_gpr *g)
{
	for (size_t i = 0; i < g->n_check_runs; i++)
		free(g->check_runs[i].checks);
	free(g->check_runs);
	g->check_runs = NULL;
	g->n_check_runs = 0;
}

void egs_apikey_free(struct egs_apikey *k)
{
	if (!k)
		return;
	free(k->description);
	free(k);
}

void egs_doc_free(struct egs_doc *d)
{
	if (!d)
		return;
	free(d->spec);
	free(d);
}

void egs_event_free(struct egs_event *e)
{
	if (!e)
		return;
	free(e->message);
	free(e);
}

static void free_obj(enum egs_kind kind, void *obj)
{
	switch (kind) {
	case EGS_KIND_PROJECT: egs_project_free(obj); break;
	case EGS_KIND_CLUSTER: egs_cluster_free(obj); break;
	case EGS_KIND_NODE: egs_node_free(obj); break;
	case EGS_KIND_WORKSPACE: egs_workspace_free(obj); break;
	case EGS_KIND_GPR:
		egs_gpr_clear_check_runs(obj);
		egs_gpr_free(obj);
		break;
	case EGS_KIND_APIKEY: egs_apikey_free(obj); break;
	case EGS_KIND_TEMPLATE:
	case EGS_KIND_BINDING:
	case EGS_KIND_KUBECRED:
	case EGS_KIND_ALERT:
	case EGS_KIND_OUTBOX:
	case EGS_KIND_GPRLINK:
	case EGS_KIND_ENDPOINT: egs_doc_free(obj); break;
	}
}

void egs_hash_hex(const unsigned char hash[32], char out[65])
{
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		out[2 * i] = hex[hash[i] >> 4];
		out[2 * i + 1] = hex[hash[i] & 15];
	}
	out[64] = '\0';
}

/* The hash map of API keys by hash borrows its key string from this side table entry. */
struct hash_entry {
	char hex[65];
	struct egs_apikey *key;
};

/* ---- state ---- */

void egs_state_init(struct egs_state *st, const struct egs_state_config *cfg)
{
	memset(st, 0, sizeof(*st));
	st->cfg.retry_limit = 3;
	st->cfg.provision_timeout_s = 300;
	st->cfg.heartbeat_timeout_s = 15;
	st->cfg.event_retention = 10000;
	st->cfg.fair_half_life_s = 86400;
	st->cfg.preempt_min_runtime_s = 600;
	if (cfg) {
		st->cfg.backfill = cfg->backfill > 0;
		st->cfg.plan_snap_every = cfg->plan_snap_every;
		st->cfg.plan_order_piece = cfg->plan_order_piece;
		st->cfg.plan_sort_piece = cfg->plan_sort_piece;
		st->cfg.plan_slots_piece = cfg->plan_slots_piece;
		if (cfg->preempt_min_runtime_s)
			st->cfg.preempt_min_runtime_s = cfg->preempt_min_runtime_s < 0 ? 0 : cfg->preempt_min_runtime_s;
		if (cfg->fair_half_life_s)
			st->cfg.fair_half_life_s = cfg->fair_half_life_s;
		if (cfg->retry_limit > 0)
			st->cfg.retry_limit = cfg->retry_limit;
		if (cfg->provision_timeout_s > 0)
			st->cfg.provision_timeout_s = cfg->provision_timeout_s;
		if (cfg->heartbeat_timeout_s > 0)
			st->cfg.heartbeat_timeout_s = cfg->heartbeat_timeout_s;
		if (cfg->event_retention > 0)
			st->cfg.event_retention = cfg->event_retention;
		if (cfg->finished_retention_s > 0)
			st->cfg.finished_retention_s = cfg->finished_retention_s;
	}
	egs_map_init(&st->projects);
	egs_map_init(&st->clusters);
	egs_map_init(&st->nodes);
	egs_map_init(&st->workspaces);
	egs_map_init(&st->gprs);
	egs_map_init(&st->apikeys);
	egs_map_init(&st->apikeys_by_hash);
	egs_map_init(&st->templates);
	egs_map_init(&st->bindings);
	egs_map_init(&st->kubecreds);
	egs_map_init(&st->alerts);
	egs_map_init(&st->outbox);
	egs_map_init(&st->gprlinks);
	egs_map_init(&st->endpoints);
	egs_map_init(&st->fair);
	egs_map_init(&st->capacity);
	egs_queue_init(&st->queue);
	st->events = egs_calloc(st->cfg.event_retention, sizeof(*st->events));
	st->next_seq = 1;
	st->next_event_id = 1;
}

static void free_map(struct egs_map *m, enum egs_kind kind)
{
	void *v;
	for (size_t i = 0; egs_map_next(m, &i, NULL, &v);)
		free_obj(kind, v);
	egs_map_cleanup(m);
}

void egs_state_cleanup(struct egs_state *st)
{
	egs_state_clear_changes(st);
	void *v;
	for (size_t i = 0; egs_map_next(&st->apikeys_by_hash, &i, NULL, &v);)
		free(v);
	egs_map_cleanup(&st->apikeys_by_hash);
	for (size_t i = 0; egs_map_next(&st->fair, &i, NULL, &v);)
		free(v);
	egs_map_cleanup(&st->fair);
	for (size_t i = 0; egs_map_next(&st->capacity, &i, NULL, &v);)
		free(v);
	egs_map_cleanup(&st->capacity);
	egs_queue_cleanup(&st->queue);
	free_map(&st->projects, EGS_KIND_PROJECT);
	free_map(&st->clusters, EGS_KIND_CLUSTER);
	free_map(&st->nodes, EGS_KIND_NODE);
	free_map(&st->workspaces, EGS_KIND_WORKSPACE);
	st->ws_last = NULL;
	free_map(&st->gprs, EGS_KIND_GPR);
	free_map(&st->apikeys, EGS_KIND_APIKEY);
	free_map(&st->templates, EGS_KIND_TEMPLATE);
	free_map(&st->bindings, EGS_KIND_BINDING);
	free_map(&st->kubecreds, EGS_KIND_KUBECRED);
	free_map(&st->alerts, EGS_KIND_ALERT);
	free_map(&st->outbox, EGS_KIND_OUTBOX);
	free_map(&st->gprlinks, EGS_KIND_GPRLINK);
	free_map(&st->endpoints, EGS_KIND_ENDPOINT);
	for (size_t i = 0; i < st->events_len; i++)
		egs_event_free(st->events[(st->events_head + i) % st->cfg.event_retention]);
	free(st->events);
	egs_vec_cleanup(&st->changes);
	egs_vec_cleanup(&st->active);
	egs_vec_cleanup(&st->held);
	egs_vec_cleanup(&st->finished);
	egs_vec_cleanup(&st->finished_kept);
	free(st->pool_layout_keys);
	free(st->plan_pools);
	egs_vec_cleanup(&st->new_events);
	for (size_t i = 0; i < st->new_audit.len; i++)
		free(st->new_audit.items[i]);
	egs_vec_cleanup(&st->new_audit);
	memset(st, 0, sizeof(*st));
}

static enum egs_err add(struct egs_map *m, const char *key, void *obj)
{
	return egs_map_add(m, key, obj) ? EGS_OK : EGS_ERR_EXISTS;
}

enum egs_err egs_state_add_project(struct egs_state *st, struct egs_project *p)
{
	return add(&st->projects, p->name, p);
}

enum egs_err egs_state_add_cluster(struct egs_state *st, struct egs_cluster *c)
{
	st->inventory_gen++;
	return add(&st->clusters, c->name, c);
}

enum egs_err egs_state_add_node(struct egs_state *st, struct egs_node *n)
{
	snprintf(n->key, sizeof(n->key), "%s/%s", n->cluster, n->name);
	st->inventory_gen++;
	return add(&st->nodes, n->key, n);
}

enum egs_err egs_state_add_workspace(struct egs_state *st, struct egs_workspace *w)
{
	st->inventory_gen++;
	return add(&st->workspaces, w->name, w);
}

enum egs_err egs_state_add_gpr(struct egs_state *st, struct egs_gpr *g)
{
	enum egs_err err = add(&st->gprs, g->id, g);
	if (err)
		return err;
	egs_state_restamp(st, g);
	if (g->seq >= st->next_seq)
		st->next_seq = g->seq + 1;
	egs_state_count_gpr(st, g, +1);
	if (g->state == EGS_GPR_QUEUED) {
		egs_queue_push(&st->queue, g);
	} else if (egs_gpr_state_terminal(g->state)) {
		egs_fair_note_loaded(st, g);
	}
	else if (g->state == EGS_GPR_PROVISIONING || g->state == EGS_GPR_PROVISIONED ||
		 g->state == EGS_GPR_RELEASING)
		egs_vec_push(&st->active, g);
	egs_share_loaded(st, g);
	egs_aging_note(st, g);
	return EGS_OK;
}

enum egs_err egs_state_add_apikey(struct egs_state *st, struct egs_apikey *k)
{
	struct hash_entry *he = egs_malloc(sizeof(*he));
	egs_hash_hex(k->hash, he->hex);
	if (egs_map_get(&st->apikeys, k->id) || egs_map_get(&st->apikeys_by_hash, he->hex)) {
		free(he);
		return EGS_ERR_EXISTS;
	}
	he->key = k;
	egs_map_put(&st->apikeys, k->id, k);
	egs_map_put(&st->apikeys_by_hash, he->hex, he);
	return EGS_OK;
}

static struct egs_map *doc_map(struct egs_state *st, enum egs_kind kind)
{
	switch (kind) {
	case EGS_KIND_TEMPLATE: return &st->templates;
	case EGS_KIND_BINDING: return &st->bindings;
	case EGS_KIND_KUBECRED: return &st->kubecreds;
	case EGS_KIND_ALERT: return &st->alerts;
	case EGS_KIND_OUTBOX: return &st->outbox;
	case EGS_KIND_GPRLINK: return &st->gprlinks;
	case EGS_KIND_ENDPOINT: return &st->endpoints;
	default: break;
	}
	EGS_ASSERT(0);
	return NULL;
}

enum egs_err egs_state_add_doc(struct egs_state *st, enum egs_kind kind, struct egs_doc *d)
{
	struct egs_map *m = doc_map(st, kind);
	if (egs_map_get(m, d->name))
		return EGS_ERR_EXISTS;
	egs_map_put(m, d->name, d);
	return EGS_OK;
}

struct egs_doc *egs_state_doc(const struct egs_state *st, enum egs_kind kind, const char *name)
{
	return egs_map_get(doc_map((struct egs_state *)st, kind), name);
}

static void ring_push(struct egs_state *st, struct egs_event *ev)
{
	size_t cap = st->cfg.event_retention;
	ev->listed = true;
	if (st->events_len == cap) {
		egs_event_free(st->events[st->events_head]);
		st->events[st->events_head] = ev;
		st->events_head = (st->events_head + 1) % cap;
	} else {
		st->events[(st->events_head + st->events_len) % cap] = ev;
		st->events_len++;
	}
}

void egs_state_add_event(struct egs_state *st, struct egs_event *ev)
{
	if (ev->id >= st->next_event_id)
		st->next_event_id = ev->id + 1;
	ring_push(st, ev);
}

struct egs_project *egs_state_project(const struct egs_state *st, const char *name)
{
	return egs_map_get(&st->projects, name);
}

struct egs_cluster *egs_state_cluster(const struct egs_state *st, const char *name)
{
	return egs_map_get(&st->clusters, name);
}

struct egs_node *egs_state_node(const struct egs_state *st, const char *cluster, const char *name)
{
	char key[EGS_KEY_MAX];
	snprintf(key, sizeof(key), "%s/%s", cluster, name);
	return egs_map_get(&st->nodes, key);
}

struct egs_workspace *egs_state_workspace(const struct egs_state *st, const char *name)
{
	struct egs_workspace *w = st->ws_last;
	if (w && strcmp(w->name, name) == 0)
		return w;
	w = egs_map_get(&st->workspaces, name);
	if (w)
		((struct egs_state *)st)->ws_last = w; /* the cache (state.h), never const storage */
	return w;
}

struct egs_gpr *egs_state_gpr(const struct egs_state *st, const char *id)
{
	return egs_map_get(&st->gprs, id);
}

struct egs_apikey *egs_state_apikey(const struct egs_state *st, const char *id)
{
	return egs_map_get(&st->apikeys, id);
}

struct egs_apikey *egs_state_apikey_by_hash(const struct egs_state *st, const unsigned char hash[32])
{
	char hex[65];
	egs_hash_hex(hash, hex);
	struct hash_entry *he = egs_map_get(&st->apikeys_by_hash, hex);
	return he ? he->key : NULL;
}

static bool *dirty_flag(enum egs_kind kind, void *obj)
{
	switch (kind) {
	case EGS_KIND_PROJECT: return &((struct egs_project *)obj)->dirty;
	case EGS_KIND_CLUSTER: return &((struct egs_cluster *)obj)->dirty;
	case EGS_KIND_NODE: return &((struct egs_node *)obj)->dirty;
	case EGS_KIND_WORKSPACE: return &((struct egs_workspace *)obj)->dirty;
	case EGS_KIND_GPR: return &((struct egs_gpr *)obj)->dirty;
	case EGS_KIND_APIKEY: return &((struct egs_apikey *)obj)->dirty;
	case EGS_KIND_TEMPLATE:
	case EGS_KIND_BINDING:
	case EGS_KIND_KUBECRED:
	case EGS_KIND_ALERT:
	case EGS_KIND_OUTBOX:
	case EGS_KIND_GPRLINK:
	case EGS_KIND_ENDPOINT: return &((struct egs_doc *)obj)->dirty;
	}
	EGS_ASSERT(0);
	return NULL;
}

/* Kinds whose changes may change what the inventory can hold (egs_sched_capacity).  Nodes are
 * touched on every allocation: their registration bumps inventory_gen itself. */
static bool inventory_kind(enum egs_kind kind)
{
	return kind == EGS_KIND_CLUSTER || kind == EGS_KIND_WORKSPACE;
}

void egs_state_touch(struct egs_state *st, enum egs_kind kind, void *obj)
{
	st->generation++;
	st->inventory_gen += inventory_kind(kind);
	if (kind == EGS_KIND_GPR) {
		egs_state_restamp(st, obj); /* before the early return: a second change in a turn shows too */
		egs_aging_note(st, obj);    /* a GPR that just finished starts to age */
	} else {
		st->view_clock++; /* the change clock (state.h): a node's shape moves a cost a view shows */
	}
	bool *d = dirty_flag(kind, obj);
	if (*d)
		return;
	*d = true;
	struct egs_change *c = egs_malloc(sizeof(*c));
	*c = (struct egs_change){ kind, obj, false };
	egs_vec_push(&st->changes, c);
}

void egs_state_del(struct egs_state *st, enum egs_kind kind, void *obj)
{
	st->generation++;
	st->view_clock++; /* the change clock (state.h) */
	st->inventory_gen += inventory_kind(kind) || kind == EGS_KIND_NODE;
	switch (kind) {
	case EGS_KIND_PROJECT: egs_map_del(&st->projects, ((struct egs_project *)obj)->name); break;
	case EGS_KIND_CLUSTER: egs_map_del(&st->clusters, ((struct egs_cluster *)obj)->name); break;
	case EGS_KIND_NODE: egs_map_del(&st->nodes, ((struct egs_node *)obj)->key); break;
	case EGS_KIND_WORKSPACE:
		egs_map_del(&st->workspaces, ((struct egs_workspace *)obj)->name);
		if (st->ws_last == obj)
			st->ws_last = NULL;
		break;
	case EGS_KIND_GPR:
		egs_state_count_gpr(st, obj, -1);
		egs_queue_remove(&st->queue, obj);
		egs_vec_remove(&st->active, obj);
		egs_map_del(&st->gprs, ((struct egs_gpr *)obj)->id);
		break;
	case EGS_KIND_APIKEY: {
		struct egs_apikey *k = obj;
		char hex[65];
		egs_hash_hex(k->hash, hex);
		free(egs_map_del(&st->apikeys_by_hash, hex));
		egs_map_del(&st->apikeys, k->id);
		break;
	}
	case EGS_KIND_TEMPLATE:
	case EGS_KIND_BINDING:
	case EGS_KIND_KUBECRED:
	case EGS_KIND_ALERT:
	case EGS_KIND_OUTBOX:
	case EGS_KIND_GPRLINK:
	case EGS_KIND_ENDPOINT: egs_map_del(doc_map(st, kind), ((struct egs_doc *)obj)->name); break;
	}
	bool *d = dirty_flag(kind, obj);
	if (*d) {
		/* Already in the log as an upsert: turn that entry into the deletion. */
		for (size_t i = 0; i < st->changes.len; i++) {
			struct egs_change *c = st->changes.items[i];
			if (c->obj == obj) {
				c->deleted = true;
				return;
			}
		}
	}
	*d = true;
	struct egs_change *c = egs_malloc(sizeof(*c));
	*c = (struct egs_change){ kind, obj, true };
	egs_vec_push(&st->changes, c);
}

void egs_state_event_msg(struct egs_state *st, int64_t now, const char *type, const char *reason,
			 const char *object_kind, const char *object_name, const char *workspace, const char *message)
{
	struct egs_event *ev = egs_calloc(1, sizeof(*ev));
	ev->id = st->next_event_id++;
	ev->time = ev->first_time = now;
	ev->count = 1;
	egs_strlcpy(ev->type, type, sizeof(ev->type));
	egs_strlcpy(ev->reason, reason, sizeof(ev->reason));
	egs_strlcpy(ev->object_kind, object_kind, sizeof(ev->object_kind));
	egs_strlcpy(ev->object_name, object_name, sizeof(ev->object_name));
	egs_strlcpy(ev->workspace, workspace ? workspace : "", sizeof(ev->workspace));
	char buf[EGS_EVENT_MESSAGE_MAX];
	size_t n = strnlen(message, sizeof(buf) - 1); /* cut as vsnprintf cuts: a split character becomes '?' */
	memcpy(buf, message, n);
	buf[n] = '\0';
	egs_utf8_sanitize(buf);
	ev->message = egs_strdup(buf);
	egs_vec_push(&st->new_events, ev);
}

void egs_state_event(struct egs_state *st, int64_t now, const char *type, const char *reason,
		     const char *object_kind, const char *object_name, const char *workspace,
		     const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char buf[EGS_EVENT_MESSAGE_MAX];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	egs_state_event_msg(st, now, type, reason, object_kind, object_name, workspace, buf);
}

void egs_state_audit(struct egs_state *st, struct egs_audit *a)
{
	a->id = ++st->audit_last_id;
	egs_vec_push(&st->new_audit, a);
}

bool egs_state_has_changes(const struct egs_state *st)
{
	return st->changes.len > 0 || st->new_events.len > 0 || st->new_audit.len > 0;
}

void egs_state_clear_changes(struct egs_state *st)
{
	for (size_t i = 0; i < st->changes.len; i++) {
		struct egs_change *c = st->changes.items[i];
		if (c->deleted)
			free_obj(c->kind, c->obj);
		else
			*dirty_flag(c->kind, c->obj) = false;
		free(c);
	}
	st->changes.len = 0;
	/* Repeats (egs_state_event_repeat) are in the ring already.  Their flags are read before any
	 * push, because a push may free the oldest ring entry. */
	size_t fresh = 0;
	for (size_t i = 0; i < st->new_events.len; i++) {
		struct egs_event *ev = st->new_events.items[i];
		if (!ev->listed)
			st->new_events.items[fresh++] = ev;
	}
	for (size_t i = 0; i < fresh; i++)
		ring_push(st, st->new_events.items[i]);
	st->new_events.len = 0;
	for (size_t i = 0; i < st->new_audit.len; i++)
		free(st->new_audit.items[i]);
	st->new_audit.len = 0;
}

/* The newest committed or uncommitted event like the one described, or NULL. */
static struct egs_event *find_repeat(struct egs_state *st, int64_t now, int64_t window, const char *type,
				     const char *reason, const char *object_kind, const char *object_name,
				     const char *workspace)
{
	size_t ring_back = st->events_len < 64 ? st->events_len : 64;
	for (size_t i = st->new_events.len + ring_back; i-- > 0;) {
		struct egs_event *e = i < ring_back ? st->events[(st->events_head + st->events_len - ring_back + i) %
								 st->cfg.event_retention]
						    : st->new_events.items[i - ring_back];
		if (now - e->time <= window && now >= e->time && strcmp(e->reason, reason) == 0 &&
		    strcmp(e->object_name, object_name) == 0 && strcmp(e->type, type) == 0 &&
		    strcmp(e->object_kind, object_kind) == 0 && strcmp(e->workspace, workspace) == 0)
			return e;
	}
	return NULL;
}

void egs_state_event_repeat(struct egs_state *st, int64_t now, int64_t window, const char *type,
			    const char *reason, const char *object_kind, const char *object_name,
			    const char *workspace, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	egs_utf8_sanitize(buf);
	workspace = workspace ? workspace : "";
	struct egs_event *e = find_repeat(st, now, window, type, reason, object_kind, object_name, workspace);
	if (!e) {
		egs_state_event(st, now, type, reason, object_kind, object_name, workspace, "%s", buf);
		return;
	}
	e->count++;
	e->time = now;
	free(e->message);
	e->message = egs_strdup(buf);
	if (!e->listed)
		return; /* this turn's own event: the commit writes it anyway */
	for (size_t i = 0; i < st->new_events.len; i++)
		if (st->new_events.items[i] == e)
			return;
	egs_vec_push(&st->new_events, e); /* written again by the commit, not pushed twice */
}

void egs_state_set_event_retention(struct egs_state *st, size_t retention)
{
	EGS_ASSERT(retention >= 128);
	size_t old_cap = st->cfg.event_retention;
	if (retention == old_cap)
		return;
	struct egs_event **ring = egs_calloc(retention, sizeof(*ring));
	size_t keep = st->events_len < retention ? st->events_len : retention;
	size_t drop = st->events_len - keep;
	for (size_t i = 0; i < st->events_len; i++) {
		struct egs_event *e = st->events[(st->events_head + i) % old_cap];
		if (i < drop)
			egs_event_free(e);
		else
			ring[i - drop] = e;
	}
	free(st->events);
	st->events = ring;
	st->events_head = 0;
	st->events_len = keep;
	st->cfg.event_retention = retention;
}
