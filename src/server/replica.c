/*
 * replica.c: an egsd that does not lead (docs/ha.md, docs/internals/store.md).
 *
 * Several egsd share one PostgreSQL database; the one holding the leader lock leads (store_pg_lead.c).
 * The others are followers: they listen, answer reads from their own model, send writes and the
 * agents' calls to the leader (forward.c), and follow the store: every FOLLOW_MS a follower tries
 * the leader lock once (the lock is free when the leader's session ended) and reads the leader's
 * commit counter, meta leader.turn, which every committed turn of the leader moves on (one more
 * statement in the turn's pipeline: no extra round trip).  When it moved past the turn of the last
 * load, the follower applies the change log (follow.c), or, when it cannot, loads the whole model
 * again (one snapshot) on a thread of its own (replica_load.c), answering reads from the old model
 * until the new one is swapped in, and sends the events new since to its event streams; it neither
 * catches up nor tries to lead while that load runs.  When it gets the lock and its model is the
 * latest commit's (the store gives the lock back otherwise: the next look loads, the one after
 * leads), it leads: it bootstraps and starts planning and committing.  Nothing is loaded under the
 * lease, so a store of any size can be taken over.
 *
 * A follower never plans, never runs clock-driven transitions and never commits: a turn with local
 * changes (a request that should have been forwarded) is answered 503 and the model reloaded.
 */
#include "server/server.h"

#include "server/audit.h"

#include "core/policy.h"
#include "core/util.h"
#include "server/observe.h"
#include "server/outbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FOLLOW_MS 100
#define PING_EVERY_US (15 * 1000000) /* keep-alives on event streams, as observe.c sends them */

/* The newest event id of the model (0 when none). */
static int64_t newest_event(const struct egs_state *st)
{
	return st->events_len ? st->events[(st->events_head + st->events_len - 1) % st->cfg.event_retention]->id : 0;
}

static void read_secret(struct egs_server *srv)
{
	char *hex = NULL;
	size_t n;
	if (egs_store_meta_get(srv->store, "token_secret", &hex) == EGS_OK && hex &&
	    strlen(hex) == 2 * sizeof(srv->token_secret))
		sodium_hex2bin(srv->token_secret, sizeof(srv->token_secret), hex, strlen(hex), NULL, &n, NULL);
	if (hex)
		sodium_memzero(hex, strlen(hex));
	free(hex);
}

/* What lives in meta, outside the turns: the global limits and the token secret. */
static void read_meta(struct egs_server *srv)
{
	egs_policy_free(srv->policy_global);
	srv->policy_global = NULL;
	if (egs_policy_start(srv))
		fprintf(srv->log, "level=warn msg=\"follower: a stored policy does not parse\"\n");
	read_secret(srv);
}

/* A full load ended (err: its outcome; the model was swapped in unless it failed): streams the
 * events it brought, newer than seen. */
static void model_loaded(struct egs_server *srv, enum egs_err err, int64_t seen)
{
	srv->follow_loads++;
	if (err) {
		fprintf(srv->log, "level=warn msg=\"follower: loading the store failed; serving the last model\" error=\"%s\"\n",
			egs_err_str(err));
		return;
	}
	srv->resync = false;
	read_meta(srv);
	const struct egs_state *st = &srv->st;
	for (size_t i = 0; srv->obs && i < st->events_len; i++) {
		const struct egs_event *e = st->events[(st->events_head + i) % st->cfg.event_retention];
		if (e->id > seen)
			egs_events_broadcast(srv, e);
	}
}

/* Loads the store again: off the loop (replica_load.c; full_load_running swaps it in), or on it when
 * no thread could start. */
static void sync_model(struct egs_server *srv)
{
	if (srv->full_load || egs_full_load_start(srv) == EGS_OK)
		return;
	int64_t seen = newest_event(&srv->st);
	model_loaded(srv, egs_server_reload(srv), seen);
}

/* Whether a full load off the loop is still running; when it just ended, its model is swapped in.
 * Once its thread has ended, each call carries a step of the runtime fields (replica_load.c) and,
 * while more remain, has on_follow called again as soon as the loop has served what waits (the
 * follow timer at 0 until the swap, then at FOLLOW_MS again). */
static bool full_load_running(struct egs_server *srv)
{
	int64_t seen = newest_event(&srv->st);
	enum egs_err err;
	if (!srv->full_load)
		return false;
	if (!egs_full_load_finish(srv, &err)) {
		/* The next step once the loop has looked at its sockets (event_active would run it again
		 * before any read: the carry would hold reads as long as in one go). */
		if (egs_full_load_carrying(srv))
			event_add(srv->follow_ev, &(struct timeval){ 0, 0 });
		return true;
	}
	event_add(srv->follow_ev, &(struct timeval){ 0, FOLLOW_MS * 1000 });
	model_loaded(srv, err, seen);
	return false;
}

/* Applies the leader's turns since the last look from the change log (follow.c), or loads the
 * whole store when that cannot be (a gap in the log, a row it cannot apply, a model to resync). */
static void catch_up(struct egs_server *srv)
{
	enum egs_err err = srv->resync ? EGS_ERR_NOT_FOUND : egs_follow_apply(srv, NULL);
	if (!err) {
		srv->follow_applies++;
		read_meta(srv);
		return;
	}
	if (err != EGS_ERR_NOT_FOUND)
		fprintf(srv->log, "level=warn msg=\"follower: the change log could not be applied; loading the store\" "
				  "error=\"%s\"\n", egs_err_str(err));
	sync_model(srv);
}

/* The lock is ours, and the model is the store's latest snapshot (egs_store_try_lead leads only from
 * a current load): bootstrap and start leading, loading nothing under the lease. */
static void promote(struct egs_server *srv)
{
	enum egs_err err;
	event_del(srv->follow_ev);
	srv->follower = false;
	if ((err = egs_audit_start(srv)) || (err = egs_server_bootstrap(srv))) {
		fprintf(srv->log, "level=fatal msg=\"taking over failed: %s; exiting\"\n",
			egs_err_str(err));
		fflush(srv->log);
		_exit(70);
	}
	egs_store_leader(srv->store, &srv->leader);
	egs_outbox_resume(srv); /* the webhook messages the old leader had not delivered (outbox.h) */
	int64_t now = egs_now(srv);
	for (size_t i = 0; i < srv->st.active.len; i++) /* agents get a full period to converge, as at a start */
		((struct egs_gpr *)srv->st.active.items[i])->phase_since = now;
	egs_views_changed(srv); /* a Provisioning GPR's view shows phase_since (gpr_view.c) */
	srv->st.held_settle = now + srv->st.cfg.heartbeat_timeout_s; /* stored holds wait for the agents (held.h) */
	fprintf(srv->log, "level=info msg=\"this egsd leads now\" epoch=%lld gprs=%zu nodes=%zu\n",
		(long long)srv->leader.epoch, srv->st.gprs.len, srv->st.nodes.len);
	fflush(srv->log);
	srv->next_wake = 0;
	srv->planned_gen = srv->st.generation - 1;
	egs_server_changed(srv); /* plan at once: exits that fell due meanwhile happen now */
}

static void on_follow(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct egs_server *srv = arg;
	struct egs_store_leader l;
	bool led = false;
	if (!srv->follower)
		return;
	bool loading = full_load_running(srv);
	if (loading && egs_full_load_carrying(srv))
		return; /* the next step comes at once; the store is looked at after the swap */
	if (srv->resync) /* the model may hold what the store does not: never lead from it */
		sync_model(srv);
	if (!srv->resync && !loading && egs_store_try_lead(srv->store, srv->advertised, &led) == EGS_OK && led) {
		promote(srv);
		return;
	}
	if (egs_store_leader(srv->store, &l) != EGS_OK)
		return; /* the database is away: serve the last model; healthz shows how old it is */
	srv->synced_us = egs_mono_us();
	bool moved = l.turn != l.loaded_turn || l.epoch != srv->leader.epoch;
	srv->leader = l;
	if (!srv->full_load && (moved || srv->resync)) {
		catch_up(srv);
		egs_store_leader(srv->store, &srv->leader); /* loaded_turn is the new load's */
		srv->leader.turn = l.turn > srv->leader.turn ? l.turn : srv->leader.turn;
	}
}

enum egs_err egs_replica_start(struct egs_server *srv)
{
	enum egs_err err = egs_store_leader(srv->store, &srv->leader);
	srv->synced_us = egs_mono_us();
	if (err || !srv->follower)
		return err;
	read_secret(srv);
	fprintf(srv->log, "level=info msg=\"another egsd leads this database; following it\" leader=%s epoch=%lld\n",
		srv->leader.addr[0] ? srv->leader.addr : "-", (long long)srv->leader.epoch);
	srv->follow_ev = event_new(srv->base, -1, EV_PERSIST, on_follow, srv);
	struct timeval tv = { 0, FOLLOW_MS * 1000 };
	event_add(srv->follow_ev, &tv);
	return EGS_OK;
}

void egs_replica_turn(struct egs_server *srv)
{
	if (egs_state_has_changes(&srv->st)) {
		egs_server_fail_held(srv, EGS_ERR_UNAVAILABLE, "NOT_LEADER",
				     "this egsd follows the leader and writes nothing; nothing was saved");
		egs_state_clear_changes(&srv->st);
		srv->resync = true; /* the model may hold what the store does not */
	}
	egs_server_flush(srv);
}

void egs_replica_tick(struct egs_server *srv)
{
	if (srv->follower) {
		int64_t now = egs_mono_us();
		if (now - srv->pinged_us >= PING_EVERY_US && srv->obs) {
			srv->pinged_us = now;
			egs_events_ping(srv); /* the leader's observability tick does this; a follower has none */
		}
		return;
	}
	if (!srv->stepped_down && egs_store_renew(srv->store) != EGS_OK)
		egs_server_step_down(srv);
}

json_t *egs_replica_health(struct egs_server *srv)
{
	json_t *h = json_pack("{s:s, s:s, s:s, s:I}", "status", "ok", "store", egs_store_kind(srv->store), "role",
			      srv->follower ? "follower" : "leader", "epoch", (json_int_t)srv->leader.epoch);
	if (!srv->follower)
		return h;
	int64_t behind = srv->leader.turn - srv->leader.loaded_turn;
	json_object_set_new(h, "leader", json_string(srv->leader.addr));
	json_object_set_new(h, "behindTurns", json_integer(behind > 0 ? behind : 0));
	json_object_set_new(h, "syncedAgoMs", json_integer((egs_mono_us() - srv->synced_us) / 1000));
	json_object_set_new(h, "fullLoads", json_integer((json_int_t)srv->follow_loads));
	json_object_set_new(h, "appliedCatchUps", json_integer((json_int_t)srv->follow_applies));
	json_object_set_new(h, "loading", json_boolean(srv->full_load != NULL));
	return h;
}
