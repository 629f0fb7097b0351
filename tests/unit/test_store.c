/*
 * test_store.c: the SQLite store against real files in a temporary directory: migrations and the
 * version check, a round trip of every field of every object kind (runtime-only fields excluded),
 * deletions, rollback on a failed commit, event retention and pruning, the queue rebuilt by load,
 * corrupt JSON columns, meta settings, and a fork/SIGKILL crash test of batch atomicity.
 * It also prints the time of a 64-GPR group commit (for information; nothing asserts on it).
 *
 * The second group runs the tests that do not look inside the SQLite file against the PostgreSQL
 * store (a server of its own, pgtest.h): each temporary "path" stands for a schema, so the same
 * round trip, rollback, retention, queue, meta, timing and kill -9 tests judge both stores.  Its
 * own tests cover what only PostgreSQL has: the schema_version row, and a server restart between
 * two commits on one handle.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

#include "pgtest.h"
#include "tmpdb.h"

/* ---- temporary database files ---- */

/* Runs SQL on the file behind the store's back (to corrupt it or read pragmas). */
static void raw_exec(const char *path, const char *sql)
{
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		fprintf(stderr, "raw_exec %s: %s\n", sql, msg);
	sqlite3_free(msg);
	sqlite3_close(db);
	assert_int_equal(rc, SQLITE_OK);
}

static int64_t raw_int(const char *path, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *stmt;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(stmt, 0);
	sqlite3_finalize(stmt);
	sqlite3_close(db);
	return v;
}

/* The PostgreSQL server's URL while the "postgres" group runs; "" while the SQLite one does. */
static char pg_url[512];
static struct pgtest pg_test;

/* What the store under test opens for a temporary database path: the path itself for SQLite; for
 * PostgreSQL a schema named (in hex) after the temporary directory, created on first use. */
static const char *store_url(const char *path, char *buf, size_t n)
{
	char schema[64] = "s_", sql[128];
	if (!pg_url[0])
		return path;
	const char *tail = strrchr(path, '/');
	while (tail > path && tail[-1] != '-') /* the mkdtemp suffix of egs-test-store-XXXXXX/egs.db */
		tail--;
	for (size_t i = 2; *tail && *tail != '/' && i + 3 < sizeof(schema); tail++, i += 2)
		snprintf(schema + i, 3, "%02x", (unsigned char)*tail);
	snprintf(sql, sizeof(sql), "CREATE SCHEMA IF NOT EXISTS %s", schema);
	assert_true(pgtest_exec(pg_url, sql));
	snprintf(buf, n, "%s&options=-csearch_path%%3D%s", pg_url, schema);
	return buf;
}

static struct egs_store *open_store(const char *path)
{
	struct egs_store *s = NULL;
	char url[768];
	assert_int_equal(egs_store_open(store_url(path, url, sizeof(url)), &s), EGS_OK);
	assert_non_null(s);
	return s;
}

/* Opens path, loads into a fresh *st (with cfg), closes. */
static void reload(const char *path, struct egs_state *st, const struct egs_state_config *cfg)
{
	struct egs_store *s = open_store(path);
	egs_state_init(st, cfg);
	assert_int_equal(egs_store_load(s, st), EGS_OK);
	egs_store_free(s);
}

/* The set-up most tests share: a fresh temporary database, opened, and *st initialised empty. */
static struct egs_store *open_fresh(struct tmpdb *t, struct egs_state *st)
{
	tmpdb_make(t, "egs-test-store");
	struct egs_store *s = open_store(t->path);
	egs_state_init(st, NULL);
	return s;
}

static void commit(struct egs_store *s, struct egs_state *st)
{
	assert_int_equal(egs_store_commit_changes(s, st), EGS_OK);
	egs_state_clear_changes(st);
}

/* ---- fixtures: every field set to something distinctive ---- */

static struct egs_project *mk_project(const char *name, int64_t t)
{
	struct egs_project *p = egs_calloc(1, sizeof(*p));
	egs_strlcpy(p->name, name, sizeof(p->name));
	p->created_at = t;
	return p;
}

static struct egs_cluster *mk_cluster(const char *name, bool with_urls)
{
	struct egs_cluster *c = egs_calloc(1, sizeof(*c));
	egs_strlcpy(c->name, name, sizeof(c->name));
	egs_strlcpy(c->project, "proj-a", sizeof(c->project));
	if (with_urls) {
		c->api_server = egs_strdup("https://k8s.example:6443");
		c->ca_data = egs_strdup("LS0tLS1CRUdJTiBDRVJU");
	}
	egs_strlcpy(c->agent_key_id, "key-agent-1", sizeof(c->agent_key_id));
	c->created_at = 1700000002;
	c->last_seen = 12345; /* runtime only */
	return c;
}

static struct egs_node *mk_node(const char *cluster, const char *name, int ngpus)
{
	struct egs_node *n = egs_calloc(1, sizeof(*n));
	egs_strlcpy(n->cluster, cluster, sizeof(n->cluster));
	egs_strlcpy(n->name, name, sizeof(n->name));
	egs_strlcpy(n->instance_type, "p5.48xlarge", sizeof(n->instance_type));
	egs_strlcpy(n->gpu_shape, "NVIDIA-H100-80GB-HBM3", sizeof(n->gpu_shape));
	egs_strlcpy(n->cloud_provider, "aws", sizeof(n->cloud_provider));
	egs_strlcpy(n->region, "us-east-1", sizeof(n->region));
	n->gpu_count = 8;
	n->memory_mib = 81920;
	n->temp_threshold = 85.5;
	n->power_threshold = 700.25;
	n->health = EGS_HEALTH_UNSCHEDULABLE;
	egs_strlcpy(n->gpr_id, "gpr-00000001-0001", sizeof(n->gpr_id));
	egs_strlcpy(n->attached_gpr, "gpr-00000002-0002", sizeof(n->attached_gpr));
	n->allocated_at = 1700000003;
	if (ngpus) {
		n->gpus = egs_calloc((size_t)ngpus, sizeof(*n->gpus));
		n->n_gpus = ngpus;
		for (int i = 0; i < ngpus; i++) {
			snprintf(n->gpus[i].uuid, sizeof(n->gpus[i].uuid), "GPU-6f0c-%d", i);
			n->gpus[i].index = i + 10;
			n->gpus[i].power_w = 300; /* runtime samples */
			n->gpus[i].temp_c = 60;
			n->gpus[i].util_pct = 99;
			n->gpus[i].mem_used_mib = 4096;
			n->gpus[i].sampled_at = 55;
		}
	}
	n->last_heartbeat = 777; /* runtime only */
	return n;
}

static struct egs_workspace *mk_workspace(const char *name, bool full)
{
	struct egs_workspace *w = egs_calloc(1, sizeof(*w));
	egs_strlcpy(w->name, name, sizeof(w->name));
	egs_strlcpy(w->project, "proj-a", sizeof(w->project));
	w->created_at = 1700000004;
	if (!full)
		return w;
	w->description = egs_strdup("team \"vision\" \xc3\xbc\n\ttabs");
	egs_strlist_add(&w->clusters, "worker-1");
	egs_strlist_add(&w->clusters, "worker-2");
	w->n_namespaces = 2;
	w->namespaces = egs_calloc(2, sizeof(*w->namespaces));
	egs_strlcpy(w->namespaces[0].name, "ns-train", sizeof(w->namespaces[0].name));
	egs_strlist_add(&w->namespaces[0].clusters, "worker-1");
	egs_strlist_add(&w->namespaces[0].clusters, "worker-2");
	egs_strlcpy(w->namespaces[1].name, "ns-empty", sizeof(w->namespaces[1].name));
	w->n_users = 2;
	w->users = egs_calloc(2, sizeof(*w->users));
	egs_strlcpy(w->users[0].username, "alice", sizeof(w->users[0].username));
	egs_strlcpy(w->users[0].email, "alice@example.com", sizeof(w->users[0].email));
	egs_strlcpy(w->users[1].username, "bob", sizeof(w->users[1].username));
	egs_strlcpy(w->users[1].email, "", sizeof(w->users[1].email));
	w->webhook_url = egs_strdup("https://hooks.example.com/T000/B000");
	/* The store keeps a policy as text (migration 4); the server parses it at start. */
	w->policy_json = egs_strdup("{\"maxGPRs\":4,\"softLimits\":{\"maxExitDurationPerGPR\":\"6h0m0s\"}}");
	return w;
}

static struct egs_gpr *mk_gpr(const char *id, enum egs_gpr_state state, int priority, uint64_t seq)
{
	struct egs_gpr *g = egs_gpr_new();
	egs_strlcpy(g->id, id, sizeof(g->id));
	snprintf(g->name, sizeof(g->name), "name-%s", id);
	egs_strlcpy(g->workspace, "ws-a", sizeof(g->workspace));
	egs_strlcpy(g->cluster, "worker-1", sizeof(g->cluster));
	egs_strlcpy(g->instance_type, "p5.48xlarge", sizeof(g->instance_type));
	egs_strlcpy(g->gpu_shape, "NVIDIA-H100-80GB-HBM3", sizeof(g->gpu_shape));
	egs_strlcpy(g->created_by, "key-owner-1", sizeof(g->created_by));
	g->gpus_per_node = 4;
	g->node_count = 2;
	g->memory_mib = 40960;
	g->exit_duration_s = 6 * 3600;
	g->idle_timeout_s = 1800;
	g->priority = priority;
	g->flags = 0x3ff;
	g->state = state;
	g->created_at = 1700000005;
	g->seq = seq;
	return g;
}

static void fill_gpr_extras(struct egs_gpr *g)
{
	egs_strlist_add(&g->preferred_clusters, "worker-2");
	egs_strlist_add(&g->preferred_clusters, "worker-1");
	g->failure_reason = egs_strdup("pre-check failed: \"nvidia-smi\" timed out");
	g->pending_reason = egs_strdup("exceeds workspace quota");
	g->start_ts = 1700000100;
	g->exit_at = 1700021700;
	g->completion_ts = 1700021800;
	g->retry_count = 2;
	g->delayed_count = 3;
	egs_strlist_add(&g->nodes, "worker-1/h100-node-1");
	egs_strlist_add(&g->nodes, "worker-1/h100-node-2");
	g->marks_sent = 5;
	g->share_centi = 120; /* GPU sharing: the request and its shares by GPU UUID */
	g->shares = egs_calloc(2, sizeof(*g->shares));
	g->n_shares = 2;
	egs_strlcpy(g->shares[0].uuid, "GPU-1", sizeof(g->shares[0].uuid));
	g->shares[0].centi = 60;
	egs_strlcpy(g->shares[1].uuid, "GPU-2", sizeof(g->shares[1].uuid));
	g->shares[1].centi = 60;
	g->phase_since = 99; /* runtime only */
	g->est_start = 98;   /* runtime only */
}

static struct egs_apikey *mk_apikey(const char *id, enum egs_role role, unsigned char seed, bool desc)
{
	struct egs_apikey *k = egs_calloc(1, sizeof(*k));
	egs_strlcpy(k->id, id, sizeof(k->id));
	snprintf(k->name, sizeof(k->name), "name-%s", id);
	egs_strlcpy(k->user_name, "alice@example.com", sizeof(k->user_name));
	if (desc)
		k->description = egs_strdup("CI pipeline key");
	k->role = role;
	egs_strlcpy(k->project, "proj-a", sizeof(k->project));
	egs_strlcpy(k->workspace, "ws-a", sizeof(k->workspace));
	egs_strlcpy(k->cluster, "worker-1", sizeof(k->cluster));
	for (int i = 0; i < 32; i++)
		k->hash[i] = (unsigned char)(seed + i * 7); /* includes 0x00 bytes for some seeds */
	k->created_at = 1700000006;
	k->expires_at = 1800000000;
	return k;
}

/* ---- comparisons: persistent fields equal, runtime fields reset ---- */

static void assert_opt_str(const char *a, const char *b)
{
	if (!a || !b)
		assert_ptr_equal(a, b);
	else
		assert_string_equal(a, b);
}

static void assert_strlist(const struct egs_strlist *a, const struct egs_strlist *b)
{
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++)
		assert_string_equal(a->v[i], b->v[i]);
}

static void cmp_project(const struct egs_project *a, const struct egs_project *b)
{
	assert_string_equal(a->name, b->name);
	assert_int_equal(a->created_at, b->created_at);
	assert_false(b->dirty);
}

static void cmp_cluster(const struct egs_cluster *a, const struct egs_cluster *b)
{
	assert_string_equal(a->name, b->name);
	assert_string_equal(a->project, b->project);
	assert_opt_str(a->api_server, b->api_server);
	assert_opt_str(a->ca_data, b->ca_data);
	assert_string_equal(a->agent_key_id, b->agent_key_id);
	assert_int_equal(a->created_at, b->created_at);
	assert_int_equal(b->last_seen, 0);
}

static void cmp_node(const struct egs_node *a, const struct egs_node *b)
{
	assert_string_equal(a->key, b->key);
	assert_string_equal(a->name, b->name);
	assert_string_equal(a->cluster, b->cluster);
	assert_string_equal(a->instance_type, b->instance_type);
	assert_string_equal(a->gpu_shape, b->gpu_shape);
	assert_string_equal(a->cloud_provider, b->cloud_provider);
	assert_string_equal(a->region, b->region);
	assert_int_equal(a->gpu_count, b->gpu_count);
	assert_int_equal(a->memory_mib, b->memory_mib);
	assert_true(a->temp_threshold == b->temp_threshold);
	assert_true(a->power_threshold == b->power_threshold);
	assert_int_equal(a->health, b->health);
	assert_string_equal(a->gpr_id, b->gpr_id);
	assert_string_equal(a->attached_gpr, b->attached_gpr);
	assert_int_equal(a->allocated_at, b->allocated_at);
	assert_int_equal(a->n_gpus, b->n_gpus);
	for (int i = 0; i < a->n_gpus; i++) {
		assert_string_equal(a->gpus[i].uuid, b->gpus[i].uuid);
		assert_int_equal(a->gpus[i].index, b->gpus[i].index);
		assert_true(b->gpus[i].power_w == 0 && b->gpus[i].temp_c == 0 && b->gpus[i].util_pct == 0);
		assert_int_equal(b->gpus[i].mem_used_mib, 0);
		assert_int_equal(b->gpus[i].sampled_at, 0);
	}
	if (a->n_gpus == 0)
		assert_null(b->gpus);
	assert_int_equal(b->last_heartbeat, 0);
}

static void cmp_workspace(const struct egs_workspace *a, const struct egs_workspace *b)
{
	assert_string_equal(a->name, b->name);
	assert_string_equal(a->project, b->project);
	assert_opt_str(a->description, b->description);
	assert_strlist(&a->clusters, &b->clusters);
	assert_int_equal(a->n_namespaces, b->n_namespaces);
	for (size_t i = 0; i < a->n_namespaces; i++) {
		assert_string_equal(a->namespaces[i].name, b->namespaces[i].name);
		assert_strlist(&a->namespaces[i].clusters, &b->namespaces[i].clusters);
	}
	assert_int_equal(a->n_users, b->n_users);
	for (size_t i = 0; i < a->n_users; i++) {
		assert_string_equal(a->users[i].username, b->users[i].username);
		assert_string_equal(a->users[i].email, b->users[i].email);
	}
	assert_int_equal(a->created_at, b->created_at);
	assert_opt_str(a->webhook_url, b->webhook_url);
	assert_opt_str(a->policy_json, b->policy_json);
	assert_null(b->policy); /* parsed by the server, never by the store */
}

static void cmp_gpr(const struct egs_gpr *a, const struct egs_gpr *b)
{
	assert_string_equal(a->id, b->id);
	assert_string_equal(a->name, b->name);
	assert_string_equal(a->workspace, b->workspace);
	assert_string_equal(a->cluster, b->cluster);
	assert_string_equal(a->instance_type, b->instance_type);
	assert_string_equal(a->gpu_shape, b->gpu_shape);
	assert_string_equal(a->created_by, b->created_by);
	assert_int_equal(a->gpus_per_node, b->gpus_per_node);
	assert_int_equal(a->node_count, b->node_count);
	assert_int_equal(a->memory_mib, b->memory_mib);
	assert_int_equal(a->exit_duration_s, b->exit_duration_s);
	assert_int_equal(a->idle_timeout_s, b->idle_timeout_s);
	assert_int_equal(a->priority, b->priority);
	assert_int_equal(a->flags, b->flags);
	assert_strlist(&a->preferred_clusters, &b->preferred_clusters);
	assert_int_equal(a->state, b->state);
	assert_opt_str(a->failure_reason, b->failure_reason);
	assert_opt_str(a->pending_reason, b->pending_reason);
	assert_int_equal(a->created_at, b->created_at);
	assert_int_equal(a->start_ts, b->start_ts);
	assert_int_equal(a->exit_at, b->exit_at);
	assert_int_equal(a->completion_ts, b->completion_ts);
	assert_int_equal(a->retry_count, b->retry_count);
	assert_int_equal(a->delayed_count, b->delayed_count);
	assert_int_equal(a->seq, b->seq);
	assert_strlist(&a->nodes, &b->nodes);
	assert_int_equal(a->marks_sent, b->marks_sent);
	assert_int_equal(a->share_centi, b->share_centi);
	assert_int_equal(a->n_shares, b->n_shares);
	for (int i = 0; i < a->n_shares; i++) {
		assert_string_equal(a->shares[i].uuid, b->shares[i].uuid);
		assert_int_equal(a->shares[i].centi, b->shares[i].centi);
	}
	assert_int_equal(b->est_start, 0);
	assert_false(b->dirty);
}

static void cmp_apikey(const struct egs_apikey *a, const struct egs_apikey *b)
{
	assert_string_equal(a->id, b->id);
	assert_string_equal(a->name, b->name);
	assert_string_equal(a->user_name, b->user_name);
	assert_opt_str(a->description, b->description);
	assert_int_equal(a->role, b->role);
	assert_string_equal(a->project, b->project);
	assert_string_equal(a->workspace, b->workspace);
	assert_string_equal(a->cluster, b->cluster);
	assert_memory_equal(a->hash, b->hash, 32);
	assert_int_equal(a->created_at, b->created_at);
	assert_int_equal(a->expires_at, b->expires_at);
}

static const struct egs_event *ring_event(const struct egs_state *st, size_t i)
{
	assert_true(i < st->events_len);
	return st->events[(st->events_head + i) % st->cfg.event_retention];
}

static void cmp_event(const struct egs_event *a, const struct egs_event *b)
{
	assert_int_equal(a->id, b->id);
	assert_int_equal(a->time, b->time);
	assert_int_equal(a->first_time, b->first_time);
	assert_int_equal(a->count, b->count);
	assert_string_equal(a->type, b->type);
	assert_string_equal(a->reason, b->reason);
	assert_string_equal(a->object_kind, b->object_kind);
	assert_string_equal(a->object_name, b->object_name);
	assert_string_equal(a->workspace, b->workspace);
	assert_string_equal(a->message, b->message);
}

/* Every object of a is in b with equal persistent fields, and b holds nothing else. */
static void assert_same_state(const struct egs_state *a, const struct egs_state *b)
{
	const char *k;
	void *v;
	assert_int_equal(a->projects.len, b->projects.len);
	for (size_t i = 0; egs_map_next(&a->projects, &i, &k, &v);)
		cmp_project(v, egs_state_project(b, k));
	assert_int_equal(a->clusters.len, b->clusters.len);
	for (size_t i = 0; egs_map_next(&a->clusters, &i, &k, &v);)
		cmp_cluster(v, egs_state_cluster(b, k));
	assert_int_equal(a->nodes.len, b->nodes.len);
	for (size_t i = 0; egs_map_next(&a->nodes, &i, &k, &v);) {
		const struct egs_node *n = v;
		cmp_node(n, egs_state_node(b, n->cluster, n->name));
	}
	assert_int_equal(a->workspaces.len, b->workspaces.len);
	for (size_t i = 0; egs_map_next(&a->workspaces, &i, &k, &v);)
		cmp_workspace(v, egs_state_workspace(b, k));
	assert_int_equal(a->gprs.len, b->gprs.len);
	for (size_t i = 0; egs_map_next(&a->gprs, &i, &k, &v);)
		cmp_gpr(v, egs_state_gpr(b, k));
	assert_int_equal(a->apikeys.len, b->apikeys.len);
	for (size_t i = 0; egs_map_next(&a->apikeys, &i, &k, &v);) {
		const struct egs_apikey *key = v;
		cmp_apikey(key, egs_state_apikey(b, k));
		assert_ptr_equal(egs_state_apikey_by_hash(b, key->hash), egs_state_apikey(b, k));
	}
	assert_int_equal(a->events_len, b->events_len);
	for (size_t i = 0; i < a->events_len; i++)
		cmp_event(ring_event(a, i), ring_event(b, i));
	assert_int_equal(a->next_event_id, b->next_event_id);
	/* next_seq is derived from the stored GPRs, so it is only compared where none was deleted. */
}

/* Adds one object of every kind (two where NULL/empty variants matter) and touches them. */
static void populate(struct egs_state *st)
{
	struct egs_project *p = mk_project("proj-a", 1700000001);
	struct egs_project *p2 = mk_project("proj-b", 1700000011);
	struct egs_cluster *c1 = mk_cluster("worker-1", true), *c2 = mk_cluster("worker-2", false);
	struct egs_node *n1 = mk_node("worker-1", "h100-node-1", 3), *n2 = mk_node("worker-2", "t4-node-1", 0);
	struct egs_workspace *w1 = mk_workspace("ws-a", true), *w2 = mk_workspace("ws-b", false);
	struct egs_gpr *g1 = mk_gpr("gpr-00000001-0001", EGS_GPR_PROVISIONED, 250, 7);
	struct egs_gpr *g2 = mk_gpr("gpr-00000002-0002", EGS_GPR_QUEUED, 50, 8);
	struct egs_apikey *k1 = mk_apikey("key-owner-1", EGS_ROLE_OWNER, 0, true);
	struct egs_apikey *k2 = mk_apikey("key-agent-1", EGS_ROLE_AGENT, 100, false);
	fill_gpr_extras(g1);
	assert_int_equal(egs_state_add_project(st, p), EGS_OK);
	assert_int_equal(egs_state_add_project(st, p2), EGS_OK);
	assert_int_equal(egs_state_add_cluster(st, c1), EGS_OK);
	assert_int_equal(egs_state_add_cluster(st, c2), EGS_OK);
	assert_int_equal(egs_state_add_node(st, n1), EGS_OK);
	assert_int_equal(egs_state_add_node(st, n2), EGS_OK);
	assert_int_equal(egs_state_add_workspace(st, w1), EGS_OK);
	assert_int_equal(egs_state_add_workspace(st, w2), EGS_OK);
	assert_int_equal(egs_state_add_gpr(st, g1), EGS_OK);
	assert_int_equal(egs_state_add_gpr(st, g2), EGS_OK);
	assert_int_equal(egs_state_add_apikey(st, k1), EGS_OK);
	assert_int_equal(egs_state_add_apikey(st, k2), EGS_OK);
	egs_state_touch(st, EGS_KIND_PROJECT, p);
	egs_state_touch(st, EGS_KIND_PROJECT, p2);
	egs_state_touch(st, EGS_KIND_CLUSTER, c1);
	egs_state_touch(st, EGS_KIND_CLUSTER, c2);
	egs_state_touch(st, EGS_KIND_NODE, n1);
	egs_state_touch(st, EGS_KIND_NODE, n2);
	egs_state_touch(st, EGS_KIND_WORKSPACE, w1);
	egs_state_touch(st, EGS_KIND_WORKSPACE, w2);
	egs_state_touch(st, EGS_KIND_GPR, g1);
	egs_state_touch(st, EGS_KIND_GPR, g2);
	egs_state_touch(st, EGS_KIND_APIKEY, k1);
	egs_state_touch(st, EGS_KIND_APIKEY, k2);
	egs_state_event(st, 1700000200, "Normal", "Provisioned", "GPR", g1->id, "ws-a", "GPR %s provisioned", g1->id);
	egs_state_event(st, 1700000300, "Warning", "NodeUnhealthy", "Node", n1->key, "",
			"node %s: temperature \"%d C\"", n1->key, 91);
}

/* ---- tests ---- */

static void test_migrate_empty_file(void **unused)
{
	(void)unused;
	struct tmpdb t;
	tmpdb_make(&t, "egs-test-store");
	struct egs_store *s = open_store(t.path);
	assert_true(egs_store_schema_version() >= 1);
	assert_int_equal(raw_int(t.path, "PRAGMA user_version"), egs_store_schema_version());
	assert_int_equal(raw_int(t.path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
					 "('meta','projects','clusters','nodes','workspaces','gprs','api_keys','events')"),
			 8);
	/* A no-op commit does not need a transaction. */
	struct egs_state st;
	egs_state_init(&st, NULL);
	assert_int_equal(egs_store_commit_changes(s, &st), EGS_OK);
	assert_int_equal(egs_store_load(s, &st), EGS_OK);
	assert_int_equal(st.projects.len, 0);
	assert_int_equal(st.next_event_id, 1);
	egs_state_cleanup(&st);
	egs_store_free(s);
	egs_store_free(NULL);

	/* Reopening does not migrate twice; the WAL journal mode is persistent. */
	s = open_store(t.path);
	egs_store_free(s);
	assert_int_equal(raw_int(t.path, "PRAGMA user_version"), egs_store_schema_version());
	tmpdb_cleanup(&t);

	/* A zero-length file (e.g. touched by an installer) is an empty database. */
	tmpdb_make(&t, "egs-test-store");
	FILE *f = fopen(t.path, "w");
	assert_non_null(f);
	fclose(f);
	s = open_store(t.path);
	egs_store_free(s);
	assert_int_equal(raw_int(t.path, "PRAGMA user_version"), egs_store_schema_version());
	tmpdb_cleanup(&t);
}

static void test_refuse_future_version(void **unused)
{
	(void)unused;
	struct tmpdb t;
	char sql[64];
	tmpdb_make(&t, "egs-test-store");
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", egs_store_schema_version() + 1);
	raw_exec(t.path, sql);
	struct egs_store *s = (struct egs_store *)&t; /* must be reset to NULL */
	assert_int_equal(egs_store_open_sqlite(t.path, &s), EGS_ERR_STORE);
	assert_null(s);
	/* The file is left as it was. */
	assert_int_equal(raw_int(t.path, "PRAGMA user_version"), egs_store_schema_version() + 1);
	assert_int_equal(raw_int(t.path, "SELECT count(*) FROM sqlite_master"), 0);
	tmpdb_cleanup(&t);

	/* A file that is not a database at all is an error too, not a crash. */
	tmpdb_make(&t, "egs-test-store");
	FILE *f = fopen(t.path, "w");
	assert_non_null(f);
	fputs("this is not an SQLite database, just some text that is long enough to have a header....", f);
	fclose(f);
	assert_int_equal(egs_store_open_sqlite(t.path, &s), EGS_ERR_STORE);
	assert_null(s);
	tmpdb_cleanup(&t);
}

static void test_roundtrip(void **unused)
{
	(void)unused;
	struct tmpdb t;
	struct egs_state a, b;
	struct egs_store *s = open_fresh(&t, &a);
	populate(&a);
	commit(s, &a);
	egs_store_free(s);

	reload(t.path, &b, NULL);
	assert_same_state(&a, &b);
	assert_int_equal(b.next_seq, a.next_seq);
	egs_state_cleanup(&b);

	/* Updates and one deletion of every kind, plus an object created and deleted in one turn. */
	s = open_store(t.path);
	struct egs_project *p = egs_state_project(&a, "proj-a");
	p->created_at = 42;
	egs_state_touch(&a, EGS_KIND_PROJECT, p);
	struct egs_gpr *g = egs_state_gpr(&a, "gpr-00000001-0001");
	g->state = EGS_GPR_COMPLETE;
	egs_strlist_cleanup(&g->nodes);
	egs_strlist_add(&g->nodes, "worker-1/h100-node-9");
	free(g->failure_reason);
	g->failure_reason = NULL;
	egs_state_touch(&a, EGS_KIND_GPR, g);
	struct egs_node *n = egs_state_node(&a, "worker-1", "h100-node-1");
	n->health = EGS_HEALTH_HEALTHY;
	n->gpr_id[0] = '\0';
	egs_state_touch(&a, EGS_KIND_NODE, n);
	egs_state_del(&a, EGS_KIND_PROJECT, egs_state_project(&a, "proj-b"));
	egs_state_del(&a, EGS_KIND_CLUSTER, egs_state_cluster(&a, "worker-2"));
	egs_state_del(&a, EGS_KIND_NODE, egs_state_node(&a, "worker-2", "t4-node-1"));
	egs_state_del(&a, EGS_KIND_WORKSPACE, egs_state_workspace(&a, "ws-b"));
	egs_state_del(&a, EGS_KIND_GPR, egs_state_gpr(&a, "gpr-00000002-0002"));
	egs_state_del(&a, EGS_KIND_APIKEY, egs_state_apikey(&a, "key-agent-1"));
	struct egs_project *tmp = mk_project("proj-tmp", 1);
	assert_int_equal(egs_state_add_project(&a, tmp), EGS_OK);
	egs_state_touch(&a, EGS_KIND_PROJECT, tmp);
	egs_state_del(&a, EGS_KIND_PROJECT, tmp);
	commit(s, &a);
	egs_store_free(s);

	reload(t.path, &b, NULL);
	assert_same_state(&a, &b);
	assert_null(egs_state_project(&b, "proj-b"));
	assert_null(egs_state_project(&b, "proj-tmp"));
	assert_null(egs_state_cluster(&b, "worker-2"));
	assert_null(egs_state_gpr(&b, "gpr-00000002-0002"));
	assert_int_equal(egs_queue_len(&b.queue), 0);
	assert_int_equal(b.active.len, 0); /* the Complete GPR is not active */
	egs_state_cleanup(&b);
	egs_state_cleanup(&a);
	tmpdb_cleanup(&t);
}

static struct egs_doc *mk_doc(const char *name, const char *spec, int64_t t)
{
	struct egs_doc *d = egs_calloc(1, sizeof(*d));
	egs_strlcpy(d->name, name, sizeof(d->name));
	egs_strlcpy(d->project, "default", sizeof(d->project));
	d->spec = egs_strdup(spec);
	d->created_at = t;
	d->updated_at = t + 1;
	return d;
}

static void cmp_doc(const struct egs_doc *a, const struct egs_doc *b)
{
	assert_non_null(b);
	assert_string_equal(a->name, b->name);
	assert_string_equal(a->project, b->project);
	assert_string_equal(a->spec, b->spec);
	assert_int_equal(a->created_at, b->created_at);
	assert_int_equal(a->updated_at, b->updated_at);
}

/* GPR templates and bindings (migration 6): written, updated and deleted like every other kind, and
 * a template and a binding of the same name are different rows. */
static void test_docs_roundtrip(void **unused)
{
	(void)unused;
	struct tmpdb t;
	struct egs_state a, b;
	struct egs_store *s = open_fresh(&t, &a);
	struct egs_doc *t1 = mk_doc("train", "{\"clusterName\":\"worker-1\",\"numberOfGPUs\":4}", 1700000000);
	struct egs_doc *t2 = mk_doc("team-a", "{\"clusterName\":\"worker-2\"}", 1700000010);
	struct egs_doc *b1 = mk_doc("team-a", "{\"clusters\":[],\"enableAutoGPR\":false}", 1700000020);
	assert_int_equal(egs_state_add_doc(&a, EGS_KIND_TEMPLATE, t1), EGS_OK);
	assert_int_equal(egs_state_add_doc(&a, EGS_KIND_TEMPLATE, t2), EGS_OK);
	assert_int_equal(egs_state_add_doc(&a, EGS_KIND_BINDING, b1), EGS_OK);
	/* a kube credential doc may share its workspace's name with a binding: another table */
	struct egs_doc *k1 = mk_doc("team-a", "{\"clusters\":{\"worker-1\":{\"want\":2}}}", 1700000030);
	assert_int_equal(egs_state_add_doc(&a, EGS_KIND_KUBECRED, k1), EGS_OK);
	egs_state_touch(&a, EGS_KIND_KUBECRED, k1);
	/* migration 8: an active alert and an undelivered webhook message, each in a table of its own */
	struct egs_doc *al = mk_doc("team-a", "{\"key\":\"0|c1/n1|GPU-1\"}", 1700000040);
	struct egs_doc *ob = mk_doc("egs-0123", "{\"attempts\":2}", 1700000050);
	assert_int_equal(egs_state_add_doc(&a, EGS_KIND_ALERT, al), EGS_OK);
	assert_int_equal(egs_state_add_doc(&a, EGS_KIND_OUTBOX, ob), EGS_OK);
	egs_state_touch(&a, EGS_KIND_ALERT, al);
	egs_state_touch(&a, EGS_KIND_OUTBOX, ob);
	/* migration 9: a GPUProvisioningRequest's link to its GPR, named after the CR's uid */
	struct egs_doc *l1 = mk_doc("0b6c2f9e-5d4e-4b8a-9a37-2f1d3c4b5a69",
				    "{\"gprId\":\"gpr-00000001-abcd\",\"cluster\":\"worker-1\"}", 1700000060);
	assert_int_equal(egs_state_add_doc(&a, EGS_KIND_GPRLINK, l1), EGS_OK);
	egs_state_touch(&a, EGS_KIND_GPRLINK, l1);
	/* migration 12: an inference endpoint, named by its id */
	struct egs_doc *e1 = mk_doc("iep-0a1b2c3d-4e5f", "{\"endpointName\":\"llm\",\"cluster\":\"worker-1\"}", 1700000070);
	assert_int_equal(egs_state_add_doc(&a, EGS_KIND_ENDPOINT, e1), EGS_OK);
	egs_state_touch(&a, EGS_KIND_ENDPOINT, e1);
	struct egs_doc *dup = mk_doc("train", "{}", 1);
	assert_int_equal(egs_state_add_doc(&a, EGS_KIND_TEMPLATE, dup), EGS_ERR_EXISTS);
	egs_doc_free(dup);
	egs_state_touch(&a, EGS_KIND_TEMPLATE, t1);
	egs_state_touch(&a, EGS_KIND_TEMPLATE, t2);
	egs_state_touch(&a, EGS_KIND_BINDING, b1);
	commit(s, &a);

	free(t1->spec);
	t1->spec = egs_strdup("{\"clusterName\":\"worker-1\",\"numberOfGPUs\":8}");
	egs_state_touch(&a, EGS_KIND_TEMPLATE, t1);
	egs_state_del(&a, EGS_KIND_TEMPLATE, t2);
	egs_state_del(&a, EGS_KIND_OUTBOX, ob); /* delivered */
	commit(s, &a);
	egs_store_free(s);

	reload(t.path, &b, NULL);
	assert_int_equal(b.templates.len, 1);
	assert_int_equal(b.bindings.len, 1);
	assert_int_equal(b.kubecreds.len, 1);
	assert_int_equal(b.gprlinks.len, 1);
	assert_int_equal(b.endpoints.len, 1);
	cmp_doc(egs_state_doc(&a, EGS_KIND_ENDPOINT, "iep-0a1b2c3d-4e5f"), egs_state_doc(&b, EGS_KIND_ENDPOINT, "iep-0a1b2c3d-4e5f"));
	cmp_doc(egs_state_doc(&a, EGS_KIND_GPRLINK, "0b6c2f9e-5d4e-4b8a-9a37-2f1d3c4b5a69"),
		egs_state_doc(&b, EGS_KIND_GPRLINK, "0b6c2f9e-5d4e-4b8a-9a37-2f1d3c4b5a69"));
	cmp_doc(egs_state_doc(&a, EGS_KIND_KUBECRED, "team-a"), egs_state_doc(&b, EGS_KIND_KUBECRED, "team-a"));
	cmp_doc(egs_state_doc(&a, EGS_KIND_ALERT, "team-a"), egs_state_doc(&b, EGS_KIND_ALERT, "team-a"));
	assert_int_equal(b.outbox.len, 0);
	cmp_doc(egs_state_doc(&a, EGS_KIND_TEMPLATE, "train"), egs_state_doc(&b, EGS_KIND_TEMPLATE, "train"));
	cmp_doc(egs_state_doc(&a, EGS_KIND_BINDING, "team-a"), egs_state_doc(&b, EGS_KIND_BINDING, "team-a"));
	assert_null(egs_state_doc(&b, EGS_KIND_TEMPLATE, "team-a"));
	egs_state_cleanup(&b);
	egs_state_cleanup(&a);
	tmpdb_cleanup(&t);
}

static void test_rollback_keeps_previous_state(void **unused)
{
	(void)unused;
	struct tmpdb t;
	struct egs_state st, b;
	struct egs_store *s = open_fresh(&t, &st);
	struct egs_project *keep = mk_project("keep", 1);
	assert_int_equal(egs_state_add_project(&st, keep), EGS_OK);
	egs_state_touch(&st, EGS_KIND_PROJECT, keep);
	commit(s, &st);

	/* A batch whose last row breaks a constraint (empty name): nothing of it may land. */
	keep->created_at = 2;
	egs_state_touch(&st, EGS_KIND_PROJECT, keep);
	struct egs_project *lost = mk_project("lost", 3), *bad = mk_project("", 4);
	assert_int_equal(egs_state_add_project(&st, lost), EGS_OK);
	egs_state_touch(&st, EGS_KIND_PROJECT, lost);
	egs_state_event(&st, 5, "Normal", "Created", "Project", "lost", "", "created");
	assert_int_equal(egs_state_add_project(&st, bad), EGS_OK);
	egs_state_touch(&st, EGS_KIND_PROJECT, bad);
	size_t nchanges = st.changes.len;
	assert_int_equal(egs_store_commit_changes(s, &st), EGS_ERR_STORE);
	assert_int_equal(st.changes.len, nchanges); /* st untouched: the caller decides */
	assert_int_equal(st.new_events.len, 1);

	reload(t.path, &b, NULL);
	assert_int_equal(b.projects.len, 1);
	assert_int_equal(egs_state_project(&b, "keep")->created_at, 1);
	assert_int_equal(b.events_len, 0);
	egs_state_cleanup(&b);

	/* The same connection works after the rollback: drop the bad object and retry the turn. */
	egs_state_del(&st, EGS_KIND_PROJECT, bad);
	commit(s, &st);
	reload(t.path, &b, NULL);
	assert_int_equal(b.projects.len, 2);
	assert_int_equal(egs_state_project(&b, "keep")->created_at, 2);
	assert_non_null(egs_state_project(&b, "lost"));
	assert_int_equal(b.events_len, 1);
	egs_state_cleanup(&b);
	egs_state_cleanup(&st);
	egs_store_free(s);
	tmpdb_cleanup(&t);
}

static void test_events_retention_and_prune(void **unused)
{
	(void)unused;
	struct tmpdb t;
	struct egs_state st, b;
	struct egs_store *s = open_fresh(&t, &st);
	for (int i = 0; i < 12; i++) /* ids 1..12, times 100..111 */
		egs_state_event(&st, 100 + i, "Normal", "Tick", "GPR", "gpr-x", "ws-a", "tick %d", i);
	commit(s, &st);
	/* A repeated event keeps its id and bumps count: the row is updated (an upsert). */
	struct egs_event *bump = egs_calloc(1, sizeof(*bump));
	*bump = *ring_event(&st, 9);
	bump->listed = false; /* a new object: it joins the ring (and is freed with it) */
	bump->message = egs_strdup("tick 9 again");
	bump->count = 4;
	bump->time = 500;
	egs_vec_push(&st.new_events, bump);
	commit(s, &st);
	egs_store_free(s);

	struct egs_state_config cfg = { .event_retention = 5 };
	reload(t.path, &b, &cfg);
	assert_int_equal(b.events_len, 5);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(ring_event(&b, i)->id, 8 + (int64_t)i); /* newest five, oldest first */
	assert_int_equal(ring_event(&b, 2)->count, 4);
	assert_int_equal(ring_event(&b, 2)->time, 500);
	assert_string_equal(ring_event(&b, 2)->message, "tick 9 again");
	assert_int_equal(ring_event(&b, 4)->first_time, 111);
	assert_int_equal(b.next_event_id, 13);
	egs_state_cleanup(&b);

	/* Pruning by time; ids keep counting past what was pruned. */
	s = open_store(t.path);
	int64_t deleted = -1;
	assert_int_equal(egs_store_prune_events(s, 105, &deleted), EGS_OK);
	assert_int_equal(deleted, 5);
	assert_int_equal(egs_store_prune_events(s, 105, NULL), EGS_OK);
	assert_int_equal(egs_store_prune_events(s, 1000, &deleted), EGS_OK);
	assert_int_equal(deleted, 7);
	egs_store_free(s);
	reload(t.path, &b, NULL);
	assert_int_equal(b.events_len, 0);
	assert_int_equal(b.next_event_id, 13); /* ids are never reused, even with the table empty */
	egs_state_cleanup(&b);
	egs_state_cleanup(&st);
	tmpdb_cleanup(&t);
}

static void test_queue_restored(void **unused)
{
	(void)unused;
	struct tmpdb t;
	struct egs_state st, b;
	static const struct {
		const char *id;
		enum egs_gpr_state state;
		int priority;
		uint64_t seq;
	} gs[] = {
		{ "gpr-q1", EGS_GPR_QUEUED, 100, 5 },        { "gpr-q2", EGS_GPR_QUEUED, 200, 9 },
		{ "gpr-q3", EGS_GPR_QUEUED, 100, 2 },        { "gpr-pend", EGS_GPR_PENDING, 300, 1 },
		{ "gpr-prov", EGS_GPR_PROVISIONED, 10, 3 }, { "gpr-rel", EGS_GPR_RELEASING, 10, 4 },
		{ "gpr-done", EGS_GPR_COMPLETE, 900, 10 },  { "gpr-q4", EGS_GPR_QUEUED, 200, 11 },
	};
	static const char *const order[] = { "gpr-q2", "gpr-q4", "gpr-q3", "gpr-q1" };
	struct egs_store *s = open_fresh(&t, &st);
	for (size_t i = 0; i < EGS_ARRAY_LEN(gs); i++) {
		struct egs_gpr *g = mk_gpr(gs[i].id, gs[i].state, gs[i].priority, gs[i].seq);
		assert_int_equal(egs_state_add_gpr(&st, g), EGS_OK);
		egs_state_touch(&st, EGS_KIND_GPR, g);
	}
	commit(s, &st);
	egs_store_free(s);
	egs_state_cleanup(&st);

	reload(t.path, &b, NULL);
	assert_int_equal(egs_queue_len(&b.queue), EGS_ARRAY_LEN(order));
	struct egs_gpr *sorted[EGS_ARRAY_LEN(order)];
	egs_queue_sorted(&b.queue, sorted);
	for (size_t i = 0; i < EGS_ARRAY_LEN(order); i++)
		assert_string_equal(sorted[i]->id, order[i]);
	assert_string_equal(egs_queue_peek(&b.queue)->id, "gpr-q2");
	assert_int_equal(egs_state_gpr(&b, "gpr-pend")->heap_idx, SIZE_MAX);
	assert_int_equal(egs_state_gpr(&b, "gpr-prov")->heap_idx, SIZE_MAX);
	assert_int_equal(egs_state_gpr(&b, "gpr-done")->heap_idx, SIZE_MAX);
	assert_int_equal(b.active.len, 2);
	assert_int_equal(b.next_seq, 12);
	egs_state_cleanup(&b);
	tmpdb_cleanup(&t);
}

/* Loads path expecting failure, and checks that stderr named the table and the row's key. */
static void expect_load_failure(const char *path, const char *table, const char *key)
{
	char log[] = "/tmp/egs-test-store-log-XXXXXX";
	int fd = mkstemp(log);
	assert_true(fd >= 0);
	fflush(stderr);
	int saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	struct egs_store *s = open_store(path);
	struct egs_state st;
	egs_state_init(&st, NULL);
	enum egs_err err = egs_store_load(s, &st);
	egs_state_cleanup(&st); /* whatever was loaded before the bad row is freed normally */
	egs_store_free(s);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	char buf[1024] = "";
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(log);
	buf[n > 0 ? n : 0] = '\0';
	print_message("  -> %s", buf);
	assert_int_equal(err, EGS_ERR_STORE);
	assert_non_null(strstr(buf, "store: "));
	assert_non_null(strstr(buf, table));
	assert_non_null(strstr(buf, key));
}

static void test_corrupt_columns(void **unused)
{
	(void)unused;
	static const struct {
		const char *table, *key, *sql;
	} cases[] = {
		{ "gprs", "gpr-00000001-0001", "UPDATE gprs SET nodes = '[\"worker-1/h100-no' WHERE id = 'gpr-00000001-0001'" },
		{ "gprs", "gpr-00000001-0001", "UPDATE gprs SET preferred_clusters = '{\"a\":1}' WHERE id = 'gpr-00000001-0001'" },
		{ "gprs", "gpr-00000002-0002", "UPDATE gprs SET nodes = '[1,2]' WHERE id = 'gpr-00000002-0002'" },
		{ "gprs", "gpr-00000002-0002", "UPDATE gprs SET state = 'Bogus' WHERE id = 'gpr-00000002-0002'" },
		{ "gprs", "gpr-00000001-0001", "UPDATE gprs SET shares = '{\"request\":0,\"devices\":{}}' WHERE id = 'gpr-00000001-0001'" },
		{ "gprs", "gpr-00000001-0001", "UPDATE gprs SET shares = '{\"request\":50,\"devices\":{\"GPU-1\":150}}' WHERE id = 'gpr-00000001-0001'" },
		{ "gprs", "gpr-00000001-0001", "UPDATE gprs SET shares = '{\"request\":50' WHERE id = 'gpr-00000001-0001'" },
		{ "gprs", "gpr-00000002-0002", "UPDATE gprs SET name = replace(hex(zeroblob(50)), '0', 'x') WHERE id = 'gpr-00000002-0002'" },
		{ "nodes", "worker-1/h100-node-1", "UPDATE nodes SET gpus = '[{\"uuid\":\"GPU-1\",\"ind' WHERE key = 'worker-1/h100-node-1'" },
		{ "nodes", "worker-1/h100-node-1", "UPDATE nodes SET gpus = '[{\"uuid\":5,\"index\":0}]' WHERE key = 'worker-1/h100-node-1'" },
		{ "nodes", "worker-2/other", "UPDATE nodes SET key = 'worker-2/other' WHERE key = 'worker-2/t4-node-1'" },
		{ "nodes", "worker-2/t4-node-1", "UPDATE nodes SET health = 'Sick' WHERE key = 'worker-2/t4-node-1'" },
		{ "workspaces", "ws-a", "UPDATE workspaces SET namespaces = '[{\"name\":\"ns\"}]' WHERE name = 'ws-a'" },
		{ "workspaces", "ws-a", "UPDATE workspaces SET users = '[{\"username\":\"u\"' WHERE name = 'ws-a'" },
		{ "workspaces", "ws-b", "UPDATE workspaces SET clusters = '' WHERE name = 'ws-b'" },
		{ "api_keys", "key-agent-1", "UPDATE api_keys SET role = 'Root' WHERE id = 'key-agent-1'" },
		{ "events", "2", "UPDATE events SET type = 'Informational' WHERE id = 2" },
	};
	for (size_t i = 0; i < EGS_ARRAY_LEN(cases); i++) {
		struct tmpdb t;
		print_message("corrupt: %s\n", cases[i].sql);
		struct egs_state st;
		struct egs_store *s = open_fresh(&t, &st);
		populate(&st);
		commit(s, &st);
		egs_store_free(s);
		egs_state_cleanup(&st);
		raw_exec(t.path, cases[i].sql);
		expect_load_failure(t.path, cases[i].table, cases[i].key);
		tmpdb_cleanup(&t);
	}
}

/* A list that JSON cannot carry (invalid UTF-8) fails the commit cleanly instead of writing a row
 * that load would reject; nothing of the batch lands and nothing leaks. */
static void test_unencodable_list_fails(void **unused)
{
	(void)unused;
	struct tmpdb t;
	struct egs_state st, b;
	struct egs_store *s = open_fresh(&t, &st);
	struct egs_workspace *w = mk_workspace("ws-a", true);
	egs_strlcpy(w->namespaces[1].name, "bad-\xff", sizeof(w->namespaces[1].name));
	assert_int_equal(egs_state_add_workspace(&st, w), EGS_OK);
	egs_state_touch(&st, EGS_KIND_WORKSPACE, w);
	assert_int_equal(egs_store_commit_changes(s, &st), EGS_ERR_STORE);
	egs_strlcpy(w->namespaces[1].name, "ns-ok", sizeof(w->namespaces[1].name));
	struct egs_gpr *g = mk_gpr("gpr-utf8", EGS_GPR_QUEUED, 1, 1);
	egs_strlist_add(&g->nodes, "worker-1/\xc3");
	assert_int_equal(egs_state_add_gpr(&st, g), EGS_OK);
	egs_state_touch(&st, EGS_KIND_GPR, g);
	assert_int_equal(egs_store_commit_changes(s, &st), EGS_ERR_STORE);
	egs_store_free(s);
	reload(t.path, &b, NULL);
	assert_int_equal(b.workspaces.len, 0);
	assert_int_equal(b.gprs.len, 0);
	egs_state_cleanup(&b);
	egs_state_cleanup(&st);
	tmpdb_cleanup(&t);
}

static void test_meta(void **unused)
{
	(void)unused;
	struct tmpdb t;
	char *v = (char *)"sentinel";
	tmpdb_make(&t, "egs-test-store");
	struct egs_store *s = open_store(t.path);
	assert_int_equal(egs_store_meta_get(s, "token_secret", &v), EGS_OK);
	assert_null(v);
	assert_int_equal(egs_store_meta_set(s, "token_secret", "abc"), EGS_OK);
	assert_int_equal(egs_store_meta_set(s, "token_secret", "def"), EGS_OK);
	assert_int_equal(egs_store_meta_set(s, "other", ""), EGS_OK);
	egs_store_free(s);
	s = open_store(t.path);
	assert_int_equal(egs_store_meta_get(s, "token_secret", &v), EGS_OK);
	assert_string_equal(v, "def");
	free(v);
	assert_int_equal(egs_store_meta_get(s, "other", &v), EGS_OK);
	assert_string_equal(v, "");
	free(v);
	egs_store_free(s);
	tmpdb_cleanup(&t);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Informational: the group commit of 64 new GPRs (and their 64 Created events). */
static void test_commit_timing(void **unused)
{
	(void)unused;
	enum { BATCHES = 200, PER = 64 };
	static double us[BATCHES];
	struct tmpdb t;
	struct egs_state st;
	struct egs_store *s = open_fresh(&t, &st);
	for (int b = 0; b < BATCHES; b++) {
		for (int i = 0; i < PER; i++) {
			char id[EGS_ID_MAX];
			snprintf(id, sizeof(id), "gpr-%08x-%04x", (unsigned)b, (unsigned)i);
			struct egs_gpr *g = mk_gpr(id, EGS_GPR_QUEUED, 100 + i, st.next_seq);
			assert_int_equal(egs_state_add_gpr(&st, g), EGS_OK);
			egs_state_touch(&st, EGS_KIND_GPR, g);
			egs_state_event(&st, 1700000000 + b, "Normal", "Created", "GPR", id, "ws-a", "GPR %s created", id);
		}
		double t0 = now_us();
		assert_int_equal(egs_store_commit_changes(s, &st), EGS_OK);
		us[b] = now_us() - t0;
		egs_state_clear_changes(&st);
	}
	double sum = 0;
	for (int b = 0; b < BATCHES; b++)
		sum += us[b];
	qsort(us, BATCHES, sizeof(us[0]), cmp_double);
	printf("store: commit of %d GPRs + %d events: mean %.0f us, p50 %.0f us, p99 %.0f us, max %.0f us "
	       "(%.0f GPR/s at one commit per batch; db in %s)\n",
	       PER, PER, sum / BATCHES, us[BATCHES / 2], us[BATCHES * 99 / 100], us[BATCHES - 1],
	       PER * BATCHES / (sum / 1e6), t.dir);
	egs_store_free(s);
	struct egs_state b;
	reload(t.path, &b, NULL);
	assert_int_equal(b.gprs.len, BATCHES * PER);
	assert_int_equal(egs_queue_len(&b.queue), BATCHES * PER);
	egs_state_cleanup(&b);
	egs_state_cleanup(&st);
	tmpdb_cleanup(&t);
}

/* ---- crash test ---- */

enum { CRASH_PER = 16, CRASH_ROUNDS = 6 };

/*
 * Child: continues from the batch number stored in project "counter", then commits batches
 * forever.  Batch b adds GPRs crash-b-0 .. crash-b-15, deletes crash-(b-3)-0, sets the counter to b
 * and writes one event; b goes to the pipe only after egs_store_commit_changes() returned.
 */
static void crash_child(const char *path, int fd)
{
	struct egs_store *s;
	struct egs_state st;
	egs_state_init(&st, NULL);
	char url[768];
	if (egs_store_open(store_url(path, url, sizeof(url)), &s) || egs_store_load(s, &st))
		_exit(2);
	struct egs_project *ctr = egs_state_project(&st, "counter");
	if (!ctr) {
		ctr = mk_project("counter", 0);
		egs_state_add_project(&st, ctr);
	}
	for (int64_t b = ctr->created_at + 1; b < ctr->created_at + 1000000; b++) {
		char id[48]; /* "crash-<batch>-<i>" stays well under EGS_ID_MAX in practice */
		for (int i = 0; i < CRASH_PER; i++) {
			snprintf(id, sizeof(id), "crash-%lld-%d", (long long)b, i);
			struct egs_gpr *g = mk_gpr(id, EGS_GPR_QUEUED, i, st.next_seq);
			egs_strlist_add(&g->nodes, id);
			egs_state_add_gpr(&st, g);
			egs_state_touch(&st, EGS_KIND_GPR, g);
		}
		snprintf(id, sizeof(id), "crash-%lld-0", (long long)(b - 3));
		struct egs_gpr *old = egs_state_gpr(&st, id);
		if (old)
			egs_state_del(&st, EGS_KIND_GPR, old);
		ctr->created_at = b;
		egs_state_touch(&st, EGS_KIND_PROJECT, ctr);
		egs_state_event(&st, b, "Normal", "Batch", "Project", "counter", "", "batch %lld", (long long)b);
		if (egs_store_commit_changes(s, &st))
			_exit(3);
		egs_state_clear_changes(&st);
		if (write(fd, &b, sizeof(b)) != (ssize_t)sizeof(b))
			_exit(4);
	}
	_exit(0);
}

/* Every batch up to the counter is complete, none after it exists, and the counter is at least the
 * last acknowledged batch. */
static int64_t check_crash_state(const char *path, int64_t acked)
{
	struct egs_state st;
	char id[48];
	reload(path, &st, NULL);
	struct egs_project *ctr = egs_state_project(&st, "counter");
	int64_t c = ctr ? ctr->created_at : 0;
	assert_true(c >= acked);
	assert_true(c <= acked + 1); /* at most the one batch committed but not yet reported */
	size_t expect = 0;
	for (int64_t b = 1; b <= c; b++) {
		for (int i = 0; i < CRASH_PER; i++) {
			snprintf(id, sizeof(id), "crash-%lld-%d", (long long)b, i);
			bool deleted = i == 0 && b + 3 <= c;
			struct egs_gpr *g = egs_state_gpr(&st, id);
			if (deleted) {
				assert_null(g);
				continue;
			}
			assert_non_null(g);
			assert_int_equal(g->nodes.n, 1);
			assert_string_equal(g->nodes.v[0], id);
			expect++;
		}
	}
	assert_int_equal(st.gprs.len, expect); /* nothing of batch c + 1 */
	assert_int_equal(egs_queue_len(&st.queue), expect);
	assert_int_equal(st.next_event_id, c + 1);
	egs_state_cleanup(&st);
	return c;
}

/* Waits up to two minutes (ASan on a loaded machine) for child pid's next acknowledged batch on
 * fd; fails the test, naming how the child ended, when none comes. */
static int64_t first_ack(int fd, pid_t pid)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int64_t b = 0;
	if (poll(&p, 1, 120 * 1000) == 1 && read(fd, &b, sizeof(b)) == (ssize_t)sizeof(b))
		return b;
	int status = 0;
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	fail_msg("the crash test's child acknowledged no batch (%s %d)", WIFSIGNALED(status) ? "signal" : "exit",
		 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	return -1;
}

static void test_crash_kill9(void **unused)
{
	(void)unused;
	struct tmpdb t;
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
	int64_t acked = 0, total = 0;
	tmpdb_make(&t, "egs-test-store");
	printf("store: crash test seed %u\n", seed);
	for (int round = 0; round < CRASH_ROUNDS; round++) {
		int fds[2];
		assert_int_equal(pipe(fds), 0);
		fflush(NULL);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(fds[0]);
			crash_child(t.path, fds[1]);
		}
		close(fds[1]);
		int64_t b;
		ssize_t n;
		/* Every other round (every round on PostgreSQL, whose child spends longer connecting) the
		 * kill waits for one acknowledged batch, so that it lands mid-run: under ASan on a loaded
		 * machine a child may not open, load and commit within the kill window, and six such
		 * rounds left nothing to check (total > 0 failed, saying nothing about atomicity).  The
		 * other rounds kill at any moment, the open, the migrations and the load included. */
		if (pg_url[0] || round % 2) {
			b = first_ack(fds[0], pid);
			assert_int_equal(b, acked + 1);
			acked = b;
		}
		usleep(20000 + (useconds_t)(rand_r(&seed) % 400000));
		assert_int_equal(kill(pid, SIGKILL), 0);
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status)); /* not an early exit with an error code */
		while ((n = read(fds[0], &b, sizeof(b))) == (ssize_t)sizeof(b)) {
			assert_int_equal(b, acked + 1); /* batches are acknowledged in order */
			acked = b;
		}
		assert_int_equal(n, 0);
		close(fds[0]);
		int64_t c = check_crash_state(t.path, acked);
		total = c;
		acked = c; /* the next child continues from what is on disk */
	}
	printf("store: crash test: %d kills, %lld batches survived intact\n", CRASH_ROUNDS, (long long)total);
	assert_true(total > 0);
	tmpdb_cleanup(&t);
}

/* PostgreSQL: the schema version is a row of meta; a newer one is refused before any write. */
static void test_pg_schema_version(void **unused)
{
	(void)unused;
	struct tmpdb t;
	char url[768], sql[160];
	tmpdb_make(&t, "egs-test-store");
	struct egs_store *s = open_store(t.path);
	assert_string_equal(egs_store_kind(s), "postgres");
	egs_store_free(s);
	s = open_store(t.path); /* a second open migrates nothing */
	egs_store_free(s);
	store_url(t.path, url, sizeof(url));
	snprintf(sql, sizeof(sql), "SELECT 1 FROM meta WHERE key = 'schema_version' AND value = '%d'",
		 egs_store_schema_version());
	PGconn *c = PQconnectdb(url);
	PGresult *r = PQexec(c, sql);
	assert_int_equal(PQntuples(r), 1);
	PQclear(r);
	PQfinish(c);
	snprintf(sql, sizeof(sql), "UPDATE meta SET value = '%d' WHERE key = 'schema_version'",
		 egs_store_schema_version() + 1);
	assert_true(pgtest_exec(url, sql));
	s = (struct egs_store *)&t; /* must be reset to NULL */
	assert_int_equal(egs_store_open(url, &s), EGS_ERR_STORE);
	assert_null(s);
	tmpdb_cleanup(&t);
}

/* PostgreSQL: a server restart between two commits costs the handle nothing (it reconnects and
 * sends the turn again), and a turn larger than one pipeline window (1000 GPRs) lands whole. */
static void test_pg_survives_server_restart(void **unused)
{
	(void)unused;
	struct tmpdb t;
	struct egs_state st, b;
	char id[32];
	struct egs_store *s = open_fresh(&t, &st);
	for (int i = 0; i < 1000; i++) {
		snprintf(id, sizeof(id), "gpr-big-%04d", i);
		struct egs_gpr *g = mk_gpr(id, EGS_GPR_QUEUED, 100, (uint64_t)i + 1);
		assert_int_equal(egs_state_add_gpr(&st, g), EGS_OK);
		egs_state_touch(&st, EGS_KIND_GPR, g);
	}
	commit(s, &st);
	assert_true(pgtest_run("restart", pg_test.dir, NULL, 0));
	struct egs_project *p = mk_project("after-restart", 7);
	assert_int_equal(egs_state_add_project(&st, p), EGS_OK);
	egs_state_touch(&st, EGS_KIND_PROJECT, p);
	commit(s, &st);
	egs_store_free(s);
	reload(t.path, &b, NULL);
	assert_int_equal(b.gprs.len, 1000);
	assert_int_equal(egs_queue_len(&b.queue), 1000);
	assert_non_null(egs_state_project(&b, "after-restart"));
	egs_state_cleanup(&b);
	egs_state_cleanup(&st);
	tmpdb_cleanup(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_migrate_empty_file),
		cmocka_unit_test(test_refuse_future_version),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_docs_roundtrip),
		cmocka_unit_test(test_rollback_keeps_previous_state),
		cmocka_unit_test(test_events_retention_and_prune),
		cmocka_unit_test(test_queue_restored),
		cmocka_unit_test(test_corrupt_columns),
		cmocka_unit_test(test_unencodable_list_fails),
		cmocka_unit_test(test_meta),
		cmocka_unit_test(test_commit_timing),
		cmocka_unit_test(test_crash_kill9),
	};
	const struct CMUnitTest pg_tests[] = {
		cmocka_unit_test(test_pg_schema_version),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_rollback_keeps_previous_state),
		cmocka_unit_test(test_events_retention_and_prune),
		cmocka_unit_test(test_queue_restored),
		cmocka_unit_test(test_unencodable_list_fails),
		cmocka_unit_test(test_meta),
		cmocka_unit_test(test_commit_timing),
		cmocka_unit_test(test_crash_kill9),
		cmocka_unit_test(test_pg_survives_server_restart),
	};
	int failed = cmocka_run_group_tests_name("sqlite", tests, NULL, NULL);
	if (!pgtest_start(&pg_test))
		return 1;
	egs_strlcpy(pg_url, pg_test.url, sizeof(pg_url));
	failed += cmocka_run_group_tests_name("postgres", pg_tests, NULL, NULL);
	pgtest_cleanup(&pg_test);
	return failed;
}
