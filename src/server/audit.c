/*
 * audit.c: recording and listing the audit log; see audit.h.
 *
 *   GET /api/v1/audit?since=&until=&actor=&limit=&continue=   (admins without a project scope)
 *
 * since/until: RFC 3339 or a duration back from now ("24h"); actor: an API key's id or name;
 * limit: 1..1000 (default 100); continue: the previous page's token.  Entries come oldest first
 * (by id, the order they were answered in), as gpr/list pages in creation order.
 */
#include "server/audit.h"

#include "core/util.h"
#include "server/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Body fields that name the object of a write, most specific first.  Never "apiKey": a secret. */
static const char *const target_fields[] = { "gprId", "keyId", "gprTemplateBindingName", "gprTemplateName",
					     "templateName", "workspaceName", "sliceName", "clusterName",
					     "gpuNodeName", "name", "gprName", "projectName", "uid" };

static bool is_write(enum evhttp_cmd_type m)
{
	return m == EVHTTP_REQ_POST || m == EVHTTP_REQ_PUT || m == EVHTTP_REQ_PATCH || m == EVHTTP_REQ_DELETE;
}

static bool audited(const struct egs_req *r)
{
	if (!r->authed || !is_write(r->method) || strncmp(r->path, "/api/v1/", 8) != 0)
		return false;
	/* A GPR custom resource's apply or delete is a person's write (kubectl) made through the agent, whose
	 * key the entry names; an apply is authorised as an Owner of the namespace's workspace
	 * (api_agent_gpr.c), and its role says so. */
	if (strcmp(r->path, "/api/v1/agent/gprs") == 0)
		return true;
	if (r->who.role != EGS_ROLE_ADMIN && r->who.role != EGS_ROLE_OWNER && r->who.role != EGS_ROLE_VIEWER)
		return false;
	return strncmp(r->path, "/api/v1/agent/", 14) != 0 && strcmp(r->path, "/api/v1/gpr/waittime") != 0 &&
	       strcmp(r->path, "/api/v1/debug/clock") != 0;
}

/* The object the write named: the id it created (the reply's data), else the first target field of
 * its body; "" when none. */
static void target_of(const struct egs_req *r, json_t *env, char *out, size_t n)
{
	json_t *data = json_object_get(env, "data"), *v;
	out[0] = '\0';
	if ((v = json_object_get(data, "gprId")) && json_is_string(v)) {
		egs_strlcpy(out, json_string_value(v), n);
	} else if ((v = json_object_get(data, "keyId")) && json_is_string(v)) {
		egs_strlcpy(out, json_string_value(v), n);
	} else {
		for (size_t i = 0; i < EGS_ARRAY_LEN(target_fields) && !out[0]; i++)
			if ((v = json_object_get(r->body, target_fields[i])) && json_is_string(v))
				egs_strlcpy(out, json_string_value(v), n);
	}
}

/* The connection's peer, or the client a follower forwarded for, proven (egs_forward_client). */
static void peer_of(const struct egs_req *r, char *out, size_t n)
{
	if (egs_forward_client(r, out, n))
		return;
	egs_strlcpy(out, r->hq ? egs_hreq_peer(r->hq) : "", n);
}

/* Records r's answer (audited already): status, target and error_key (both cut to fit). */
static void record(struct egs_req *r, int status, const char *target, const char *error_key)
{
	struct egs_audit *a = egs_malloc(sizeof(*a));
	a->id = 0;
	a->time = egs_now(r->srv);
	egs_strlcpy(a->key_id, r->who.key_id, sizeof(a->key_id));
	egs_strlcpy(a->key_name, r->who.key ? r->who.key->name : "", sizeof(a->key_name));
	egs_strlcpy(a->role, egs_role_name(r->who.role), sizeof(a->role));
	egs_strlcpy(a->method, r->method == EVHTTP_REQ_POST ? "POST" : r->method == EVHTTP_REQ_PUT ? "PUT"
			       : r->method == EVHTTP_REQ_PATCH ? "PATCH" : "DELETE", sizeof(a->method));
	egs_strlcpy(a->route, r->path, sizeof(a->route));
	egs_strlcpy(a->target, target, sizeof(a->target));
	egs_utf8_sanitize(a->target); /* a cut may split a character; control characters stay (JSON escapes them) */
	a->status = status;
	egs_strlcpy(a->error_key, error_key, sizeof(a->error_key));
	peer_of(r, a->peer, sizeof(a->peer));
	egs_state_audit(&r->srv->st, a);
}

void egs_audit_answer(struct egs_req *r, int status, json_t *env)
{
	if (!audited(r))
		return;
	char target[sizeof(((struct egs_audit *)0)->target)];
	target_of(r, env, target, sizeof(target));
	json_t *key = json_object_get(json_object_get(env, "error"), "errorKey");
	record(r, status, target, json_is_string(key) ? json_string_value(key) : "");
}

void egs_audit_answer_target(struct egs_req *r, int status, const char *target)
{
	if (audited(r))
		record(r, status, target, "");
}

enum egs_err egs_audit_start(struct egs_server *srv)
{
	int64_t last;
	enum egs_err err = egs_store_audit_last_id(srv->store, &last);
	if (!err && last > srv->st.audit_last_id)
		srv->st.audit_last_id = last;
	return err;
}

void egs_audit_prune(struct egs_server *srv, int64_t now)
{
	int64_t deleted = 0;
	if (srv->audit_retention_days <= 0)
		return;
	if (egs_store_audit_prune(srv->store, now - srv->audit_retention_days * 86400, &deleted) != EGS_OK)
		fprintf(srv->log, "level=warn msg=\"audit retention: pruning the store failed\"\n");
	else if (deleted)
		fprintf(srv->log, "level=info msg=\"audit retention\" pruned=%lld\n", (long long)deleted);
}

/* ---- GET /api/v1/audit ---- */

static json_t *entry_json(const struct egs_audit *a)
{
	char t[32], id[24];
	egs_time_format(a->time, t, sizeof(t));
	snprintf(id, sizeof(id), "%lld", (long long)a->id);
	json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:s, s:s, s:s, s:i, s:s, s:s}", "id", id, "time", t,
			      "actor", "keyId", a->key_id, "keyName", a->key_name, "role", a->role, "method", a->method,
			      "route", a->route, "target", a->target, "status", a->status, "errorKey", a->error_key,
			      "peer", a->peer);
	EGS_ASSERT(o); /* every field was UTF-8 when recorded, and is ASCII or sanitized */
	return o;
}

/* A positive integer query field in [1, max]; false after replying 422 naming it. */
static bool q_int(struct egs_req *r, const char *name, int64_t max, const char *why, int64_t *out)
{
	const char *v = egs_query(r, name);
	if (!v)
		return true;
	if (!egs_int_parse(v, 1, max, out)) {
		egs_reply_invalid(r, name, "%s %s", name, why);
		return false;
	}
	return true;
}

static bool parse(struct egs_req *r, struct egs_audit_filter *f)
{
	static const char *const known[] = { "since", "until", "actor", "limit", "continue" };
	int64_t now = egs_now(r->srv), limit = 100;
	memset(f, 0, sizeof(*f));
	for (struct evkeyval *kv = r->query.tqh_first; kv; kv = kv->next.tqe_next) {
		bool ok = false;
		for (size_t i = 0; i < EGS_ARRAY_LEN(known); i++)
			ok = ok || !strcmp(kv->key, known[i]);
		if (!ok) {
			egs_reply_invalid(r, kv->key, "%s: unknown query parameter", kv->key);
			return false;
		}
	}
	f->actor = egs_query(r, "actor");
	if (f->actor && (!*f->actor || strlen(f->actor) >= EGS_NAME_MAX)) {
		egs_reply_invalid(r, "actor", "actor must be an API key's id or name (1 to %d characters)", EGS_NAME_MAX - 1);
		return false;
	}
	if (!egs_query_time(r, "since", now, &f->since) || !egs_query_time(r, "until", now, &f->until) ||
	    !q_int(r, "limit", 1000, "must be 1 to 1000", &limit) ||
	    !q_int(r, "continue", INT64_MAX, "must be the token of a previous page", &f->after_id))
		return false;
	if (f->since && f->until && f->until <= f->since) {
		egs_reply_invalid(r, "until", "until must be after since");
		return false;
	}
	f->limit = (size_t)limit;
	return true;
}

static void audit_list(struct egs_req *r)
{
	struct egs_audit_filter f;
	struct egs_vec got = { 0 };
	if (!egs_require_role(r, EGS_R(ADMIN)))
		return;
	if (r->who.project[0]) {
		egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, NULL,
			      "the audit log spans every project: only an admin key without a project may read it");
		return;
	}
	if (!parse(r, &f))
		return;
	size_t want = f.limit;
	f.limit = want + 1; /* one more tells whether there is a next page */
	enum egs_err err = egs_store_audit_list(r->srv->store, &f, &got);
	json_t *items = json_array(), *next = json_null();
	for (size_t i = 0; !err && i < got.len && i < want; i++)
		json_array_append_new(items, entry_json(got.items[i]));
	if (!err && got.len > want) {
		char tok[24];
		snprintf(tok, sizeof(tok), "%lld", (long long)((struct egs_audit *)got.items[want - 1])->id);
		next = json_string(tok);
	}
	for (size_t i = 0; i < got.len; i++)
		free(got.items[i]);
	egs_vec_cleanup(&got);
	if (err) {
		json_decref(items);
		json_decref(next);
		egs_reply_err(r, EGS_ERR_UNAVAILABLE, "STORE_UNAVAILABLE", NULL, "the audit log could not be read");
		return;
	}
	egs_reply_ok(r, json_pack("{s:o, s:o}", "items", items, "continue", next));
}

const struct egs_route egs_routes_audit[] = {
	{ EVHTTP_REQ_GET, "/api/v1/audit", audit_list, false },
	{ 0, NULL, NULL, false },
};
