/*
 * http.c: request plumbing of egsd: dispatch over the route tables, authentication, the public
 * envelope, held replies and group commit, and the access log (the input helpers are in input.c).
 *
 * Group commit: a handler that changes state makes egs_state_has_changes() true; its reply (and
 * every other reply of the turn) is then held.  The commit event has the lowest priority, so it runs
 * once per loop turn after all ready requests: it runs the scheduler if needed and commits the turn
 * in one transaction.  The turn's replies then wait in srv->waiting for the fsync that covers the
 * commit (durable.c), while the loop reads the next turn; a reply that changes nothing but may show
 * a committed, not yet durable change waits there too.  A kept status view knows the last change it
 * shows (egs_reply_view_ref): when that is durable it goes out at once, whatever else waits.
 */
#include "server/server.h"

#include "core/sched.h"
#include "core/util.h"
#include "server/audit.h"
#include "server/portal.h"
#include "server/conn.h"
#include "server/json_fast.h"
#include "server/loop_alloc.h"
#include "server/query.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct held_reply {
	struct egs_hreq *hq;
	int status;
	struct evbuffer *body;
	char method[8];
	char path[128];
	int64_t t0_us;
	uint64_t upto; /* in srv->waiting: sent once the store's writes up to this one are durable */
};

int64_t egs_now(const struct egs_server *srv)
{
	/* The dev clock stands still: it moves only by POST /api/v1/debug/clock, so tests that check
	 * "one second before the exit" never race a real second boundary. */
	if (srv->dev_clock)
		return srv->dev_clock_base + srv->clock_offset;
	return (int64_t)time(NULL);
}

int64_t egs_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- the one table from errors to HTTP ---- */

static const struct {
	int status;
	const char *key;
	const char *message;
} err_http[] = {
	[EGS_OK] = { 200, "", "Success" },
	[EGS_ERR_INVALID] = { 422, "VALIDATION_FAILED", "Bad Request" },
	[EGS_ERR_BAD_REQUEST] = { 400, "BAD_REQUEST", "Bad Request" },
	[EGS_ERR_NOT_FOUND] = { 404, "NOT_FOUND", "Not Found" },
	[EGS_ERR_EXISTS] = { 409, "ALREADY_EXISTS", "Already Exists" },
	[EGS_ERR_CONFLICT] = { 409, "CONFLICT", "Conflict" },
	[EGS_ERR_UNSATISFIABLE] = { 422, "GPR_UNSATISFIABLE", "Bad Request" },
	[EGS_ERR_UNAUTHENTICATED] = { 401, "UNAUTHENTICATED", "Unauthenticated" },
	[EGS_ERR_EXPIRED] = { 401, "TOKEN_EXPIRED", "Unauthenticated" },
	[EGS_ERR_FORBIDDEN] = { 403, "FORBIDDEN", "Forbidden" },
	[EGS_ERR_TOO_LARGE] = { 413, "REQUEST_TOO_LARGE", "Payload Too Large" },
	[EGS_ERR_STORE] = { 500, "STORE_FAILED", "Internal Server Error" },
	[EGS_ERR_IO] = { 500, "IO_FAILED", "Internal Server Error" },
	[EGS_ERR_GPR_PROVISIONED] = { 409, "GPR_ALREADY_PROVISIONED", "Conflict" },
	[EGS_ERR_GPR_RELEASED] = { 409, "GPR_ALREADY_RELEASED", "Conflict" },
	[EGS_ERR_GPR_NOT_PROVISIONED] = { 409, "GPR_NOT_PROVISIONED", "Conflict" },
	[EGS_ERR_GPR_FINISHED] = { 409, "GPR_ALREADY_FINISHED", "Conflict" },
	[EGS_ERR_BUSY] = { 409, "RESOURCE_BUSY", "Conflict" },
	[EGS_ERR_METHOD] = { 405, "METHOD_NOT_ALLOWED", "Method Not Allowed" },
	/* the public SDK tells an expired key from an unknown one by this top-level message */
	[EGS_ERR_KEY_EXPIRED] = { 401, "API_KEY_EXPIRED", "Api Key has expired" },
	[EGS_ERR_NOT_IMPLEMENTED] = { 501, "NOT_IMPLEMENTED", "Not Implemented" },
	[EGS_ERR_UNAVAILABLE] = { 503, "SERVICE_UNAVAILABLE", "Service Unavailable" },
	[EGS_ERR_STORAGE_FULL] = { 507, "STORAGE_FULL", "Insufficient Storage" },
};

const char *egs_log_escape(const char *s, char *out, size_t outsz)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	EGS_ASSERT(outsz >= 5);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		bool plain = *c > 0x20 && *c < 0x7f && *c != '"' && *c != '\\';
		if (o + (plain ? 1 : 4) >= outsz)
			break;
		if (plain) {
			out[o++] = (char)*c;
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[*c >> 4];
			out[o++] = hex[*c & 15];
		}
	}
	out[o] = '\0';
	return out;
}

/* The current second's access-log timestamp, formatted once a second instead of once a reply (the
 * front formats the HTTP Date the same way, conn_reply.c).  egsd's loop thread only. */
static struct {
	time_t sec;
	char log[32]; /* "2026-11-25T20:37:34Z" */
} clock_text = { (time_t)-1, "" };

static void clock_text_now(void)
{
	time_t t = time(NULL);
	if (t == clock_text.sec)
		return;
	egs_time_format((int64_t)t, clock_text.log, sizeof(clock_text.log));
	clock_text.sec = t;
}

static void log_line(struct egs_server *srv, const char *method, const char *path, int status, int64_t t0_us)
{
	if (!srv->log_requests)
		return;
	char shown[4 * 128 + 1];
	clock_text_now();
	fprintf(srv->log, "%s level=info msg=request method=%s path=%s status=%d latency_us=%lld\n", clock_text.log,
		method, egs_log_escape(path, shown, sizeof(shown)), status, (long long)(egs_mono_us() - t0_us));
}

static const char *method_name(enum evhttp_cmd_type m)
{
	switch (m) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_DELETE: return "DELETE";
	case EVHTTP_REQ_PATCH: return "PATCH";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_OPTIONS: return "OPTIONS";
	default: return "OTHER";
	}
}

static void send_now(struct egs_server *srv, struct egs_hreq *hq, int status, struct evbuffer *body,
		     const char *method, const char *path, int64_t t0_us)
{
	egs_hreq_reply(hq, status, body); /* the front formats the head (Date once a second) */
	log_line(srv, method, path, status, t0_us);
	srv->requests++;
	egs_obs_request(srv, method, path, status, t0_us); /* latency histograms of /metrics */
}

/* jansson calls its dump callback once per token (a quote, a key, a colon): gathering them in a
 * local buffer and adding that to the reply once per 4 KiB is much cheaper than an evbuffer_add per
 * token (issue 16: that alone was about a sixth of a status read's instructions). */
struct dump_buf {
	struct evbuffer *out;
	size_t n;
	char b[4096];
};

static int dump_gather(const char *data, size_t len, void *arg)
{
	struct dump_buf *d = arg;
	if (d->n + len > sizeof(d->b)) {
		if (evbuffer_add(d->out, d->b, d->n))
			return -1;
		d->n = 0;
		if (len > sizeof(d->b))
			return evbuffer_add(d->out, data, len);
	}
	memcpy(d->b + d->n, data, len);
	d->n += len;
	return 0;
}

/* Appends v (any JSON value), compact, to out. */
static void dump_json(json_t *v, struct evbuffer *out)
{
	struct dump_buf d;
	d.out = out;
	d.n = 0;
	EGS_ASSERT(json_dump_callback(v, dump_gather, &d, JSON_COMPACT | JSON_ENCODE_ANY) == 0);
	EGS_ASSERT(evbuffer_add(out, d.b, d.n) == 0);
}

#define SHOWS_ANY UINT64_MAX /* a reply that may show any change made so far */

/* Sends the serialized envelope buf (taken) with status now, or holds it for the turn's commit.
 * shows: the change clock of the last change the reply shows (a kept status view), or SHOWS_ANY. */
static void finish_buf(struct egs_req *r, int status, struct evbuffer *buf, uint64_t shows)
{
	struct egs_server *srv = r->srv;
	egs_hreq_content_type(r->hq, "application/json");
	r->status = status;
	uint64_t written = egs_store_written(srv->store);
	bool turn = egs_state_has_changes(&srv->st) || srv->held.len;
	bool durable = shows != SHOWS_ANY && shows <= egs_durable_shown(srv); /* all it shows is on disk */
	if ((turn || written > egs_store_durable(srv->store)) && !durable) {
		struct held_reply *hr = egs_loop_malloc(sizeof(*hr)); /* freed when sent, with its turn's others */
		hr->hq = r->hq;
		hr->status = status;
		hr->body = buf;
		egs_strlcpy(hr->method, method_name(r->method), sizeof(hr->method));
		egs_strlcpy(hr->path, r->path, sizeof(hr->path));
		hr->t0_us = r->t0_us;
		hr->upto = written;
		if (turn) { /* the turn's commit decides (egs_server_flush) */
			egs_vec_push(&srv->held, hr);
			egs_server_changed(srv);
		} else { /* it may show committed writes not yet durable: it waits for them */
			egs_vec_push(&srv->waiting, hr);
			egs_store_sync(srv->store);
		}
	} else {
		send_now(srv, r->hq, status, buf, method_name(r->method), r->path, r->t0_us);
		evbuffer_free(buf);
	}
	r->hq = NULL;
}

static void finish(struct egs_req *r, int status, json_t *envelope)
{
	struct evbuffer *buf = evbuffer_new();
	EGS_ASSERT(buf);
	dump_json(envelope, buf);
	egs_audit_answer(r, status, envelope); /* an audited write joins the turn: its reply waits for it */
	json_decref(envelope);
	finish_buf(r, status, buf, SHOWS_ANY);
}

void egs_reply_json_ref(struct egs_req *r, const char *json, size_t len,
			void (*release)(const void *json, size_t len, void *arg), void *arg)
{
	EGS_ASSERT(r->method == EVHTTP_REQ_GET); /* never audited: reads only */
	struct evbuffer *buf = evbuffer_new();
	EGS_ASSERT(buf && evbuffer_add_reference(buf, json, len, release, arg) == 0);
	finish_buf(r, 200, buf, SHOWS_ANY);
}

void egs_reply_view_ref(struct egs_req *r, const char *json, size_t len, uint64_t shows,
			void (*release)(const void *json, size_t len, void *arg), void *arg)
{
	EGS_ASSERT(r->method == EVHTTP_REQ_GET && shows != SHOWS_ANY);
	struct evbuffer *buf = evbuffer_new();
	EGS_ASSERT(buf && evbuffer_add_reference(buf, json, len, release, arg) == 0);
	finish_buf(r, 200, buf, shows);
}

/* The success envelope is the same bytes around every data: those are written as they are and only
 * data is dumped, instead of building and dumping a four-key object per reply.  The audit log reads
 * a write's data (the id it created), so a write still hands it an envelope of data alone. */
void egs_reply_ok(struct egs_req *r, json_t *data)
{
	static const char head[] = "{\"statusCode\":200,\"status\":\"OK\",\"message\":\"Success\",\"data\":";
	if (!data)
		data = json_null();
	struct evbuffer *buf = evbuffer_new();
	EGS_ASSERT(buf && evbuffer_add(buf, head, sizeof(head) - 1) == 0);
	dump_json(data, buf);
	EGS_ASSERT(evbuffer_add(buf, "}", 1) == 0);
	if (r->method != EVHTTP_REQ_GET) { /* the audit log's own test: egs_audit_answer */
		json_t *env = json_pack("{s:O}", "data", data);
		EGS_ASSERT(env);
		egs_audit_answer(r, 200, env);
		json_decref(env);
	}
	json_decref(data);
	finish_buf(r, 200, buf, SHOWS_ANY);
}

void egs_reply_ok_str(struct egs_req *r, const char *key, const char *value)
{
	static const char head[] = "{\"statusCode\":200,\"status\":\"OK\",\"message\":\"Success\",\"data\":{\"";
	size_t kn = strlen(key), vn = strlen(value);
	EGS_ASSERT(!strcmp(key, "gprId") || !strcmp(key, "keyId")); /* the audit's target, as target_of finds it */
	for (size_t i = 0; i < vn; i++) /* the contract: nothing JSON would escape */
		EGS_ASSERT(value[i] >= 0x20 && value[i] < 0x7f && value[i] != '"' && value[i] != '\\');
	struct evbuffer *buf = evbuffer_new();
	EGS_ASSERT(buf && evbuffer_expand(buf, sizeof(head) + kn + vn + 8) == 0);
	EGS_ASSERT(evbuffer_add(buf, head, sizeof(head) - 1) == 0 && evbuffer_add(buf, key, kn) == 0 &&
		   evbuffer_add(buf, "\":\"", 3) == 0 && evbuffer_add(buf, value, vn) == 0 &&
		   evbuffer_add(buf, "\"}}", 3) == 0);
	if (r->method != EVHTTP_REQ_GET)
		egs_audit_answer_target(r, 200, value);
	finish_buf(r, 200, buf, SHOWS_ANY);
}

/* The error envelope; msg and field are UTF-8 sanitised copies. */
static json_t *error_envelope(enum egs_err err, const char *key, const char *field, const char *msg)
{
	int status = err_http[err].status;
	json_t *edata = field ? json_pack("{s:s}", "field", field) : json_null();
	json_t *env = json_pack("{s:i, s:s, s:s, s:n, s:{s:s, s:s, s:o}}", "statusCode", status, "status", "Error",
				"message", err_http[err].message, "data", "error", "errorKey",
				key ? key : err_http[err].key, "message", msg, "data", edata);
	EGS_ASSERT(env);
	return env;
}

void egs_reply_err(struct egs_req *r, enum egs_err err, const char *key, const char *field, const char *fmt, ...)
{
	EGS_ASSERT((size_t)err < EGS_ARRAY_LEN(err_http) && err != EGS_OK);
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	egs_utf8_sanitize(msg);
	char fieldbuf[96];
	if (field) {
		egs_strlcpy(fieldbuf, field, sizeof(fieldbuf));
		egs_utf8_sanitize(fieldbuf);
	}
	finish(r, err_http[err].status, error_envelope(err, key, field ? fieldbuf : NULL, msg));
}

/* Replaces held reply hr by the error envelope of err. */
static void fail_reply(struct held_reply *hr, enum egs_err err, const char *key, const char *msg)
{
	json_t *env = error_envelope(err, key, NULL, msg);
	evbuffer_drain(hr->body, evbuffer_get_length(hr->body));
	dump_json(env, hr->body);
	json_decref(env);
	hr->status = err_http[err].status;
	/* A reply built before the failure may carry headers of its success (X-Token-Expires-At). */
	egs_hreq_headers_clear(hr->hq);
	egs_hreq_content_type(hr->hq, "application/json");
}

void egs_server_fail_held(struct egs_server *srv, enum egs_err err, const char *key, const char *msg)
{
	EGS_ASSERT((size_t)err < EGS_ARRAY_LEN(err_http) && err != EGS_OK);
	for (size_t i = 0; i < srv->held.len; i++)
		fail_reply(srv->held.items[i], err, key, msg);
}

void egs_server_fail_waiting(struct egs_server *srv, uint64_t after, enum egs_err err, const char *key, const char *msg)
{
	EGS_ASSERT((size_t)err < EGS_ARRAY_LEN(err_http) && err != EGS_OK);
	for (size_t i = 0; i < srv->waiting.len; i++) {
		struct held_reply *hr = srv->waiting.items[i];
		if (hr->upto > after) {
			fail_reply(hr, err, key, msg);
			hr->upto = 0; /* sent by the next egs_server_send_durable */
		}
	}
}

void egs_reply_raw(struct egs_req *r, int status, struct evbuffer *body)
{
	send_now(r->srv, r->hq, status, body, method_name(r->method), r->path, r->t0_us);
	r->hq = NULL;
}

void egs_reply_header(struct egs_req *r, const char *name, const char *value)
{
	egs_hreq_header_add(r->hq, name, value);
}

const char *egs_req_header(const struct egs_req *r, const char *name)
{
	return egs_hreq_header(r->hq, name);
}

void egs_server_flush(struct egs_server *srv)
{
	uint64_t written = egs_store_written(srv->store);
	for (size_t i = 0; i < srv->held.len; i++) {
		struct held_reply *hr = srv->held.items[i];
		hr->upto = written; /* the turn's commit, or what the turn's reads saw */
		egs_vec_push(&srv->waiting, hr);
	}
	srv->held.len = 0;
	egs_store_sync(srv->store);
	egs_server_send_durable(srv);
}

void egs_server_send_durable(struct egs_server *srv)
{
	uint64_t durable = egs_store_durable(srv->store);
	size_t kept = 0;
	for (size_t i = 0; i < srv->waiting.len; i++) {
		struct held_reply *hr = srv->waiting.items[i];
		if (hr->upto > durable) {
			srv->waiting.items[kept++] = hr;
			continue;
		}
		send_now(srv, hr->hq, hr->status, hr->body, hr->method, hr->path, hr->t0_us);
		evbuffer_free(hr->body);
		egs_loop_free(hr);
	}
	srv->waiting.len = kept;
}

void egs_server_drop_replies(struct egs_server *srv)
{
	struct egs_vec *lists[] = { &srv->held, &srv->waiting };
	for (size_t l = 0; l < EGS_ARRAY_LEN(lists); l++) {
		for (size_t i = 0; i < lists[l]->len; i++) {
			struct held_reply *hr = lists[l]->items[i];
			egs_hreq_abandon(hr->hq);
			evbuffer_free(hr->body);
			egs_loop_free(hr);
		}
		egs_vec_cleanup(lists[l]);
	}
}

void egs_server_changed(struct egs_server *srv)
{
	if (!event_pending(srv->commit_ev, EV_TIMEOUT, NULL))
		event_active(srv->commit_ev, EV_TIMEOUT, 0);
}

/* ---- access ---- */

bool egs_require_role(struct egs_req *r, unsigned roles)
{
	if (roles & (1u << r->who.role))
		return true;
	egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, NULL, "the %s role may not call %s %s", egs_role_name(r->who.role),
		      method_name(r->method), r->path);
	return false;
}

bool egs_in_project(const struct egs_req *r, const char *project)
{
	return !r->who.project[0] || strcmp(r->who.project, project) == 0;
}

static bool ws_in_scope(const struct egs_req *r, const struct egs_workspace *ws)
{
	if (r->who.role == EGS_ROLE_AGENT || !egs_in_project(r, ws->project))
		return false;
	return r->who.role == EGS_ROLE_ADMIN || !r->who.workspace[0] || strcmp(r->who.workspace, ws->name) == 0;
}

bool egs_can_read_ws(struct egs_req *r, const struct egs_workspace *ws)
{
	if (ws_in_scope(r, ws))
		return true;
	egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, NULL, "this API key has no access to workspace %s", ws->name);
	return false;
}

bool egs_can_write_ws(struct egs_req *r, const struct egs_workspace *ws)
{
	if (!egs_can_read_ws(r, ws))
		return false;
	if (r->who.role == EGS_ROLE_VIEWER) {
		egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, NULL, "the Viewer role is read-only");
		return false;
	}
	return true;
}

/* ---- dispatch ---- */

/* The route tables, in lookup order (route.c finds the route of a request). */
static const struct egs_route *const route_tables[] = {
	egs_routes_auth, egs_routes_workspace, egs_routes_inventory, egs_routes_gpr, egs_routes_agent,
	egs_routes_admin, egs_routes_queue,
	egs_routes_events, egs_routes_observe, egs_routes_usage, egs_routes_metrics, /* observability */
	egs_routes_openapi, /* GET /api/v1/openapi.json */
	egs_routes_policy,  /* workspace policies and the global limits */
	egs_routes_template, egs_routes_template_binding, /* GPR templates and bindings of the public SDK */
	egs_routes_inference, /* the public SDK's inference endpoints */
	egs_routes_agent_infer, /* the agents' inference endpoints (objects to apply, readiness) */
	egs_routes_portal,  /* whoami and the per-node schedule the portal shows */
	egs_routes_kubecred, /* kubeconfigs, their regeneration, the agents' slice tokens */
	egs_routes_agent_events, /* GPR events the agents mirror into their clusters */
	egs_routes_agent_gpr, /* the agents' GPRs for GPUProvisioningRequest custom resources */
	egs_routes_kubeslice, /* the agents' slice namespaces */
	egs_routes_audit,    /* the audit log of writes (audit.h) */
	egs_routes_agent_register, /* the agents' registrations */
};

const struct egs_route *const *egs__route_tables(size_t *n)
{
	*n = EGS_ARRAY_LEN(route_tables);
	return route_tables;
}

/* Copies into out the key of a JSON object key token that ends (closing quote) just before byte pos
 * of p, where jansson reports a duplicate key, with bytes outside printable ASCII shown as '?'.  False
 * when no such token is there (the caller then answers as for any malformed body). */
static bool duplicate_key(const char *p, size_t len, int pos, char *out, size_t outsz)
{
	if (pos < 2 || (size_t)pos > len || p[pos - 1] != '"')
		return false;
	size_t start = (size_t)pos - 1;
	for (;;) { /* back to the opening quote: one not preceded by an odd run of backslashes */
		if (start == 0)
			return false;
		start--;
		if (p[start] != '"')
			continue;
		size_t bs = 0;
		while (start > bs && p[start - 1 - bs] == '\\')
			bs++;
		if (bs % 2 == 0)
			break;
	}
	json_t *key = json_loadb(p + start, (size_t)pos - start, JSON_DECODE_ANY, NULL);
	bool ok = json_is_string(key);
	if (ok) {
		egs_strlcpy(out, json_string_value(key), outsz);
		for (char *c = out; *c; c++)
			if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
				*c = '?';
	}
	json_decref(key);
	return ok;
}

static bool read_body(struct egs_req *r)
{
	const char *p;
	size_t len;
	egs_hreq_body(r->hq, &p, &len); /* contiguous: the front keeps a request's body in one piece */
	if (len == 0)
		return true;
	if (len > EGS_MAX_BODY) {
		egs_reply_err(r, EGS_ERR_TOO_LARGE, NULL, NULL, "the request body exceeds %d bytes", EGS_MAX_BODY);
		return false;
	}
	json_error_t jerr;
	/* The plain bodies take the fast path; jansson parses the rest and words every error. */
	json_t *j = egs_json_fast_object(p, len);
	if (j) {
		r->body = j;
		return true;
	}
	j = json_loadb(p, len, JSON_REJECT_DUPLICATES, &jerr);
	char dup[80];
	if (!j && json_error_code(&jerr) == json_error_duplicate_key && duplicate_key(p, len, jerr.position, dup, sizeof(dup))) {
		egs_reply_invalid(r, dup, "%s is given more than once", dup);
		return false;
	}
	if (!j) {
		egs_reply_err(r, EGS_ERR_BAD_REQUEST, "MALFORMED_JSON", NULL, "the body is not valid JSON: %s at line %d column %d",
			      jerr.text, jerr.line, jerr.column);
		return false;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		egs_reply_err(r, EGS_ERR_BAD_REQUEST, "MALFORMED_JSON", NULL, "the body must be a JSON object");
		return false;
	}
	r->body = j;
	return true;
}

void egs__http_on_request(struct egs_hreq *hq, void *arg)
{
	struct egs_server *srv = arg;
	struct egs_req r;
	struct egs_query_arena qarena;
	bool query_in_arena = false;
	memset(&r, 0, sizeof(r));
	r.srv = srv;
	r.hq = hq;
	r.t0_us = egs_mono_us();
	r.method = egs_hreq_method(hq);
	r.query.tqh_first = NULL;
	r.query.tqh_last = &r.query.tqh_first;

	const char *raw_path = egs_hreq_path(hq);
	const char *q = egs_hreq_query(hq);
	enum egs_frame_reason refused = egs_hreq_refusal(hq);
	if (refused) {
		/* The connection front refused the bytes the client sent: answer; the front then closes. */
		const struct egs_frame_reason_info *why = &egs_frame_reasons[refused];
		egs_strlcpy(r.path, "-", sizeof(r.path));
		egs_reply_err(&r, (enum egs_err)why->err, why->key, NULL, "%s", why->message);
		goto out;
	}
	if (!raw_path || strlen(raw_path) >= sizeof(r.path)) {
		egs_strlcpy(r.path, "-", sizeof(r.path));
		egs_reply_err(&r, EGS_ERR_BAD_REQUEST, NULL, NULL, "the request path is missing or too long");
		goto out;
	}
	egs_strlcpy(r.path, raw_path, sizeof(r.path));
	enum egs_query_result qr = egs_query_parse(q, &r.query, &qarena); /* no allocation (query.h) */
	query_in_arena = qr != EGS_QUERY_TOO_BIG;
	if (qr == EGS_QUERY_MALFORMED || (!query_in_arena && evhttp_parse_query_str(q, &r.query) != 0)) {
		egs_reply_err(&r, EGS_ERR_BAD_REQUEST, NULL, NULL, "the query string is malformed");
		goto out;
	}
	if (q && strstr(q, "%00")) { /* a NUL would silently cut the value */
		egs_reply_err(&r, EGS_ERR_BAD_REQUEST, NULL, NULL, "the query string must not contain control characters");
		goto out;
	}
	for (struct evkeyval *kv = r.query.tqh_first; kv; kv = kv->next.tqe_next) {
		const char *why = !egs_text_clean(kv->key) || !egs_text_clean(kv->value)
					  ? "must be UTF-8 text without control characters"
					  : NULL;
		for (struct evkeyval *o = kv->next.tqe_next; o && !why; o = o->next.tqe_next)
			if (strcmp(o->key, kv->key) == 0)
				why = "is given more than once";
		if (why) { /* the key as shown in the answer: only for an answer (it cost every read) */
			char shown[64];
			egs_strlcpy(shown, kv->key, sizeof(shown));
			egs_utf8_sanitize(shown);
			egs_reply_invalid(&r, shown, "%s %s", shown, why);
			goto out;
		}
	}
	if (srv->follower && egs_forward_wanted(r.method, r.path)) { /* writes go to the leader (forward.c) */
		egs_forward(&r);
		goto out;
	}
	bool known;
	const struct egs_route *rt = egs_route_find(r.method, r.path, &known);
	if (!rt && !known && egs_portal_serve(srv->portal, &r)) /* the portal's files and routes (portal.h) */
		goto out;
	if (!rt) {
		if (known)
			egs_reply_err(&r, EGS_ERR_METHOD, NULL, NULL, "%s is not allowed on %s",
				      method_name(r.method), r.path);
		else
			egs_reply_err(&r, EGS_ERR_NOT_FOUND, "ROUTE_NOT_FOUND", NULL, "no route %s", r.path);
		goto out;
	}
	if (!rt->public && !egs_authenticate(&r))
		goto out;
	if (!read_body(&r) || !egs_body_check(&r, method_name(r.method), rt->path))
		goto out;
	rt->fn(&r);
out:
	EGS_ASSERT(r.hq == NULL); /* every handler replies exactly once (or takes the request) */
	json_decref(r.body);
	if (!query_in_arena)
		evhttp_clear_headers(&r.query);
}

