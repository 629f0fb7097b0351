/*
 * reload.c: what egsd does when a turn's commit fails (disk full, I/O error) instead of exiting.
 *
 * The turn's changes are already applied in memory when the commit runs (group commit), and the
 * store rolled its transaction back.  So the model is rebuilt from the store, as at a start, and
 * swapped in: nothing of the failed turn stays.  What the store does not hold (runtime-only fields:
 * agents' last contact, GPU samples, quarantines, the check port, shared attachments, GPR phase
 * timers) is carried over from the old model by key, so a reload does not make healthy nodes look
 * silent.  The planner's cache is reset and the workspace policies parsed again.  Early-release
 * holds and active alerts come back from the store as at a restart (so an alert raised or resolved
 * in the failed turn is neither); webhook messages of the failed turn were never handed to the
 * worker (outbox.h).
 *
 * Every reply held for the turn is answered 507 STORAGE_FULL (or 503 STORE_UNAVAILABLE for another
 * write error): nothing of what they would have acknowledged is saved.  With PostgreSQL a turn's
 * failure may come after it was sent, while the loop gathered the next turn (store_pg_commit.c):
 * then the failed turn's replies wait in srv->waiting and the next turn's in srv->held, and both are
 * refused (egs_server_turn_failed), as is a read that may have shown the failed turn's changes; the
 * reload drops both turns' changes.
 */
#include "server/server.h"

#include "core/aging.h"
#include "core/sched.h"
#include "core/util.h"
#include "server/observe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void carry_node(const struct egs_node *old, struct egs_node *n)
{
	n->last_heartbeat = old->last_heartbeat;
	n->free_since = old->free_since;
	n->quarantine_until = old->quarantine_until;
	n->failure_noted = old->failure_noted;
	egs_strlcpy(n->address, old->address, sizeof(n->address));
	n->sharing = old->sharing;
	egs_strlist_copy(&n->attached_shared, &old->attached_shared);
	egs_node_keep_samples(n, old);
}

/* g's runtime-only fields from old's GPR of the same id (those of a GPR new to old when none). */
static void carry_gpr(const struct egs_state *old, struct egs_gpr *g, int64_t now)
{
	const struct egs_gpr *o = egs_state_gpr(old, g->id);
	g->phase_since = o && o->state == g->state ? o->phase_since : now;
	g->idle_since = o ? o->idle_since : 0;
	g->est_start = o ? o->est_start : 0;
}

bool egs_carry_gprs(const struct egs_state *old, struct egs_state *fresh, size_t *pos, size_t max, int64_t now)
{
	void *v;
	for (size_t n = 0; n < max; n++) {
		if (!egs_map_next(&fresh->gprs, pos, NULL, &v))
			return true;
		carry_gpr(old, v, now);
	}
	return false;
}

/* Copies the runtime-only fields of old's objects into fresh's objects of the same key (its GPRs'
 * too unless gprs_carried: egs_carry_gprs did). */
static void carry_runtime(const struct egs_state *old, struct egs_state *fresh, int64_t now, bool gprs_carried)
{
	void *v;
	for (size_t i = 0; egs_map_next(&fresh->clusters, &i, NULL, &v);) {
		struct egs_cluster *c = v;
		const struct egs_cluster *o = egs_state_cluster(old, c->name);
		if (o)
			c->last_seen = o->last_seen;
	}
	for (size_t i = 0; egs_map_next(&fresh->nodes, &i, NULL, &v);) {
		struct egs_node *n = v;
		const struct egs_node *o = egs_state_node(old, n->cluster, n->name);
		if (o)
			carry_node(o, n);
	}
	size_t pos = 0;
	if (!gprs_carried)
		egs_carry_gprs(old, fresh, &pos, SIZE_MAX, now);
}

enum egs_err egs_server_reload(struct egs_server *srv)
{
	if (!srv->follower && !strcmp(egs_store_kind(srv->store), "postgres")) /* not under its lease (replica_load.c) */
		return egs_full_load_wait(srv);
	struct egs_state *fresh = egs_malloc(sizeof(*fresh));
	egs_state_init(fresh, &srv->state_cfg);
	egs_aging_cutoff(fresh, egs_now(srv));
	enum egs_err err = egs_store_load(srv->store, fresh);
	if (err) {
		egs_state_cleanup(fresh);
		free(fresh);
		return err;
	}
	return egs_server_swap_model(srv, fresh, false);
}

enum egs_err egs_server_swap_model(struct egs_server *srv, struct egs_state *fresh, bool gprs_carried)
{
	carry_runtime(&srv->st, fresh, egs_now(srv), gprs_carried);
	fresh->cfg = srv->st.cfg;
	fresh->audit_last_id = srv->st.audit_last_id; /* ids given out stay given out (audit.h) */
	/* A walk in progress points into the old model: end it while that model still exists. */
	if (egs_sched_walking(srv->plan))
		egs_sched_abort(srv->plan);
	event_del(srv->slice_ev);
	egs_plan_free(srv->plan);
	srv->plan = egs_plan_new();
	struct egs_state *old = egs_malloc(sizeof(*old));
	*old = srv->st; /* the state holds no pointer to itself: a move is a copy */
	srv->st = *fresh;
	free(fresh);
	egs_state_free_later(old); /* nothing points into it now; freeing 200,000 GPRs took 0.7 s of the loop */
	egs_views_changed(srv); /* the fresh model gives out view stamps from 1 again (gpr_view.c) */
	srv->planned_gen = srv->st.generation - 1; /* plan again on the next turn */
	srv->next_wake = 0;
	if (srv->obs)
		egs_alerts_restore(&srv->obs->alerts, &srv->st, srv->log);
	return egs_policy_load_workspaces(srv);
}

/* Answers the replies of a failed turn: the held ones, and with waiting the waiting ones whose
 * writes come after write number after. */
static void fail_replies(struct egs_server *srv, enum egs_err err, bool waiting, uint64_t after)
{
	bool full = err == EGS_ERR_STORAGE_FULL;
	enum egs_err as = full ? EGS_ERR_STORAGE_FULL : EGS_ERR_UNAVAILABLE;
	const char *key = full ? "STORAGE_FULL" : "STORE_UNAVAILABLE";
	const char *msg = full ? "the disk of egsd's store is full: nothing of this request was saved; retry when "
				 "space is back"
			       : "egsd's store could not write: nothing of this request was saved; retry later";
	egs_server_fail_held(srv, as, key, msg);
	if (waiting)
		egs_server_fail_waiting(srv, after, as, key, msg);
}

void egs_server_turn_failed(struct egs_server *srv, enum egs_err err, uint64_t after)
{
	egs_durable_forget(srv, after); /* no read may count the lost writes' changes durable */
	fail_replies(srv, err, true, after);
	egs_server_store_failed(srv, err);
	if (egs_store_deposed(srv->store)) {
		egs_server_step_down(srv); /* another egsd leads (or will): nothing to reload */
		return;
	}
	if ((err = egs_server_reload(srv))) {
		fprintf(srv->log, "level=fatal msg=\"store commit failed and the store cannot be read again: %s; exiting\"\n",
			egs_err_str(err));
		fflush(srv->log);
		_exit(70);
	}
	egs_server_send_durable(srv); /* the replies failed above */
}

void egs_server_store_failed(struct egs_server *srv, enum egs_err err)
{
	fail_replies(srv, err, false, 0);
	srv->store_failures++;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if ((int64_t)ts.tv_sec != srv->store_fail_logged) { /* at most one line a second */
		srv->store_fail_logged = (int64_t)ts.tv_sec;
		fprintf(srv->log,
			"level=error msg=\"store commit failed; the turn's writes were refused and the model "
			"reloaded from the store\" error=\"%s\" failures=%llu\n",
			egs_err_str(err), (unsigned long long)srv->store_failures);
		fflush(srv->log);
		srv->store_failures = 0;
	}
}
