/*
 * store_sqlite.c: the SQLite implementation of store.h (see docs/internals/store.md).
 *
 * One connection, used by one thread at a time (egsd's loop).  The database runs in WAL mode with
 * synchronous=FULL, so COMMIT returns only after the WAL is fsynced: that is what lets egsd answer
 * 2xx right after egs_store_commit_changes().  Each loop turn's changes go in one transaction
 * (group commit), which also means a reader never sees half a turn, even after a kill -9.
 *
 * Every statement of the hot path (upserts, deletes, event inserts, BEGIN/COMMIT) is prepared once
 * at open and reused: per row there is only reset, bind and step.  The column lists below are the
 * single source of the bind order for writes and the column order for loads.
 *
 * Schema changes are append-only migrations: migrations[i] brings PRAGMA user_version from i to
 * i + 1 inside its own transaction.  A database newer than this build is refused.
 */
#include "store/store_impl.h"
#include "store/store_audit.h"
#include "store/store_rows.h"

#include "core/aging.h"
#include "core/share.h"

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- schema ---- */

/* Never edit a shipped entry: add a new one.  Columns here must match the lists in `kinds`. */
static const char *const migrations[] = {
	/* 1: the initial schema */
	"CREATE TABLE meta ("
	"  key TEXT PRIMARY KEY NOT NULL,"
	"  value TEXT NOT NULL);"
	"CREATE TABLE projects ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  created_at INTEGER NOT NULL);"
	"CREATE TABLE clusters ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  api_server TEXT,"
	"  ca_data TEXT,"
	"  agent_key_id TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL);"
	"CREATE TABLE nodes ("
	"  key TEXT PRIMARY KEY NOT NULL CHECK (key <> ''),"
	"  cluster TEXT NOT NULL,"
	"  name TEXT NOT NULL,"
	"  instance_type TEXT NOT NULL,"
	"  gpu_shape TEXT NOT NULL,"
	"  cloud_provider TEXT NOT NULL,"
	"  region TEXT NOT NULL,"
	"  gpu_count INTEGER NOT NULL,"
	"  memory_mib INTEGER NOT NULL,"
	"  temp_threshold REAL NOT NULL,"
	"  power_threshold REAL NOT NULL,"
	"  health TEXT NOT NULL,"
	"  gpr_id TEXT NOT NULL,"
	"  attached_gpr TEXT NOT NULL,"
	"  allocated_at INTEGER NOT NULL,"
	"  gpus TEXT NOT NULL);" /* JSON [{"uuid":..,"index":..}] */
	"CREATE TABLE workspaces ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  description TEXT,"
	"  clusters TEXT NOT NULL,"   /* JSON ["c1",..] */
	"  namespaces TEXT NOT NULL," /* JSON [{"name":..,"clusters":[..]}] */
	"  users TEXT NOT NULL,"      /* JSON [{"username":..,"email":..}] */
	"  created_at INTEGER NOT NULL);"
	"CREATE TABLE gprs ("
	"  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),"
	"  name TEXT NOT NULL,"
	"  workspace TEXT NOT NULL,"
	"  cluster TEXT NOT NULL,"
	"  instance_type TEXT NOT NULL,"
	"  gpu_shape TEXT NOT NULL,"
	"  created_by TEXT NOT NULL,"
	"  gpus_per_node INTEGER NOT NULL,"
	"  node_count INTEGER NOT NULL,"
	"  memory_mib INTEGER NOT NULL,"
	"  exit_duration_s INTEGER NOT NULL,"
	"  idle_timeout_s INTEGER NOT NULL,"
	"  priority INTEGER NOT NULL,"
	"  flags INTEGER NOT NULL,"
	"  preferred_clusters TEXT NOT NULL," /* JSON */
	"  state TEXT NOT NULL,"
	"  failure_reason TEXT,"
	"  pending_reason TEXT,"
	"  created_at INTEGER NOT NULL,"
	"  start_ts INTEGER NOT NULL,"
	"  exit_at INTEGER NOT NULL,"
	"  completion_ts INTEGER NOT NULL,"
	"  retry_count INTEGER NOT NULL,"
	"  delayed_count INTEGER NOT NULL,"
	"  seq INTEGER NOT NULL,"
	"  nodes TEXT NOT NULL," /* JSON ["cluster/name",..] */
	"  marks_sent INTEGER NOT NULL);"
	"CREATE TABLE api_keys ("
	"  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),"
	"  name TEXT NOT NULL,"
	"  user_name TEXT NOT NULL,"
	"  description TEXT,"
	"  role TEXT NOT NULL,"
	"  project TEXT NOT NULL,"
	"  workspace TEXT NOT NULL,"
	"  cluster TEXT NOT NULL,"
	"  hash BLOB NOT NULL CHECK (length(hash) = 32),"
	"  created_at INTEGER NOT NULL,"
	"  expires_at INTEGER NOT NULL);"
	"CREATE UNIQUE INDEX api_keys_hash ON api_keys(hash);"
	"CREATE TABLE events ("
	"  id INTEGER PRIMARY KEY,"
	"  time INTEGER NOT NULL,"
	"  first_time INTEGER NOT NULL,"
	"  count INTEGER NOT NULL,"
	"  type TEXT NOT NULL,"
	"  reason TEXT NOT NULL,"
	"  object_kind TEXT NOT NULL,"
	"  object_name TEXT NOT NULL,"
	"  workspace TEXT NOT NULL,"
	"  message TEXT NOT NULL);"
	"CREATE INDEX events_time ON events(time);",
	/* 2: a Slack-compatible webhook per workspace (observability) */
	"ALTER TABLE workspaces ADD COLUMN webhook_url TEXT;",
	/* 3: the planner: who preempted a GPR, and the fair-share key it was queued with (NULL = none) */
	"ALTER TABLE gprs ADD COLUMN evicted_by TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE gprs ADD COLUMN fair_key REAL;",
	/* 4: a workspace's policy (limits and approvals), canonical JSON written by egsd */
	"ALTER TABLE workspaces ADD COLUMN policy TEXT;",
	/* 5: GPU sharing: a shared GPR's request and shares, JSON {"request": 120, "devices": {"<uuid>": 60}}
	 * (NULL for dedicated GPRs). */
	"ALTER TABLE gprs ADD COLUMN shares TEXT;",
	/* 6: GPR templates and template bindings (struct egs_doc): spec is the canonical JSON egsd wrote */
	"CREATE TABLE gpr_templates ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);"
	"CREATE TABLE gpr_template_bindings ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);",
	/* 7: slice access (struct egs_doc named after its workspace): spec is canonical JSON whose tokens are
	 * sealed with the key in the data directory (src/server/kubecred.c); the store never sees one in clear */
	"CREATE TABLE kube_credentials ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);",
	/* 8: state that must survive a restart (docs/internals/store.md): active alerts (src/server/alerts.c)
	 * and undelivered webhook messages (src/server/outbox.c) as struct egs_doc, and the early release
	 * or cancel the planner holds for a GPR (core/held.h) as JSON {until, ghost, nodes}, NULL when none */
	"CREATE TABLE alerts ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);"
	"CREATE TABLE webhook_outbox ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);"
	"ALTER TABLE gprs ADD COLUMN held TEXT;",
	/* 9: the GPUProvisioningRequest custom resources' GPRs (struct egs_doc named after the CR's uid): spec is
	 * {"gprId", "cluster", "namespace", "name", "generation"} (src/server/api_agent_gpr.c) */
	"CREATE TABLE gpr_links ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);",
	/* 10: a node's zone (topology.kubernetes.io/zone, from the kubernetes agent; '' when unknown) */
	"ALTER TABLE nodes ADD COLUMN zone TEXT NOT NULL DEFAULT '';",
	/* 11: the audit log of the user-facing API's writes (src/server/audit.c); ids are given by egsd */
	"CREATE TABLE audit ("
	"  id INTEGER PRIMARY KEY NOT NULL,"
	"  time INTEGER NOT NULL,"
	"  key_id TEXT NOT NULL,"
	"  key_name TEXT NOT NULL,"
	"  role TEXT NOT NULL,"
	"  method TEXT NOT NULL,"
	"  route TEXT NOT NULL,"
	"  target TEXT NOT NULL,"
	"  status INTEGER NOT NULL,"
	"  error_key TEXT NOT NULL,"
	"  peer TEXT NOT NULL);"
	"CREATE INDEX audit_time ON audit(time);",
	/* 12: inference endpoints (struct egs_doc named by id): spec is the endpoint as
	 * src/server/api_inference.c keeps it (workspace, cluster, namespace, GPR, rendered objects, what the
	 * agent observed) */
	"CREATE TABLE inference_endpoints ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);",
	/* 13: finished GPRs that left memory are read back by these (egs_store_gprs_find); partial, so a
	 * GPR enters them once, when it finishes, and a create pays nothing for them */
	"CREATE INDEX gprs_finished_ws ON gprs(workspace, id) WHERE " EGS_ROWS_FINISHED ";"
	"CREATE INDEX gprs_finished_at ON gprs(completion_ts) WHERE " EGS_ROWS_FINISHED ";",
};

int egs_store_schema_version(void)
{
	return (int)EGS_ARRAY_LEN(migrations);
}

/* ---- binding and reading rows ---- */

/* Binds parameters 1, 2, ... in order and remembers the first failure, so the encoders of
 * store_rows.c read as a plain list of fields. */
struct binder {
	sqlite3_stmt *stmt;
	int i;
	int rc;
	const char *why; /* set for failures that are ours, not SQLite's */
};

static void b_text(void *ctx, const char *s /* borrowed until the step; NULL binds NULL */)
{
	struct binder *b = ctx;
	if (!b->rc)
		b->rc = sqlite3_bind_text(b->stmt, ++b->i, s, -1, SQLITE_STATIC);
}

static void b_int(void *ctx, int64_t v)
{
	struct binder *b = ctx;
	if (!b->rc)
		b->rc = sqlite3_bind_int64(b->stmt, ++b->i, v);
}

static void b_real(void *ctx, double v)
{
	struct binder *b = ctx;
	if (!b->rc)
		b->rc = sqlite3_bind_double(b->stmt, ++b->i, v);
}

static void b_blob(void *ctx, const void *p, int n)
{
	struct binder *b = ctx;
	if (!b->rc)
		b->rc = sqlite3_bind_blob(b->stmt, ++b->i, p, n, SQLITE_STATIC);
}

/* Binds v as compact JSON text (takes ownership of v; NULL means encoding failed already). */
static void b_json(void *ctx, json_t *v)
{
	struct binder *b = ctx;
	char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	if (b->rc) {
		free(s);
		return;
	}
	if (!s) {
		b->rc = SQLITE_ERROR;
		b->why = "a list cannot be encoded as JSON (invalid UTF-8?)";
		return;
	}
	b->rc = sqlite3_bind_text(b->stmt, ++b->i, s, -1, free); /* SQLite frees s */
}

/* The binder store_rows.c encodes through; ctx is a struct binder. */
static struct egs_row_binder row_binder(struct binder *b)
{
	return (struct egs_row_binder){ b, b_text, b_int, b_real, b_blob, b_json };
}

/* Reads columns 0, 1, ... in order; the first failure names its column. */
struct reader {
	sqlite3_stmt *stmt;
	int i;
	const char *bad; /* column name of the first failure, NULL when all is well */
	const char *why;
};

static void r_fail(struct reader *r, int col, const char *why)
{
	if (!r->bad) {
		r->bad = sqlite3_column_name(r->stmt, col);
		r->why = why;
	}
}

static void r_str(struct reader *r, char *dst, size_t n)
{
	int col = r->i++;
	const char *s = (const char *)sqlite3_column_text(r->stmt, col);
	if (!egs_strlcpy(dst, s ? s : "", n))
		r_fail(r, col, "value too long");
}

static char *r_dup(struct reader *r) /* caller frees; NULL for SQL NULL */
{
	return egs_strdup((const char *)sqlite3_column_text(r->stmt, r->i++));
}

static int64_t r_int(struct reader *r)
{
	return sqlite3_column_int64(r->stmt, r->i++);
}

static double r_real(struct reader *r)
{
	return sqlite3_column_double(r->stmt, r->i++);
}

/* Parses a JSON array column; returns it (caller decrefs) or NULL after recording the failure. */
static json_t *r_json_array(struct reader *r)
{
	int col = r->i++;
	const char *s = (const char *)sqlite3_column_text(r->stmt, col);
	json_t *v = s ? json_loadb(s, (size_t)sqlite3_column_bytes(r->stmt, col), 0, NULL) : NULL;
	if (!json_is_array(v)) {
		json_decref(v);
		r_fail(r, col, "not a valid JSON array (truncated?)");
		return NULL;
	}
	return v;
}

static bool strlist_from_json(const json_t *a, struct egs_strlist *l)
{
	size_t i;
	json_t *e;
	if (!json_is_array(a))
		return false;
	json_array_foreach(a, i, e) {
		if (!json_is_string(e))
			return false;
		egs_strlist_add(l, json_string_value(e));
	}
	return true;
}

static void r_strlist(struct reader *r, struct egs_strlist *l)
{
	json_t *a = r_json_array(r);
	if (a && !strlist_from_json(a, l))
		r_fail(r, r->i - 1, "JSON list holds a non-string");
	json_decref(a);
}

/* ---- one entry per object kind ---- */

static void read_project(struct reader *r, void *obj)
{
	struct egs_project *p = obj;
	r_str(r, p->name, sizeof(p->name));
	p->created_at = r_int(r);
}

static void read_cluster(struct reader *r, void *obj)
{
	struct egs_cluster *c = obj;
	r_str(r, c->name, sizeof(c->name));
	r_str(r, c->project, sizeof(c->project));
	c->api_server = r_dup(r);
	c->ca_data = r_dup(r);
	r_str(r, c->agent_key_id, sizeof(c->agent_key_id));
	c->created_at = r_int(r);
}

static void r_gpus(struct reader *r, struct egs_node *n)
{
	int col = r->i;
	json_t *a = r_json_array(r);
	size_t i;
	json_t *e;
	if (!a)
		return;
	if (json_array_size(a) > 0) {
		n->gpus = egs_calloc(json_array_size(a), sizeof(*n->gpus));
		n->n_gpus = (int)json_array_size(a);
	}
	json_array_foreach(a, i, e) {
		const char *uuid;
		int index;
		if (json_unpack(e, "{s:s, s:i}", "uuid", &uuid, "index", &index) ||
		    !egs_strlcpy(n->gpus[i].uuid, uuid, sizeof(n->gpus[i].uuid))) {
			r_fail(r, col, "malformed GPU entry");
			break;
		}
		n->gpus[i].index = index;
	}
	json_decref(a);
}

static void read_node(struct reader *r, void *obj)
{
	struct egs_node *n = obj;
	char health[32], key[EGS_KEY_MAX];
	r_str(r, n->key, sizeof(n->key));
	r_str(r, n->cluster, sizeof(n->cluster));
	r_str(r, n->name, sizeof(n->name));
	r_str(r, n->instance_type, sizeof(n->instance_type));
	r_str(r, n->gpu_shape, sizeof(n->gpu_shape));
	r_str(r, n->cloud_provider, sizeof(n->cloud_provider));
	r_str(r, n->region, sizeof(n->region));
	n->gpu_count = (int)r_int(r);
	n->memory_mib = r_int(r);
	n->temp_threshold = r_real(r);
	n->power_threshold = r_real(r);
	r_str(r, health, sizeof(health));
	if (!egs_health_parse(health, &n->health))
		r_fail(r, r->i - 1, "unknown health");
	r_str(r, n->gpr_id, sizeof(n->gpr_id));
	r_str(r, n->attached_gpr, sizeof(n->attached_gpr));
	n->allocated_at = r_int(r);
	r_gpus(r, n);
	r_str(r, n->zone, sizeof(n->zone));
	/* The state keys nodes by cluster/name; a key that disagrees would make two rows one node. */
	snprintf(key, sizeof(key), "%s/%s", n->cluster, n->name);
	if (strcmp(key, n->key) != 0)
		r_fail(r, 0, "key is not cluster/name");
}

static void r_namespaces(struct reader *r, struct egs_workspace *w)
{
	int col = r->i;
	json_t *a = r_json_array(r);
	size_t i;
	json_t *e;
	if (!a)
		return;
	if (json_array_size(a) > 0) {
		w->namespaces = egs_calloc(json_array_size(a), sizeof(*w->namespaces));
		w->n_namespaces = json_array_size(a);
	}
	json_array_foreach(a, i, e) {
		const char *name;
		json_t *clusters;
		if (json_unpack(e, "{s:s, s:o}", "name", &name, "clusters", &clusters) ||
		    !egs_strlcpy(w->namespaces[i].name, name, sizeof(w->namespaces[i].name)) ||
		    !strlist_from_json(clusters, &w->namespaces[i].clusters)) {
			r_fail(r, col, "malformed namespace entry");
			break;
		}
	}
	json_decref(a);
}

static void r_users(struct reader *r, struct egs_workspace *w)
{
	int col = r->i;
	json_t *a = r_json_array(r);
	size_t i;
	json_t *e;
	if (!a)
		return;
	if (json_array_size(a) > 0) {
		w->users = egs_calloc(json_array_size(a), sizeof(*w->users));
		w->n_users = json_array_size(a);
	}
	json_array_foreach(a, i, e) {
		const char *user, *email;
		if (json_unpack(e, "{s:s, s:s}", "username", &user, "email", &email) ||
		    !egs_strlcpy(w->users[i].username, user, sizeof(w->users[i].username)) ||
		    !egs_strlcpy(w->users[i].email, email, sizeof(w->users[i].email))) {
			r_fail(r, col, "malformed user entry");
			break;
		}
	}
	json_decref(a);
}

static void read_workspace(struct reader *r, void *obj)
{
	struct egs_workspace *w = obj;
	r_str(r, w->name, sizeof(w->name));
	r_str(r, w->project, sizeof(w->project));
	w->description = r_dup(r);
	r_strlist(r, &w->clusters);
	r_namespaces(r, w);
	r_users(r, w);
	w->created_at = r_int(r);
	w->webhook_url = r_dup(r);
	w->policy_json = r_dup(r); /* parsed by the server at start (api_policy.c) */
}

static void r_shares(struct reader *r, struct egs_gpr *g)
{
	int col = r->i++;
	const char *s = (const char *)sqlite3_column_text(r->stmt, col);
	if (!s)
		return;
	json_t *v = json_loadb(s, (size_t)sqlite3_column_bytes(r->stmt, col), 0, NULL), *devices, *c;
	json_int_t request = 0;
	const char *uuid;
	if (json_unpack(v, "{s:I, s:o}", "request", &request, "devices", &devices) || request < 1 ||
	    request > EGS_SHARE_DEV_MAX * EGS_SHARE_WHOLE || !json_is_object(devices) ||
	    json_object_size(devices) > EGS_SHARE_DEV_MAX) {
		r_fail(r, col, "not a JSON object {request, devices}");
		goto out;
	}
	g->share_centi = (int)request;
	g->shares = egs_calloc(json_object_size(devices) + 1, sizeof(*g->shares));
	json_object_foreach(devices, uuid, c) {
		struct egs_gpu_share *sh = &g->shares[g->n_shares++];
		if (!json_is_integer(c) || json_integer_value(c) < 1 || json_integer_value(c) > EGS_SHARE_WHOLE ||
		    !egs_strlcpy(sh->uuid, uuid, sizeof(sh->uuid))) {
			r_fail(r, col, "a device share is not 1..100 hundredths of a GPU");
			break;
		}
		sh->centi = (int)json_integer_value(c);
	}
out:
	json_decref(v);
}

static void read_gpr(struct reader *r, void *obj)
{
	struct egs_gpr *g = obj;
	char state[32];
	r_str(r, g->id, sizeof(g->id));
	r_str(r, g->name, sizeof(g->name));
	r_str(r, g->workspace, sizeof(g->workspace));
	r_str(r, g->cluster, sizeof(g->cluster));
	r_str(r, g->instance_type, sizeof(g->instance_type));
	r_str(r, g->gpu_shape, sizeof(g->gpu_shape));
	r_str(r, g->created_by, sizeof(g->created_by));
	g->gpus_per_node = (int)r_int(r);
	g->node_count = (int)r_int(r);
	g->memory_mib = r_int(r);
	g->exit_duration_s = r_int(r);
	g->idle_timeout_s = r_int(r);
	g->priority = (int)r_int(r);
	g->flags = (uint32_t)r_int(r);
	r_strlist(r, &g->preferred_clusters);
	r_str(r, state, sizeof(state));
	if (!egs_gpr_state_parse(state, &g->state))
		r_fail(r, r->i - 1, "unknown state");
	g->failure_reason = r_dup(r);
	g->pending_reason = r_dup(r);
	g->created_at = r_int(r);
	g->start_ts = r_int(r);
	g->exit_at = r_int(r);
	g->completion_ts = r_int(r);
	g->retry_count = (int)r_int(r);
	g->delayed_count = (int)r_int(r);
	g->seq = (uint64_t)r_int(r);
	r_strlist(r, &g->nodes);
	g->marks_sent = (unsigned)r_int(r);
	r_str(r, g->evicted_by, sizeof(g->evicted_by));
	g->fair = sqlite3_column_type(r->stmt, r->i) == SQLITE_NULL ? -INFINITY : sqlite3_column_double(r->stmt, r->i);
	r->i++;
	r_shares(r, g);
	char *held = r_dup(r);
	if (held && !egs_rows_parse_held(held, g))
		r_fail(r, r->i - 1, "not a JSON object {until, ghost, nodes}");
	free(held);
}

static void read_apikey(struct reader *r, void *obj)
{
	struct egs_apikey *k = obj;
	char role[32];
	r_str(r, k->id, sizeof(k->id));
	r_str(r, k->name, sizeof(k->name));
	r_str(r, k->user_name, sizeof(k->user_name));
	k->description = r_dup(r);
	r_str(r, role, sizeof(role));
	if (!egs_role_parse(role, &k->role))
		r_fail(r, r->i - 1, "unknown role");
	r_str(r, k->project, sizeof(k->project));
	r_str(r, k->workspace, sizeof(k->workspace));
	r_str(r, k->cluster, sizeof(k->cluster));
	int col = r->i++;
	const void *hash = sqlite3_column_blob(r->stmt, col);
	if (hash && sqlite3_column_bytes(r->stmt, col) == (int)sizeof(k->hash))
		memcpy(k->hash, hash, sizeof(k->hash));
	else
		r_fail(r, col, "hash is not 32 bytes");
	k->created_at = r_int(r);
	k->expires_at = r_int(r);
}

static void read_doc(struct reader *r, void *obj)
{
	struct egs_doc *d = obj;
	r_str(r, d->name, sizeof(d->name));
	r_str(r, d->project, sizeof(d->project));
	d->spec = r_dup(r);
	if (!d->spec)
		r_fail(r, r->i - 1, "spec is NULL");
	d->created_at = r_int(r);
	d->updated_at = r_int(r);
}

static void read_event(struct reader *r, struct egs_event *ev)
{
	ev->id = r_int(r);
	ev->time = r_int(r);
	ev->first_time = r_int(r);
	ev->count = (int)r_int(r);
	r_str(r, ev->type, sizeof(ev->type));
	r_str(r, ev->reason, sizeof(ev->reason));
	r_str(r, ev->object_kind, sizeof(ev->object_kind));
	r_str(r, ev->object_name, sizeof(ev->object_name));
	r_str(r, ev->workspace, sizeof(ev->workspace));
	ev->message = r_dup(r);
	if (!ev->message)
		ev->message = egs_strdup("");
}

#define EVENT_COLS "id,time,first_time,count,type,reason,object_kind,object_name,workspace,message"

/* Thin wrappers so one table of function pointers covers every kind without casts. */
static void *alloc_project(void) { return egs_calloc(1, sizeof(struct egs_project)); }
static void *alloc_cluster(void) { return egs_calloc(1, sizeof(struct egs_cluster)); }
static void *alloc_node(void) { return egs_calloc(1, sizeof(struct egs_node)); }
static void *alloc_workspace(void) { return egs_calloc(1, sizeof(struct egs_workspace)); }
static void *alloc_gpr(void) { return egs_gpr_new(); }
static void *alloc_apikey(void) { return egs_calloc(1, sizeof(struct egs_apikey)); }
static void *alloc_template(void) { return egs_calloc(1, sizeof(struct egs_doc)); }
#define alloc_binding alloc_template
#define alloc_kubecred alloc_template
#define alloc_alert alloc_template
#define alloc_outbox alloc_template
#define alloc_gprlink alloc_template
#define alloc_endpoint alloc_template
static void free_project(void *o) { egs_project_free(o); }
static void free_cluster(void *o) { egs_cluster_free(o); }
static void free_node(void *o) { egs_node_free(o); }
static void free_workspace(void *o) { egs_workspace_free(o); }
static void free_gpr(void *o) { egs_gpr_free(o); }
static void free_apikey(void *o) { egs_apikey_free(o); }
static void free_template(void *o) { egs_doc_free(o); }
#define free_binding free_template
#define free_kubecred free_template
#define free_alert free_template
#define free_outbox free_template
#define free_gprlink free_template
#define free_endpoint free_template
static enum egs_err add_project(struct egs_state *st, void *o) { return egs_state_add_project(st, o); }
static enum egs_err add_cluster(struct egs_state *st, void *o) { return egs_state_add_cluster(st, o); }
static enum egs_err add_node(struct egs_state *st, void *o) { return egs_state_add_node(st, o); }
static enum egs_err add_workspace(struct egs_state *st, void *o) { return egs_state_add_workspace(st, o); }
static enum egs_err add_gpr(struct egs_state *st, void *o) { return egs_aging_load_gpr(st, o); }
static enum egs_err add_apikey(struct egs_state *st, void *o) { return egs_state_add_apikey(st, o); }
static enum egs_err add_template(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_TEMPLATE, o); }
static enum egs_err add_binding(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_BINDING, o); }
static enum egs_err add_kubecred(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_KUBECRED, o); }
static enum egs_err add_alert(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_ALERT, o); }
static enum egs_err add_outbox(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_OUTBOX, o); }
static enum egs_err add_gprlink(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_GPRLINK, o); }
static enum egs_err add_endpoint(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_ENDPOINT, o); }
static const char *key_project(const void *o) { return ((const struct egs_project *)o)->name; }
static const char *key_cluster(const void *o) { return ((const struct egs_cluster *)o)->name; }
static const char *key_node(const void *o) { return ((const struct egs_node *)o)->key; }
static const char *key_workspace(const void *o) { return ((const struct egs_workspace *)o)->name; }
static const char *key_gpr(const void *o) { return ((const struct egs_gpr *)o)->id; }
static const char *key_apikey(const void *o) { return ((const struct egs_apikey *)o)->id; }
static const char *key_template(const void *o) { return ((const struct egs_doc *)o)->name; }
#define key_binding key_template
#define key_kubecred key_template
#define key_alert key_template
#define key_outbox key_template
#define egs_rows_bind_template egs_rows_bind_doc
#define egs_rows_bind_binding egs_rows_bind_doc
#define egs_rows_bind_kubecred egs_rows_bind_doc
#define egs_rows_bind_alert egs_rows_bind_doc
#define egs_rows_bind_outbox egs_rows_bind_doc
#define read_template read_doc
#define read_binding read_doc
#define read_kubecred read_doc
#define read_alert read_doc
#define read_outbox read_doc
#define key_gprlink key_template
#define egs_rows_bind_gprlink egs_rows_bind_doc
#define read_gprlink read_doc
#define key_endpoint key_template
#define egs_rows_bind_endpoint egs_rows_bind_doc
#define read_endpoint read_doc

struct kind_ops {
	const char *table;
	const char *cols;  /* the first column is the primary key */
	const char *order; /* load order */
	void *(*alloc)(void);
	void (*free)(void *obj);
	void (*bind)(const struct egs_row_binder *b, const void *obj); /* store_rows.c */
	void (*read)(struct reader *r, void *obj);
	enum egs_err (*add)(struct egs_state *st, void *obj); /* takes ownership on success */
	const char *(*key)(const void *obj);
};

#define KIND(k, tbl, cols, order, x)                                                              \
	[k] = { tbl, cols, order, alloc_##x, free_##x, egs_rows_bind_##x, read_##x, add_##x, key_##x }

/* Loaded in this order: GPRs by seq so that st->active is in enqueue order too. */
static const struct kind_ops kinds[] = {
	KIND(EGS_KIND_PROJECT, "projects", "name,created_at", "name", project),
	KIND(EGS_KIND_CLUSTER, "clusters", "name,project,api_server,ca_data,agent_key_id,created_at",
	     "name", cluster),
	KIND(EGS_KIND_NODE, "nodes",
	     "key,cluster,name,instance_type,gpu_shape,cloud_provider,region,gpu_count,memory_mib,"
	     "temp_threshold,power_threshold,health,gpr_id,attached_gpr,allocated_at,gpus,zone",
	     "key", node),
	KIND(EGS_KIND_WORKSPACE, "workspaces",
	     "name,project,description,clusters,namespaces,users,created_at,webhook_url,policy", "name",
	     workspace),
	KIND(EGS_KIND_GPR, "gprs",
	     "id,name,workspace,cluster,instance_type,gpu_shape,created_by,gpus_per_node,node_count,"
	     "memory_mib,exit_duration_s,idle_timeout_s,priority,flags,preferred_clusters,state,"
	     "failure_reason,pending_reason,created_at,start_ts,exit_at,completion_ts,retry_count,"
	     "delayed_count,seq,nodes,marks_sent,evicted_by,fair_key,shares,held",
	     "seq, id", gpr),
	KIND(EGS_KIND_APIKEY, "api_keys",
	     "id,name,user_name,description,role,project,workspace,cluster,hash,created_at,expires_at",
	     "id", apikey),
	KIND(EGS_KIND_TEMPLATE, "gpr_templates", "name,project,spec,created_at,updated_at", "name", template),
	KIND(EGS_KIND_BINDING, "gpr_template_bindings", "name,project,spec,created_at,updated_at", "name", binding),
	KIND(EGS_KIND_KUBECRED, "kube_credentials", "name,project,spec,created_at,updated_at", "name", kubecred),
	KIND(EGS_KIND_ALERT, "alerts", "name,project,spec,created_at,updated_at", "name", alert),
	KIND(EGS_KIND_OUTBOX, "webhook_outbox", "name,project,spec,created_at,updated_at", "created_at, name", outbox),
	KIND(EGS_KIND_GPRLINK, "gpr_links", "name,project,spec,created_at,updated_at", "name", gprlink),
	KIND(EGS_KIND_ENDPOINT, "inference_endpoints", "name,project,spec,created_at,updated_at", "name", endpoint),
};
#define NKINDS ((int)EGS_ARRAY_LEN(kinds))

/* ---- the store ---- */

struct sqlite_store {
	struct egs_store base; /* first: the handle store.c dispatches through */
	sqlite3 *db;
	sqlite3_stmt *put[EGS_ARRAY_LEN(kinds)];
	sqlite3_stmt *del[EGS_ARRAY_LEN(kinds)];
	sqlite3_stmt *put_event, *put_audit;
	sqlite3_stmt *begin, *commit, *rollback;
	sqlite3_stmt *meta_get, *meta_set, *prune_mark, *prune;
	int last_rc;     /* the result code of the last failed step: SQLITE_FULL tells a full disk */
	char *fail_path; /* EGS_STORE_FAIL_IF_EXISTS: a commit fails as on a full disk while this file exists */
};

static const struct egs_store_ops sqlite_ops;
static void sqlite_free(struct sqlite_store *s);

/* The largest event id ever pruned, kept in meta so that ids are never reused even when pruning
 * empties the events table. */
#define META_EVENT_FLOOR "store.event_id_floor"

/* Steps a statement that returns no rows and resets it.  On failure prints
 * "store: <what> [<table> '<key>']: <sqlite error>" and returns false. */
static bool step_done(struct sqlite_store *s, sqlite3_stmt *stmt, const char *what, const char *table,
		      const char *key)
{
	int rc = sqlite3_step(stmt);
	if (rc != SQLITE_DONE)
		s->last_rc = rc;
	if (rc != SQLITE_DONE && table)
		fprintf(stderr, "store: %s %s '%s': %s\n", what, table, key, sqlite3_errmsg(s->db));
	else if (rc != SQLITE_DONE)
		fprintf(stderr, "store: %s: %s\n", what, sqlite3_errmsg(s->db));
	sqlite3_reset(stmt);
	return rc == SQLITE_DONE;
}

static bool exec(struct sqlite_store *s, const char *sql)
{
	char *msg = NULL;
	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) == SQLITE_OK)
		return true;
	fprintf(stderr, "store: %.60s: %s\n", sql, msg ? msg : sqlite3_errmsg(s->db));
	sqlite3_free(msg);
	return false;
}

/* Runs a one-row, one-column query (a PRAGMA) and copies the text of the value into buf. */
static bool query_text(struct sqlite_store *s, const char *sql, char *buf, size_t n)
{
	sqlite3_stmt *stmt = NULL;
	bool ok = false;
	if (sqlite3_prepare_v2(s->db, sql, -1, &stmt, NULL) != SQLITE_OK)
		goto out;
	if (sqlite3_step(stmt) != SQLITE_ROW)
		goto out;
	const char *v = (const char *)sqlite3_column_text(stmt, 0);
	egs_strlcpy(buf, v ? v : "", n);
	ok = true;
out:
	if (!ok)
		fprintf(stderr, "store: %s: %s\n", sql, sqlite3_errmsg(s->db));
	sqlite3_finalize(stmt);
	return ok;
}

static bool user_version(struct sqlite_store *s, int *out)
{
	char buf[32];
	if (!query_text(s, "PRAGMA user_version", buf, sizeof(buf)))
		return false;
	*out = (int)strtol(buf, NULL, 10);
	return true;
}

static bool version_known(int v)
{
	if (v >= 0 && v <= egs_store_schema_version())
		return true;
	fprintf(stderr,
		"store: the database has schema version %d but this build knows only up to %d; "
		"refusing to open it (run a newer egsd)\n",
		v, egs_store_schema_version());
	return false;
}

/* Applies the missing migrations one transaction each.  The version is re-read under the write
 * lock, so two processes opening a new file at once do not both run migration 1. */
static enum egs_err migrate(struct sqlite_store *s)
{
	for (;;) {
		int v;
		char sql[64];
		if (!exec(s, "BEGIN IMMEDIATE"))
			return EGS_ERR_STORE;
		if (!user_version(s, &v) || !version_known(v))
			goto fail;
		if (v == egs_store_schema_version())
			return exec(s, "COMMIT") ? EGS_OK : EGS_ERR_STORE;
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v + 1);
		if (!exec(s, migrations[v]) || !exec(s, sql) || !exec(s, "COMMIT")) {
			fprintf(stderr, "store: migration to schema version %d failed\n", v + 1);
			goto fail;
		}
	}
fail:
	if (!sqlite3_get_autocommit(s->db))
		exec(s, "ROLLBACK");
	return EGS_ERR_STORE;
}

/* INSERT INTO t(c1,..) VALUES(?1,..) ON CONFLICT(c1) DO UPDATE SET c2=excluded.c2, .. */
static void upsert_sql(struct egs_sqlbuf *q, const struct kind_ops *k)
{
	size_t keylen = strcspn(k->cols, ",");
	int ncols = 1;
	for (const char *p = k->cols; *p; p++)
		ncols += *p == ',';
	q->n = 0;
	egs_sql_str(q, "INSERT INTO ");
	egs_sql_str(q, k->table);
	egs_sql_str(q, "(");
	egs_sql_str(q, k->cols);
	egs_sql_str(q, ") VALUES(");
	for (int i = 0; i < ncols; i++)
		egs_sql_str(q, i ? ",?" : "?");
	egs_sql_str(q, ") ON CONFLICT(");
	egs_sql_add(q, k->cols, keylen);
	egs_sql_str(q, ") DO UPDATE SET ");
	for (const char *p = k->cols + keylen; *p;) {
		p++; /* the comma */
		size_t len = strcspn(p, ",");
		if (p != k->cols + keylen + 1)
			egs_sql_str(q, ",");
		egs_sql_add(q, p, len);
		egs_sql_str(q, "=excluded.");
		egs_sql_add(q, p, len);
		p += len;
	}
}

static bool prepare(struct sqlite_store *s, const char *sql, sqlite3_stmt **out)
{
	if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, out, NULL) == SQLITE_OK)
		return true;
	fprintf(stderr, "store: preparing %.80s: %s\n", sql, sqlite3_errmsg(s->db));
	return false;
}

static bool prepare_all(struct sqlite_store *s)
{
	struct egs_sqlbuf q;
	for (int i = 0; i < NKINDS; i++) {
		const struct kind_ops *k = &kinds[i];
		upsert_sql(&q, k);
		if (!prepare(s, q.b, &s->put[i]))
			return false;
		q.n = 0;
		egs_sql_str(&q, "DELETE FROM ");
		egs_sql_str(&q, k->table);
		egs_sql_str(&q, " WHERE ");
		egs_sql_add(&q, k->cols, strcspn(k->cols, ","));
		egs_sql_str(&q, " = ?1");
		if (!prepare(s, q.b, &s->del[i]))
			return false;
	}
	return prepare(s, "INSERT OR REPLACE INTO events(" EVENT_COLS ") VALUES(?,?,?,?,?,?,?,?,?,?)",
		       &s->put_event) &&
	       prepare(s, "INSERT INTO audit(" EGS_AUDIT_COLS ") VALUES(?,?,?,?,?,?,?,?,?,?,?)", &s->put_audit) &&
	       prepare(s, "BEGIN IMMEDIATE", &s->begin) && prepare(s, "COMMIT", &s->commit) &&
	       prepare(s, "ROLLBACK", &s->rollback) &&
	       prepare(s, "SELECT value FROM meta WHERE key = ?1", &s->meta_get) &&
	       prepare(s,
		       "INSERT INTO meta(key, value) VALUES(?1, ?2) "
		       "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
		       &s->meta_set) &&
	       prepare(s,
		       "INSERT INTO meta(key, value) SELECT '" META_EVENT_FLOOR "', m FROM "
		       "(SELECT MAX(id) AS m FROM events WHERE time < ?1 OR id < ?2) WHERE m IS NOT NULL "
		       "ON CONFLICT(key) DO UPDATE SET "
		       "value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
		       &s->prune_mark) &&
	       prepare(s, "DELETE FROM events WHERE time < ?1 OR id < ?2", &s->prune);
}

enum egs_err egs_store_open_sqlite(const char *path, struct egs_store **out)
{
	struct sqlite_store *s = egs_calloc(1, sizeof(*s));
	enum egs_err err = EGS_ERR_STORE;
	char mode[16];
	int v;
	*out = NULL;
	s->base.ops = &sqlite_ops;
	int rc = sqlite3_open_v2(path, &s->db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		fprintf(stderr, "store: cannot open %s: %s\n", path,
			s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		goto out;
	}
	sqlite3_busy_timeout(s->db, 5000);
	/* Refuse a future schema before touching the file at all. */
	if (!user_version(s, &v) || !version_known(v))
		goto out;
	if (!query_text(s, "PRAGMA journal_mode = WAL", mode, sizeof(mode)))
		goto out;
	if (strcmp(mode, "wal") != 0) {
		fprintf(stderr, "store: %s: cannot switch to WAL mode (got %s)\n", path, mode);
		goto out;
	}
	if (!exec(s, "PRAGMA synchronous = FULL"))
		goto out;
	err = migrate(s);
	if (err)
		goto out;
	err = prepare_all(s) ? EGS_OK : EGS_ERR_STORE;
	const char *fail = getenv("EGS_STORE_FAIL_IF_EXISTS");
	s->fail_path = fail && *fail ? egs_strdup(fail) : NULL;
out:
	if (err) {
		fprintf(stderr, "store: cannot use database %s\n", path);
		sqlite_free(s);
		return err;
	}
	*out = &s->base;
	return EGS_OK;
}

static void sqlite_free(struct sqlite_store *s)
{
	if (!s)
		return;
	if (s->db && !sqlite3_get_autocommit(s->db))
		exec(s, "ROLLBACK");
	for (int i = 0; i < NKINDS; i++) {
		sqlite3_finalize(s->put[i]);
		sqlite3_finalize(s->del[i]);
	}
	sqlite3_finalize(s->put_event);
	sqlite3_finalize(s->put_audit);
	sqlite3_finalize(s->begin);
	sqlite3_finalize(s->commit);
	sqlite3_finalize(s->rollback);
	sqlite3_finalize(s->meta_get);
	sqlite3_finalize(s->meta_set);
	sqlite3_finalize(s->prune_mark);
	sqlite3_finalize(s->prune);
	if (sqlite3_close(s->db) != SQLITE_OK)
		fprintf(stderr, "store: close: %s\n", sqlite3_errmsg(s->db));
	free(s->fail_path);
	free(s);
}

/* ---- load ---- */

static enum egs_err load_kind(struct sqlite_store *s, struct egs_state *st, const struct kind_ops *k)
{
	sqlite3_stmt *stmt = NULL;
	enum egs_err err = EGS_ERR_STORE;
	char sql[1024], where[320] = "";
	int rc;
	if (k == &kinds[EGS_KIND_GPR]) /* finished GPRs older than the retention: load_aged */
		egs_rows_load_where(st, where, sizeof(where));
	snprintf(sql, sizeof(sql), "SELECT %s FROM %s%s ORDER BY %s", k->cols, k->table, where, k->order);
	if (!prepare(s, sql, &stmt))
		goto out;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		const char *key = (const char *)sqlite3_column_text(stmt, 0);
		struct reader r = { .stmt = stmt };
		void *obj = k->alloc();
		k->read(&r, obj);
		if (r.bad) {
			fprintf(stderr, "store: %s row '%s': column %s: %s\n", k->table, key ? key : "",
				r.bad, r.why);
			k->free(obj);
			goto out;
		}
		if (k->add(st, obj) != EGS_OK) {
			fprintf(stderr, "store: %s row '%s': duplicate object\n", k->table, key ? key : "");
			k->free(obj);
			goto out;
		}
	}
	if (rc != SQLITE_DONE) {
		fprintf(stderr, "store: reading %s: %s\n", k->table, sqlite3_errmsg(s->db));
		goto out;
	}
	err = EGS_OK;
out:
	sqlite3_finalize(stmt);
	return err;
}

/* Counts the finished GPRs a load leaves in the store (core/aging.h), from the few columns that
 * need, without parsing their rows. */
static enum egs_err load_aged(struct sqlite_store *s, struct egs_state *st)
{
	sqlite3_stmt *stmt = NULL;
	char sql[512];
	const char *v[EGS_ROWS_AGED_COLS];
	int rc = SQLITE_DONE;
	egs_rows_aged_sql(st, sql, sizeof(sql));
	if (!prepare(s, sql, &stmt))
		return EGS_ERR_STORE;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		for (int i = 0; i < EGS_ROWS_AGED_COLS; i++)
			v[i] = (const char *)sqlite3_column_text(stmt, i);
		if (!egs_rows_count_aged(st, v)) {
			fprintf(stderr, "store: gprs: a finished row (seq %s) is not what egsd writes\n", v[2] ? v[2] : "");
			rc = SQLITE_ERROR;
			break;
		}
	}
	if (rc != SQLITE_DONE && rc != SQLITE_ERROR)
		fprintf(stderr, "store: reading gprs: %s\n", sqlite3_errmsg(s->db));
	sqlite3_finalize(stmt);
	return rc == SQLITE_DONE ? EGS_OK : EGS_ERR_STORE;
}

/* Loads the newest cfg.event_retention events, oldest first, so the ring ends up in time order. */
static enum egs_err load_events(struct sqlite_store *s, struct egs_state *st)
{
	sqlite3_stmt *stmt = NULL;
	enum egs_err err = EGS_ERR_STORE;
	int rc;
	if (!prepare(s, "SELECT * FROM (SELECT " EVENT_COLS " FROM events ORDER BY id DESC LIMIT ?1) ORDER BY id",
		     &stmt))
		goto out;
	sqlite3_bind_int64(stmt, 1, (int64_t)st->cfg.event_retention);
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		struct reader r = { .stmt = stmt };
		struct egs_event *ev = egs_calloc(1, sizeof(*ev));
		read_event(&r, ev);
		if (r.bad) {
			fprintf(stderr, "store: events row %lld: column %s: %s\n", (long long)ev->id, r.bad, r.why);
			egs_event_free(ev);
			goto out;
		}
		egs_state_add_event(st, ev);
	}
	if (rc != SQLITE_DONE) {
		fprintf(stderr, "store: reading events: %s\n", sqlite3_errmsg(s->db));
		goto out;
	}
	sqlite3_finalize(stmt);
	stmt = NULL;
	/* Past every id ever stored, not just the loaded ones (and not just the unpruned ones), so ids
	 * are never reused. */
	if (!prepare(s,
		     "SELECT MAX((SELECT COALESCE(MAX(id), 0) FROM events),"
		     " (SELECT COALESCE(MAX(CAST(value AS INTEGER)), 0) FROM meta WHERE key = '" META_EVENT_FLOOR "'))",
		     &stmt) ||
	    sqlite3_step(stmt) != SQLITE_ROW) {
		fprintf(stderr, "store: reading the largest event id: %s\n", sqlite3_errmsg(s->db));
		goto out;
	}
	if (sqlite3_column_int64(stmt, 0) >= st->next_event_id)
		st->next_event_id = sqlite3_column_int64(stmt, 0) + 1;
	err = EGS_OK;
out:
	sqlite3_finalize(stmt);
	return err;
}

static enum egs_err sqlite_load(struct sqlite_store *s, struct egs_state *st)
{
	enum egs_err err = EGS_ERR_STORE;
	/* One read transaction: every table from the same committed snapshot. */
	if (!exec(s, "BEGIN"))
		return EGS_ERR_STORE;
	for (int i = 0; i < NKINDS; i++) {
		err = load_kind(s, st, &kinds[i]);
		if (!err && i == EGS_KIND_GPR && st->aged_before)
			err = load_aged(s, st);
		if (err)
			goto out;
	}
	err = load_events(s, st);
out:
	if (!exec(s, err ? "ROLLBACK" : "COMMIT"))
		err = EGS_ERR_STORE;
	return err;
}

/* ---- commit ---- */

static bool write_change(struct sqlite_store *s, const struct egs_change *c)
{
	EGS_ASSERT((int)c->kind >= 0 && (int)c->kind < NKINDS);
	const struct kind_ops *k = &kinds[c->kind];
	const char *key = k->key(c->obj);
	if (c->deleted) {
		sqlite3_stmt *del = s->del[c->kind];
		if (sqlite3_bind_text(del, 1, key, -1, SQLITE_STATIC) != SQLITE_OK) {
			fprintf(stderr, "store: delete %s '%s': %s\n", k->table, key, sqlite3_errmsg(s->db));
			return false;
		}
		return step_done(s, del, "delete", k->table, key);
	}
	struct binder b = { .stmt = s->put[c->kind] };
	struct egs_row_binder rb = row_binder(&b);
	k->bind(&rb, c->obj);
	if (b.rc) {
		fprintf(stderr, "store: put %s '%s': %s\n", k->table, key, b.why ? b.why : sqlite3_errstr(b.rc));
		return false;
	}
	return step_done(s, b.stmt, "put", k->table, key);
}

static bool write_event(struct sqlite_store *s, const struct egs_event *ev)
{
	struct binder b = { .stmt = s->put_event };
	struct egs_row_binder rb = row_binder(&b);
	char id[24];
	egs_rows_bind_event(&rb, ev);
	snprintf(id, sizeof(id), "%lld", (long long)ev->id);
	if (b.rc) {
		fprintf(stderr, "store: put event %s: %s\n", id, sqlite3_errstr(b.rc));
		return false;
	}
	return step_done(s, b.stmt, "put", "events", id);
}

static bool write_audit(struct sqlite_store *s, const struct egs_audit *a)
{
	struct binder b = { .stmt = s->put_audit };
	struct egs_row_binder rb = row_binder(&b);
	char id[24];
	egs_rows_bind_audit(&rb, a);
	snprintf(id, sizeof(id), "%lld", (long long)a->id);
	if (b.rc) {
		fprintf(stderr, "store: put audit %s: %s\n", id, sqlite3_errstr(b.rc));
		return false;
	}
	return step_done(s, b.stmt, "put", "audit", id);
}

/* The failure injection of the tests (docs/internals/store.md): true while the file named by
 * EGS_STORE_FAIL_IF_EXISTS exists. */
static bool injected_failure(struct sqlite_store *s)
{
	if (!s->fail_path || access(s->fail_path, F_OK) != 0)
		return false;
	s->last_rc = SQLITE_FULL;
	return true;
}

static enum egs_err sqlite_commit_changes(struct sqlite_store *s, struct egs_state *st)
{
	if (!egs_state_has_changes(st))
		return EGS_OK;
	s->last_rc = SQLITE_OK;
	if (!step_done(s, s->begin, "BEGIN", NULL, NULL))
		goto fail;
	for (size_t i = 0; i < st->changes.len; i++)
		if (!write_change(s, st->changes.items[i]))
			goto fail;
	for (size_t i = 0; i < st->new_events.len; i++)
		if (!write_event(s, st->new_events.items[i]))
			goto fail;
	for (size_t i = 0; i < st->new_audit.len; i++)
		if (!write_audit(s, st->new_audit.items[i]))
			goto fail;
	if (injected_failure(s) || !step_done(s, s->commit, "COMMIT", NULL, NULL))
		goto fail;
	return EGS_OK;
fail:;
	int why = s->last_rc & 0xff;
	/* SQLite may have rolled back already (e.g. after an I/O error); otherwise do it here. */
	if (!sqlite3_get_autocommit(s->db))
		step_done(s, s->rollback, "ROLLBACK", NULL, NULL);
	return why == SQLITE_FULL ? EGS_ERR_STORAGE_FULL : EGS_ERR_STORE;
}

/* ---- meta and events ---- */

static enum egs_err sqlite_meta_get(struct sqlite_store *s, const char *key, char **value)
{
	enum egs_err err = EGS_ERR_STORE;
	*value = NULL;
	if (sqlite3_bind_text(s->meta_get, 1, key, -1, SQLITE_STATIC) != SQLITE_OK)
		goto out;
	int rc = sqlite3_step(s->meta_get);
	if (rc == SQLITE_ROW)
		*value = egs_strdup((const char *)sqlite3_column_text(s->meta_get, 0));
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		err = EGS_OK;
out:
	if (err)
		fprintf(stderr, "store: meta get %s: %s\n", key, sqlite3_errmsg(s->db));
	sqlite3_reset(s->meta_get);
	return err;
}

static enum egs_err sqlite_meta_set(struct sqlite_store *s, const char *key, const char *value)
{
	/* Outside BEGIN..COMMIT a single statement is its own (durable) transaction. */
	if (sqlite3_bind_text(s->meta_set, 1, key, -1, SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_text(s->meta_set, 2, value, -1, SQLITE_STATIC) != SQLITE_OK) {
		fprintf(stderr, "store: meta set %s: %s\n", key, sqlite3_errmsg(s->db));
		return EGS_ERR_STORE;
	}
	return step_done(s, s->meta_set, "set", "meta", key) ? EGS_OK : EGS_ERR_STORE;
}

static enum egs_err sqlite_prune_events_below(struct sqlite_store *s, int64_t before, int64_t below_id, int64_t *deleted)
{
	int64_t n;
	if (!step_done(s, s->begin, "BEGIN", NULL, NULL))
		goto fail;
	if (sqlite3_bind_int64(s->prune_mark, 1, before) != SQLITE_OK ||
	    sqlite3_bind_int64(s->prune_mark, 2, below_id) != SQLITE_OK ||
	    !step_done(s, s->prune_mark, "prune events (id floor)", NULL, NULL))
		goto fail;
	if (sqlite3_bind_int64(s->prune, 1, before) != SQLITE_OK || sqlite3_bind_int64(s->prune, 2, below_id) != SQLITE_OK ||
	    !step_done(s, s->prune, "prune events", NULL, NULL))
		goto fail;
	n = sqlite3_changes64(s->db);
	if (!step_done(s, s->commit, "COMMIT", NULL, NULL))
		goto fail;
	if (deleted)
		*deleted = n;
	return EGS_OK;
fail:
	if (!sqlite3_get_autocommit(s->db))
		step_done(s, s->rollback, "ROLLBACK", NULL, NULL);
	return EGS_ERR_STORE;
}

/* Finished GPRs that left memory (store.h).  Prepared per call: these reads are rare next to
 * commits, and the query's shape depends on the filter. */
static enum egs_err sqlite_gprs_find(struct sqlite_store *s, const struct egs_gpr_find *f, egs_store_gpr_fn each,
				     void *ctx)
{
	char sql[1024];
	const char *vals[4];
	sqlite3_stmt *stmt = NULL;
	enum egs_err err = EGS_ERR_STORE;
	int rc, np = egs_rows_find_sql(f, kinds[EGS_KIND_GPR].cols, '?', sql, sizeof(sql), vals);
	if (np < 0 || !prepare(s, sql, &stmt))
		goto out;
	for (int i = 0; i < np; i++)
		sqlite3_bind_text(stmt, i + 1, vals[i], -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		struct reader r = { .stmt = stmt };
		struct egs_gpr *g = egs_gpr_new();
		read_gpr(&r, g);
		if (r.bad) {
			fprintf(stderr, "store: gprs row '%s': column %s: %s\n", g->id, r.bad, r.why);
			egs_gpr_free(g);
			goto out;
		}
		each(ctx, g);
	}
	if (rc != SQLITE_DONE)
		fprintf(stderr, "store: reading gprs: %s\n", sqlite3_errmsg(s->db));
	else
		err = EGS_OK;
out:
	sqlite3_finalize(stmt);
	return err;
}

/* ---- the ops table (store_impl.h): each handle store.c gets is a struct sqlite_store ---- */

static struct sqlite_store *of(struct egs_store *base)
{
	return (struct sqlite_store *)base;
}

static void op_free(struct egs_store *b) { sqlite_free(of(b)); }
static enum egs_err op_load(struct egs_store *b, struct egs_state *st) { return sqlite_load(of(b), st); }
static enum egs_err op_commit(struct egs_store *b, struct egs_state *st) { return sqlite_commit_changes(of(b), st); }
static enum egs_err op_meta_get(struct egs_store *b, const char *k, char **v) { return sqlite_meta_get(of(b), k, v); }
static enum egs_err op_meta_set(struct egs_store *b, const char *k, const char *v) { return sqlite_meta_set(of(b), k, v); }
static enum egs_err op_prune(struct egs_store *b, int64_t before, int64_t below_id, int64_t *deleted)
{
	return sqlite_prune_events_below(of(b), before, below_id, deleted);
}

static enum egs_err op_audit_list(struct egs_store *b, const struct egs_audit_filter *f, struct egs_vec *out)
{
	return egs__sqlite_audit_list(of(b)->db, f, out);
}
static enum egs_err op_audit_prune(struct egs_store *b, int64_t before, int64_t *deleted)
{
	return egs__sqlite_audit_prune(of(b)->db, before, deleted);
}
static enum egs_err op_audit_last(struct egs_store *b, int64_t *out) { return egs__sqlite_audit_last_id(of(b)->db, out); }

static enum egs_err op_gprs_find(struct egs_store *b, const struct egs_gpr_find *f, egs_store_gpr_fn each, void *ctx)
{
	return sqlite_gprs_find(of(b), f, each, ctx);
}

static const struct egs_store_ops sqlite_ops = {
	.name = "sqlite",
	.free = op_free,
	.load = op_load,
	.commit_changes = op_commit,
	.meta_get = op_meta_get,
	.meta_set = op_meta_set,
	.prune_events_below = op_prune,
	.audit_list = op_audit_list,
	.audit_prune = op_audit_prune,
	.audit_last_id = op_audit_last,
	.gprs_find = op_gprs_find,
};
