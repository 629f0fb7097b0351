/*
 * api_events.c: Kubernetes-style events: the filtered, paged listing and the server-sent event
 * stream.
 *
 *   GET /api/v1/events        ?workspace|sliceName= &gprId= &node= [&clusterName=] &type= &reason= &kind=
 *                             &since= &until= (RFC 3339, or a duration meaning "that long ago")
 *                             &limit= (1..1000, default 100) &continue= (the previous page's token)
 *   GET /api/v1/events/watch  the same filters, as text/event-stream; `Last-Event-ID` or
 *                             ?resourceVersion= replays the retained events after that id first.
 *
 * Newest first; events older than the retention TTL are not listed.  A caller sees the events of
 * the workspaces in its scope, and global admins also those tied to no workspace.  A stream is a
 * request held open (like an agent's long poll): committed events are written to it after each
 * commit; a comment every 15 s keeps proxies from closing it; a client that stops reading (4 MiB
 * behind) or goes away is dropped, its close callback removing it.
 */
#include "server/observe.h"

#include "core/util.h"
#include "server/conn.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WATCHERS 256
#define MAX_BEHIND (4 * 1024 * 1024)

struct ev_filter {
	char workspace[EGS_NAME_MAX];
	char gpr[EGS_ID_MAX];
	char node[EGS_NAME_MAX];
	char cluster[EGS_NAME_MAX];
	char type[8];
	char reason[EGS_NAME_MAX];
	char kind[16];
	int64_t since, until; /* 0 = unbounded */
};

struct egs_watcher {
	struct egs_server *srv;
	struct egs_hreq *req; /* the stream (conn.h) */
	struct ev_filter f;
	struct egs_principal who;
	uint64_t sent;
};

/* One optional query string field copied into out; 422 naming it when too long. */
static bool q_str(struct egs_req *r, const char *name, const char *alias, char *out, size_t outsz)
{
	const char *v = egs_query(r, name);
	if (!v && alias)
		v = egs_query(r, alias);
	out[0] = '\0';
	if (!v)
		return true;
	if (!*v || strlen(v) >= outsz) {
		egs_reply_invalid(r, name, "%s must be 1 to %zu characters", name, outsz - 1);
		return false;
	}
	egs_strlcpy(out, v, outsz);
	return true;
}

static bool parse_filter(struct egs_req *r, struct ev_filter *f, int64_t now)
{
	memset(f, 0, sizeof(*f));
	if (!q_str(r, "workspace", "sliceName", f->workspace, sizeof(f->workspace)) ||
	    !q_str(r, "gprId", NULL, f->gpr, sizeof(f->gpr)) || !q_str(r, "node", "gpuNodeName", f->node, sizeof(f->node)) ||
	    !q_str(r, "clusterName", NULL, f->cluster, sizeof(f->cluster)) ||
	    !q_str(r, "type", NULL, f->type, sizeof(f->type)) || !q_str(r, "reason", NULL, f->reason, sizeof(f->reason)) ||
	    !q_str(r, "kind", NULL, f->kind, sizeof(f->kind)) || !egs_query_time(r, "since", now, &f->since) ||
	    !egs_query_time(r, "until", now, &f->until))
		return false;
	if (f->type[0] && strcmp(f->type, "Normal") != 0 && strcmp(f->type, "Warning") != 0) {
		egs_reply_invalid(r, "type", "type must be Normal or Warning");
		return false;
	}
	return true;
}

/* Does e concern node (name, optionally of cluster)?  Node events name "cluster/name". */
static bool about_node(const struct egs_event *e, const char *cluster, const char *node)
{
	if (strcmp(e->object_kind, "Node") != 0)
		return false;
	const char *slash = strchr(e->object_name, '/');
	if (!slash)
		return false;
	if (cluster[0] && (strlen(cluster) != (size_t)(slash - e->object_name) ||
			   strncmp(e->object_name, cluster, (size_t)(slash - e->object_name)) != 0))
		return false;
	return !node[0] || !strcmp(slash + 1, node);
}

static bool matches(const struct ev_filter *f, const struct egs_event *e)
{
	if (f->workspace[0] && strcmp(e->workspace, f->workspace) != 0)
		return false;
	/* A GPR's events, and alerts on the nodes it holds (their message names it). */
	if (f->gpr[0] && strcmp(e->object_name, f->gpr) != 0 &&
	    !(!strcmp(e->object_kind, "Node") && e->message && strstr(e->message, f->gpr)))
		return false;
	if ((f->node[0] || f->cluster[0]) && !about_node(e, f->cluster, f->node) &&
	    !(f->cluster[0] && !f->node[0] && !strcmp(e->object_kind, "Cluster") && !strcmp(e->object_name, f->cluster)))
		return false;
	if (f->type[0] && strcmp(e->type, f->type) != 0)
		return false;
	if (f->reason[0] && strcmp(e->reason, f->reason) != 0)
		return false;
	if (f->kind[0] && strcmp(e->object_kind, f->kind) != 0)
		return false;
	if (f->since && e->time < f->since)
		return false;
	return !f->until || e->time < f->until;
}

static bool visible(struct egs_server *srv, const struct egs_principal *who, const struct egs_event *e)
{
	struct egs_req scope = { .srv = srv, .who = *who };
	return egs_obs_ws_visible(&scope, e->workspace);
}

static const struct egs_event *ring_at(const struct egs_state *st, size_t i)
{
	return st->events[(st->events_head + i) % st->cfg.event_retention];
}

static void events_list(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	struct egs_state *st = &srv->st;
	int64_t now = egs_now(srv);
	struct ev_filter f;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)) || !parse_filter(r, &f, now))
		return;
	const char *lim = egs_query(r, "limit"), *cont = egs_query(r, "continue");
	long limit = 100;
	long long before = INT64_MAX;
	char *end;
	if (lim) {
		limit = strtol(lim, &end, 10);
		if (!*lim || *end || limit < 1 || limit > 1000) {
			egs_reply_invalid(r, "limit", "limit must be 1 to 1000");
			return;
		}
	}
	if (cont) {
		before = strtoll(cont, &end, 10);
		if (!*cont || *end || before < 1) {
			egs_reply_invalid(r, "continue", "continue must be the token of a previous page");
			return;
		}
	}
	int64_t oldest = now - srv->obs->cfg.event_ttl_s;
	json_t *items = json_array();
	json_t *next = json_null();
	for (size_t i = st->events_len; i-- > 0;) {
		const struct egs_event *e = ring_at(st, i);
		if (e->id >= before || e->time < oldest || !matches(&f, e) || !visible(srv, &r->who, e))
			continue;
		if ((long)json_array_size(items) == limit) {
			char tok[24];
			snprintf(tok, sizeof(tok), "%lld", (long long)json_integer_value(
								json_object_get(json_array_get(items, (size_t)limit - 1), "id")));
			json_decref(next);
			next = json_string(tok);
			break;
		}
		json_array_append_new(items, egs_json_event(e));
	}
	egs_reply_ok(r, json_pack("{s:o, s:o}", "items", items, "continue", next));
}

/* ---- streams ---- */

static void watcher_free(struct egs_watcher *w)
{
	egs_vec_remove(&w->srv->obs->watchers, w);
	free(w);
}

/* Ends a stream: from our side (shutdown or a client too far behind), or because its connection
 * ended (the front's close callback). */
static void watcher_end(void *arg)
{
	struct egs_watcher *w = arg;
	egs_hreq_stream_end(w->req);
	watcher_free(w);
}

static bool behind(const struct egs_watcher *w)
{
	return egs_hreq_behind(w->req) > MAX_BEHIND;
}

static void send_text(struct egs_watcher *w, const char *text)
{
	egs_hreq_stream_chunk(w->req, text, strlen(text));
}

/* Writes e as one server-sent event; false when the client is too far behind (then dropped). */
static bool send_event(struct egs_watcher *w, const struct egs_event *e)
{
	if (behind(w)) {
		watcher_end(w);
		return false;
	}
	json_t *o = egs_json_event(e);
	char *data = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	struct evbuffer *b = evbuffer_new();
	EGS_ASSERT(b && data);
	evbuffer_add_printf(b, "id: %lld\ndata: %s\n\n", (long long)e->id, data);
	size_t len = evbuffer_get_length(b);
	egs_hreq_stream_chunk(w->req, evbuffer_pullup(b, (ev_ssize_t)len), len);
	evbuffer_free(b);
	free(data);
	w->sent++;
	return true;
}

static void events_watch(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	struct egs_state *st = &srv->st;
	struct egs_obs *ob = srv->obs;
	struct ev_filter f;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)) || !parse_filter(r, &f, egs_now(srv)))
		return;
	const char *rv = egs_query(r, "resourceVersion");
	if (!rv)
		rv = egs_req_header(r, "Last-Event-ID");
	long long after = -1;
	if (rv) {
		char *end;
		after = strtoll(rv, &end, 10);
		if (!*rv || *end || after < 0) {
			egs_reply_invalid(r, "resourceVersion", "resourceVersion (Last-Event-ID) must be an event id");
			return;
		}
	}
	if (ob->watchers.len >= MAX_WATCHERS || srv->stopping) {
		egs_reply_err(r, EGS_ERR_BUSY, "TOO_MANY_WATCHERS", NULL, "egsd serves at most %d event streams at once",
			      MAX_WATCHERS);
		return;
	}
	struct egs_watcher *w = egs_calloc(1, sizeof(*w));
	w->srv = srv;
	w->req = r->hq;
	w->f = f;
	w->who = r->who;
	w->who.key = NULL; /* the key may be deleted while the stream lives */
	egs_vec_push(&ob->watchers, w);
	egs_hreq_content_type(r->hq, "text/event-stream");
	egs_hreq_header_add(r->hq, "Cache-Control", "no-cache");
	egs_hreq_header_add(r->hq, "X-Accel-Buffering", "no");
	egs_hreq_stream_start(r->hq, 200);
	egs_hreq_on_close(r->hq, watcher_end, w);
	egs_obs_request(srv, "GET", r->path, 200, r->t0_us);
	r->hq = NULL; /* held: the stream is ours now */
	send_text(w, "retry: 3000\n: egs event stream\n\n");
	if (after < 0)
		return;
	if (egs_store_written(srv->store) > egs_store_durable(srv->store))
		egs_durable_wait(srv); /* the ring may hold events of a commit not yet durable */
	for (size_t i = 0; i < st->events_len; i++) {
		const struct egs_event *e = ring_at(st, i);
		if (e->id > after && matches(&w->f, e) && visible(srv, &w->who, e) && !send_event(w, e))
			return;
	}
}

void egs_events_broadcast(struct egs_server *srv, const struct egs_event *e)
{
	struct egs_vec *ws = &srv->obs->watchers;
	for (size_t i = ws->len; i-- > 0;) {
		struct egs_watcher *w = ws->items[i];
		if (matches(&w->f, e) && visible(srv, &w->who, e))
			send_event(w, e); /* may drop w: the walk goes backwards over a swap-remove vector */
	}
}

void egs_events_ping(struct egs_server *srv)
{
	struct egs_vec *ws = &srv->obs->watchers;
	for (size_t i = ws->len; i-- > 0;) {
		struct egs_watcher *w = ws->items[i];
		if (behind(w))
			watcher_end(w);
		else
			send_text(w, ": keep-alive\n\n");
	}
}

void egs_events_close_all(struct egs_server *srv)
{
	struct egs_vec *ws = &srv->obs->watchers;
	while (ws->len)
		watcher_end(ws->items[ws->len - 1]);
}

const struct egs_route egs_routes_events[] = {
	{ EVHTTP_REQ_GET, "/api/v1/events", events_list, false },
	{ EVHTTP_REQ_GET, "/api/v1/events/watch", events_watch, false },
	{ 0, NULL, NULL, false },
};
