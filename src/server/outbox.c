/*
 * outbox.c: the webhook outbox; see outbox.h.
 *
 * A stored message's spec is canonical JSON {"url", "workspace", "eventId", "attempts", "nextTry",
 * "payload"}: payload is the exact body text the worker posts (it holds the idempotency key), so a
 * message resumed after a restart is byte for byte the one first tried.  nextTry is wall-clock
 * seconds; a resumed message is due at max(0, nextTry - now), capped at a minute so a clock that
 * moved back (or the dev clock) cannot park it.
 */
#include "server/outbox.h"

#include "core/util.h"
#include "server/observe.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESUME_DELAY_MAX_MS 60000

static bool notifiable(const struct egs_event *e)
{
	return e->workspace[0] && e->count == 1 &&
	       (!strcmp(e->object_kind, "GPR") || egs_alert_is_alert_reason(e->reason));
}

/* The Slack-compatible body of e's notification (caller frees), or NULL when e is not UTF-8. */
static char *payload(const struct egs_event *e, const char *key)
{
	bool warn = !strcmp(e->type, "Warning");
	char text[800], ts[32];
	egs_time_format(e->time, ts, sizeof(ts));
	snprintf(text, sizeof(text), "%s *%s* %s %s: %s", warn ? ":warning:" : ":information_source:", e->reason,
		 e->object_kind, e->object_name, e->message ? e->message : "");
	json_t *fields = json_pack("[{s:s, s:s, s:b}, {s:s, s:s, s:b}, {s:s, s:s, s:b}, {s:s, s:s, s:b}]", "title",
				   "Workspace", "value", e->workspace, "short", 1, "title", "Object", "value",
				   e->object_name, "short", 1, "title", "Type", "value", e->type, "short", 1, "title",
				   "Time", "value", ts, "short", 1);
	json_t *msg = json_pack("{s:s, s:s, s:[{s:s, s:s, s:s, s:s, s:o, s:I}], s:o, s:s}", "text", text, "username",
				"EGS", "attachments", "color", warn ? "danger" : "good", "fallback", text, "title",
				e->reason, "text", e->message ? e->message : "", "fields", fields, "ts",
				(json_int_t)e->time, "egsEvent", egs_json_event(e), "idempotencyKey", key);
	char *body = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	return body;
}

static char *spec_text(const char *url, const char *ws, int64_t event_id, int attempts, int64_t next_try,
		       const char *body)
{
	json_t *o = json_pack("{s:s, s:s, s:I, s:i, s:I, s:s}", "url", url, "workspace", ws, "eventId",
			      (json_int_t)event_id, "attempts", attempts, "nextTry", (json_int_t)next_try, "payload", body);
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	return text;
}

/* Stores e's message (if its workspace has a webhook) and remembers its key for after the commit. */
static void queue_event(struct egs_server *srv, const struct egs_event *e, int64_t now)
{
	const struct egs_workspace *w = egs_state_workspace(&srv->st, e->workspace);
	if (!w || !w->webhook_url || !notifiable(e))
		return;
	unsigned char rnd[16];
	char key[EGS_NOTIFY_KEY_MAX], hex[33];
	randombytes_buf(rnd, sizeof(rnd));
	sodium_bin2hex(hex, sizeof(hex), rnd, sizeof(rnd));
	snprintf(key, sizeof(key), "egs-%s", hex);
	char *body = payload(e, key);
	char *spec = body ? spec_text(w->webhook_url, w->name, e->id, 0, now, body) : NULL;
	free(body);
	if (!spec)
		return; /* not valid UTF-8: the event log still has it */
	struct egs_doc *d = egs_calloc(1, sizeof(*d));
	egs_strlcpy(d->name, key, sizeof(d->name));
	egs_strlcpy(d->project, w->project, sizeof(d->project));
	d->spec = spec;
	d->created_at = d->updated_at = now;
	EGS_ASSERT(egs_state_add_doc(&srv->st, EGS_KIND_OUTBOX, d) == EGS_OK);
	egs_state_touch(&srv->st, EGS_KIND_OUTBOX, d);
	egs_vec_push(&srv->obs->outbox_new, egs_strdup(key));
}

static void clear_new(struct egs_obs *ob)
{
	for (size_t i = 0; i < ob->outbox_new.len; i++)
		free(ob->outbox_new.items[i]);
	ob->outbox_new.len = 0;
}

void egs_outbox_before_commit(struct egs_server *srv, int64_t now)
{
	struct egs_obs *ob = srv->obs;
	clear_new(ob); /* left by a turn whose commit failed: its messages were never stored */
	if (!ob->notify)
		return;
	size_t n = srv->st.new_events.len; /* queue_event records no events */
	for (size_t i = 0; i < n; i++)
		queue_event(srv, srv->st.new_events.items[i], now);
}

/* Hands stored message d to the worker; false when d does not parse. */
static bool send_doc(struct egs_server *srv, const struct egs_doc *d, int64_t now)
{
	json_t *o = json_loads(d->spec, 0, NULL);
	const char *url, *ws, *body;
	json_int_t event_id, next_try;
	int attempts;
	bool ok = !json_unpack(o, "{s:s, s:s, s:I, s:i, s:I, s:s}", "url", &url, "workspace", &ws, "eventId",
			       &event_id, "attempts", &attempts, "nextTry", &next_try, "payload", &body);
	if (ok) {
		int64_t delay = next_try > now ? (next_try - now) * 1000 : 0;
		egs_notify_send(srv->obs->notify, url, ws, d->name, body, attempts,
				delay < RESUME_DELAY_MAX_MS ? delay : RESUME_DELAY_MAX_MS);
	}
	json_decref(o);
	return ok;
}

void egs_outbox_committed(struct egs_server *srv)
{
	struct egs_obs *ob = srv->obs;
	int64_t now = egs_now(srv);
	for (size_t i = 0; ob->notify && i < ob->outbox_new.len; i++) {
		const struct egs_doc *d = egs_state_doc(&srv->st, EGS_KIND_OUTBOX, ob->outbox_new.items[i]);
		if (d)
			send_doc(srv, d, now);
	}
	clear_new(ob);
}

static int64_t event_id_of(const struct egs_doc *d)
{
	json_t *o = json_loads(d->spec, 0, NULL);
	json_int_t id = 0;
	json_unpack(o, "{s:I}", "eventId", &id);
	json_decref(o);
	return id;
}

struct pending {
	int64_t event_id;
	struct egs_doc *doc;
};

static int oldest_first(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;
	if (x->event_id != y->event_id)
		return x->event_id < y->event_id ? -1 : 1;
	return strcmp(x->doc->name, y->doc->name);
}

void egs_outbox_resume(struct egs_server *srv)
{
	struct egs_map *m = &srv->st.outbox;
	int64_t now = egs_now(srv);
	size_t n = 0;
	void *v;
	if (!srv->obs->notify || !m->len)
		return;
	struct pending *all = egs_malloc(m->len * sizeof(*all));
	for (size_t i = 0; egs_map_next(m, &i, NULL, &v);)
		all[n++] = (struct pending){ event_id_of(v), v };
	qsort(all, n, sizeof(*all), oldest_first);
	for (size_t i = 0; i < n; i++) {
		if (send_doc(srv, all[i].doc, now))
			continue;
		fprintf(srv->log, "level=warn msg=\"stored webhook message dropped: it does not parse\" key=%s\n",
			all[i].doc->name);
		egs_state_del(&srv->st, EGS_KIND_OUTBOX, all[i].doc);
		egs_server_changed(srv);
	}
	fprintf(srv->log, "level=info msg=\"webhook outbox resumed\" messages=%zu\n", n);
	free(all);
}

/* ---- results ---- */

static struct egs_ws_delivery *delivery(struct egs_obs *ob, const char *ws)
{
	struct egs_ws_delivery *d = egs_map_get(&ob->webhook_ws, ws);
	if (!d && ob->webhook_ws.len < 100000) {
		d = egs_calloc(1, sizeof(*d));
		egs_strlcpy(d->workspace, ws, sizeof(d->workspace));
		egs_map_put(&ob->webhook_ws, d->workspace, d);
	}
	return d;
}

/* A failed attempt to be retried: the stored message gets its attempts and next try. */
static void note_retry(struct egs_server *srv, const struct egs_notify_result *res, int64_t now)
{
	struct egs_doc *d = egs_state_doc(&srv->st, EGS_KIND_OUTBOX, res->key);
	json_t *o = d ? json_loads(d->spec, 0, NULL) : NULL;
	const char *url, *ws, *body;
	json_int_t event_id, next_try;
	int attempts;
	if (o && !json_unpack(o, "{s:s, s:s, s:I, s:i, s:I, s:s}", "url", &url, "workspace", &ws, "eventId", &event_id,
			      "attempts", &attempts, "nextTry", &next_try, "payload", &body)) {
		char *spec = spec_text(url, ws, event_id, res->attempts, now + (res->retry_ms + 999) / 1000, body);
		if (spec) {
			free(d->spec);
			d->spec = spec;
			d->updated_at = now;
			egs_state_touch(&srv->st, EGS_KIND_OUTBOX, d);
			egs_server_changed(srv);
		}
	}
	json_decref(o);
}

void egs_outbox_done(void *arg, const struct egs_notify_result *res)
{
	struct egs_server *srv = arg;
	struct egs_obs *ob = srv->obs;
	int64_t now = egs_now(srv);
	ob->webhooks[res->outcome]++;
	if (res->outcome == EGS_NOTIFY_RETRY) {
		note_retry(srv, res, now);
		return;
	}
	struct egs_doc *doc = egs_state_doc(&srv->st, EGS_KIND_OUTBOX, res->key);
	if (doc) { /* delivered, failed for good or dropped: it leaves the outbox */
		egs_state_del(&srv->st, EGS_KIND_OUTBOX, doc);
		egs_server_changed(srv);
	}
	struct egs_ws_delivery *d = delivery(ob, res->tag);
	if (res->outcome == EGS_NOTIFY_DELIVERED) {
		if (d) {
			d->delivered++;
			d->last_ok = now;
		}
		return;
	}
	if (d) {
		d->failed++;
		d->last_fail = now;
		egs_strlcpy(d->last_error, res->error, sizeof(d->last_error));
	}
	if (!egs_state_workspace(&srv->st, res->tag))
		return;
	egs_state_event_repeat(&srv->st, now, 600, "Warning", "NotificationFailed", "Workspace", res->tag, res->tag,
			       "webhook notification %s after %d attempt(s): %s",
			       res->outcome == EGS_NOTIFY_DROPPED ? "dropped" : "failed", res->attempts, res->error);
	egs_server_changed(srv);
}
