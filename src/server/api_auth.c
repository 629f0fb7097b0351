/*
 * api_auth.c: POST /api/v1/auth (key -> bearer token), API key management and projects.
 * Only admins manage keys; a project-scoped admin manages keys of its project only and cannot mint
 * a key wider than its own.
 */
#include "server/server.h"

#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void auth_login(struct egs_req *r)
{
	static const char *const allowed[] = { "apiKey", NULL };
	char key[128];
	if (!egs_body_only(r, allowed) || !egs_get_str(r, r->body, "apiKey", true, key, sizeof(key)))
		return;
	if (!egs_auth_key_wellformed(key)) {
		egs_reply_err(r, EGS_ERR_BAD_REQUEST, "API_KEY_INVALID", "apiKey",
			      "Api Key Configuration is invalid: apiKey must be a key issued by this server");
		return;
	}
	unsigned char hash[32];
	egs_auth_hash(key, hash);
	sodium_memzero(key, sizeof(key));
	const struct egs_apikey *k = egs_state_apikey_by_hash(&r->srv->st, hash);
	if (!k || sodium_memcmp(k->hash, hash, 32) != 0) {
		egs_reply_err(r, EGS_ERR_UNAUTHENTICATED, NULL, NULL, "Unauthenticated");
		return;
	}
	int64_t now = egs_now(r->srv);
	if (k->expires_at && k->expires_at <= now) {
		egs_reply_err(r, EGS_ERR_KEY_EXPIRED, NULL, NULL, "Api Key has expired");
		return;
	}
	int64_t exp = now + r->srv->token_ttl_s;
	if (k->expires_at && k->expires_at < exp)
		exp = k->expires_at;
	char tok[200], ts[32];
	egs_auth_mint(r->srv, k, exp, tok, sizeof(tok));
	egs_time_format(exp, ts, sizeof(ts));
	egs_reply_header(r, "X-Token-Expires-At", ts);
	egs_reply_ok(r, json_pack("{s:s}", "token", tok));
}

/* validity: a duration ("90d", "0d6h0m"), a date ("2027-01-31") or an RFC 3339 time. */
static bool parse_validity(struct egs_req *r, const char *v, int64_t now, int64_t *exp)
{
	*exp = 0;
	if (!*v)
		return true;
	int64_t secs;
	const char *why;
	if (egs_duration_parse(v, &secs, &why)) {
		*exp = now + secs;
		return true;
	}
	char full[24];
	if (strlen(v) == 10) { /* a date: midnight UTC */
		memcpy(full, v, 10);
		memcpy(full + 10, "T00:00:00Z", 11);
		v = full;
	}
	if (!egs_time_parse(v, exp)) {
		egs_reply_invalid(r, "validity", "validity must be a duration like 90d or a date like 2027-01-31");
		return false;
	}
	if (*exp <= now) {
		egs_reply_invalid(r, "validity", "validity must lie in the future");
		return false;
	}
	return true;
}

static void apikey_create(struct egs_req *r)
{
	static const char *const allowed[] = { "name", "userName", "description", "role", "validity",
					       "workspaceName", "projectName", NULL };
	struct egs_server *srv = r->srv;
	char name[EGS_NAME_MAX], user[EGS_NAME_MAX * 2], desc[256], role_s[16], validity[40], ws[EGS_NAME_MAX],
		project[EGS_NAME_MAX];
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "name", true, name, sizeof(name)) || !egs_check_name(r, "name", name, false) ||
	    !egs_get_str(r, r->body, "userName", false, user, sizeof(user)) ||
	    !egs_get_str(r, r->body, "description", false, desc, sizeof(desc)) ||
	    !egs_get_str(r, r->body, "role", true, role_s, sizeof(role_s)) ||
	    !egs_get_str(r, r->body, "validity", false, validity, sizeof(validity)) ||
	    !egs_get_str(r, r->body, "workspaceName", false, ws, sizeof(ws)) ||
	    !egs_get_str(r, r->body, "projectName", false, project, sizeof(project)))
		return;
	enum egs_role role;
	if (!egs_role_parse(role_s, &role) || role == EGS_ROLE_AGENT) {
		egs_reply_invalid(r, "role", "role must be Admin, Owner, Editor or Viewer");
		return;
	}
	if (role == EGS_ROLE_EDITOR && !ws[0]) {
		egs_reply_invalid(r, "workspaceName", "an Editor key is limited to one workspace: workspaceName is required");
		return;
	}
	if (!egs_check_text(r, "userName", user) || !egs_check_text(r, "description", desc))
		return;
	int64_t now = egs_now(srv), exp;
	if (!parse_validity(r, validity, now, &exp))
		return;
	if (r->who.project[0] && !project[0])
		egs_strlcpy(project, r->who.project, sizeof(project));
	if (project[0] && !egs_state_project(&srv->st, project)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "PROJECT_NOT_FOUND", "projectName", "project %s does not exist", project);
		return;
	}
	if (!egs_in_project(r, project)) {
		egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, "projectName", "this admin key is limited to project %s",
			      r->who.project);
		return;
	}
	if (ws[0]) {
		const struct egs_workspace *w = egs_state_workspace(&srv->st, ws);
		if (!w || !egs_in_project(r, w->project)) {
			egs_reply_err(r, EGS_ERR_NOT_FOUND, "WORKSPACE_NOT_FOUND", "workspaceName", "Slice Workspace Not Found: %s", ws);
			return;
		}
		if (role == EGS_ROLE_ADMIN) {
			egs_reply_invalid(r, "workspaceName", "an Admin key cannot be limited to one workspace");
			return;
		}
		egs_strlcpy(project, w->project, sizeof(project));
	}
	if (!project[0] && role != EGS_ROLE_ADMIN)
		egs_strlcpy(project, "default", sizeof(project));
	/* names are unique per project */
	void *v;
	for (size_t i = 0; egs_map_next(&srv->st.apikeys, &i, NULL, &v);) {
		const struct egs_apikey *o = v;
		if (strcmp(o->name, name) == 0 && strcmp(o->project, project) == 0) {
			egs_reply_err(r, EGS_ERR_EXISTS, "API_KEY_ALREADY_EXISTS", "name", "an API key named %s exists", name);
			return;
		}
	}
	struct egs_apikey *k = egs_calloc(1, sizeof(*k));
	char keytext[37];
	egs_auth_new_key(keytext, k->hash);
	egs_new_id("key", k->id);
	egs_strlcpy(k->name, name, sizeof(k->name));
	egs_strlcpy(k->user_name, user, sizeof(k->user_name));
	k->description = desc[0] ? egs_strdup(desc) : NULL;
	k->role = role;
	egs_strlcpy(k->project, project, sizeof(k->project));
	egs_strlcpy(k->workspace, ws, sizeof(k->workspace));
	k->created_at = now;
	k->expires_at = exp;
	EGS_ASSERT(egs_state_add_apikey(&srv->st, k) == EGS_OK);
	egs_state_touch(&srv->st, EGS_KIND_APIKEY, k);
	json_t *o = egs_json_apikey(k);
	json_object_set_new(o, "apiKey", json_string(keytext));
	sodium_memzero(keytext, sizeof(keytext));
	egs_reply_ok(r, o);
}

/* ?workspaceName=W (the public SDK's filter) keeps the keys limited to W; an unknown or unseen
 * workspace answers 404 so that the filter is never silently ignored. */
static void apikey_list(struct egs_req *r)
{
	if (!egs_require_role(r, EGS_R(ADMIN)))
		return;
	const char *ws = egs_query(r, "workspaceName");
	if (ws && *ws) {
		const struct egs_workspace *w = egs_state_workspace(&r->srv->st, ws);
		if (!w || !egs_in_project(r, w->project)) {
			egs_reply_err(r, EGS_ERR_NOT_FOUND, "WORKSPACE_NOT_FOUND", "workspaceName",
				      "Slice Workspace Not Found: %s", ws);
			return;
		}
	}
	json_t *items = json_array();
	void *v;
	for (size_t i = 0; egs_map_next(&r->srv->st.apikeys, &i, NULL, &v);) {
		const struct egs_apikey *k = v;
		if (egs_in_project(r, k->project) && (!ws || !*ws || strcmp(k->workspace, ws) == 0))
			json_array_append_new(items, egs_json_apikey(k));
	}
	egs_reply_ok(r, json_pack("{s:o}", "items", items));
}

/* The key named by its text ({"apiKey": ...}, what the public SDK sends), looked up by hash; NULL
 * when no such key exists.  Replies 422 for a value that is not a key and returns false. */
static bool apikey_by_text(struct egs_req *r, char *text, struct egs_apikey **out)
{
	*out = NULL;
	if (!egs_auth_key_wellformed(text)) {
		sodium_memzero(text, strlen(text));
		egs_reply_invalid(r, "apiKey", "apiKey must be a key issued by this server");
		return false;
	}
	unsigned char hash[32];
	egs_auth_hash(text, hash);
	sodium_memzero(text, strlen(text));
	struct egs_apikey *k = (struct egs_apikey *)egs_state_apikey_by_hash(&r->srv->st, hash);
	if (k && sodium_memcmp(k->hash, hash, 32) == 0)
		*out = k;
	return true;
}

/* Deletes a key named by keyId, by name (and project), or by its text (apiKey). */
static void apikey_delete(struct egs_req *r)
{
	static const char *const allowed[] = { "keyId", "name", "projectName", "apiKey", NULL };
	char id[EGS_ID_MAX], name[EGS_NAME_MAX], project[EGS_NAME_MAX], text[64];
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "keyId", false, id, sizeof(id)) ||
	    !egs_get_str(r, r->body, "name", false, name, sizeof(name)) ||
	    !egs_get_str(r, r->body, "projectName", false, project, sizeof(project)) ||
	    !egs_get_str(r, r->body, "apiKey", false, text, sizeof(text)))
		return;
	if (!id[0] && !name[0] && !text[0]) {
		egs_reply_invalid(r, "keyId", "keyId, name or apiKey is required");
		return;
	}
	struct egs_apikey *k = id[0] ? egs_state_apikey(&r->srv->st, id) : NULL;
	const char *field = id[0] ? "keyId" : text[0] ? "apiKey" : "name";
	if (!id[0] && text[0] && !apikey_by_text(r, text, &k))
		return;
	if (!id[0] && !text[0]) {
		void *v;
		for (size_t i = 0; egs_map_next(&r->srv->st.apikeys, &i, NULL, &v);) {
			struct egs_apikey *o = v;
			if (strcmp(o->name, name) == 0 && (!project[0] || strcmp(o->project, project) == 0) &&
			    egs_in_project(r, o->project))
				k = o;
		}
	}
	if (!k || !egs_in_project(r, k->project) || k->role == EGS_ROLE_AGENT) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "API_KEY_NOT_FOUND", field, "no such API key");
		return;
	}
	if (strcmp(k->id, r->who.key_id) == 0) {
		egs_reply_err(r, EGS_ERR_CONFLICT, "API_KEY_IN_USE", field, "an API key cannot delete itself");
		return;
	}
	char deleted[EGS_ID_MAX];
	egs_strlcpy(deleted, k->id, sizeof(deleted));
	egs_state_del(&r->srv->st, EGS_KIND_APIKEY, k);
	egs_reply_ok(r, json_pack("{s:s}", "keyId", deleted));
}

static void project_create(struct egs_req *r)
{
	static const char *const allowed[] = { "projectName", NULL };
	char name[EGS_NAME_MAX];
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "projectName", true, name, sizeof(name)) ||
	    !egs_check_name(r, "projectName", name, true))
		return;
	if (r->who.project[0]) {
		egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, NULL, "only an admin key of every project creates projects");
		return;
	}
	if (egs_state_project(&r->srv->st, name)) {
		egs_reply_err(r, EGS_ERR_EXISTS, "PROJECT_ALREADY_EXISTS", "projectName", "project %s already exists", name);
		return;
	}
	struct egs_project *p = egs_calloc(1, sizeof(*p));
	egs_strlcpy(p->name, name, sizeof(p->name));
	p->created_at = egs_now(r->srv);
	EGS_ASSERT(egs_state_add_project(&r->srv->st, p) == EGS_OK);
	egs_state_touch(&r->srv->st, EGS_KIND_PROJECT, p);
	egs_reply_ok(r, json_pack("{s:s}", "projectName", name));
}

static void project_list(struct egs_req *r)
{
	if (!egs_require_role(r, EGS_R(ADMIN)))
		return;
	json_t *items = json_array();
	void *v;
	for (size_t i = 0; egs_map_next(&r->srv->st.projects, &i, NULL, &v);) {
		const struct egs_project *p = v;
		if (egs_in_project(r, p->name))
			json_array_append_new(items, json_pack("{s:s}", "projectName", p->name));
	}
	egs_reply_ok(r, json_pack("{s:o}", "items", items));
}

const struct egs_route egs_routes_auth[] = {
	{ EVHTTP_REQ_POST, "/api/v1/auth", auth_login, true },
	{ EVHTTP_REQ_POST, "/api/v1/api-key", apikey_create, false },
	{ EVHTTP_REQ_GET, "/api/v1/api-key/list", apikey_list, false },
	{ EVHTTP_REQ_DELETE, "/api/v1/api-key", apikey_delete, false },
	{ EVHTTP_REQ_POST, "/api/v1/projects", project_create, false },
	{ EVHTTP_REQ_GET, "/api/v1/projects", project_list, false },
	{ 0, NULL, NULL, false },
};
