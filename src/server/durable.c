/*
 * durable.c: replies wait for the fsync that covers what they saw, while the loop goes on
 * (docs/internals/http.md, "Durability overlapped with the next turn").
 *
 * The commit turn (server.c) commits the turn's changes; with SQLite that COMMIT is in the WAL but
 * not yet fsynced, and the store's thread fdatasyncs it apart from the loop (store.h).  The turn's
 * replies wait in srv->waiting, each with the store's write number it waits for (http.c), and the
 * loop reads and plans the next turn meanwhile.  When an fdatasync ends, the store's sync
 * descriptor becomes readable; on_durable then sends every waiting reply whose writes are durable.
 * So a 2xx never leaves before the fsync covering its change, and a read that saw a change not yet
 * durable waits for the same fsync.
 *
 * One fsync is in flight at a time, and no commit is made while it is: the commit turn that comes
 * meanwhile is deferred (server.c) and the requests keep gathering in memory, so each commit and
 * each fsync pays for everything that arrived during the last fsync.  Committing every loop turn
 * instead made many small transactions, each writing whole b-tree pages to the WAL: more CPU per
 * create (measured: 119 against 89-96 us) for no more creates per fsync.  When the fsync ends,
 * on_durable sends its replies and runs the deferred turn, through the commit event: it runs in a
 * loop pass that finds no connection ready, so the requests that the sent replies brought back join
 * the commit.  Committing at once here instead (tenth session) started the next fsync 1 ms sooner
 * at the median, but made more, smaller commits whose fsyncs were slower, and the creates' p99 was
 * worse (README, "Where a deep-queue create's time goes").
 *
 * PostgreSQL (store_pg_commit.c): the commit turn sends the turn and the loop goes on the same way;
 * the store's descriptor is readable when the turn's answers come, and the turn's write counts
 * durable once its COMMIT answered (the lease checked then).  One turn is in flight at a time: the
 * next is deferred as above, so it is sent with all that came while the last one ran.  A turn that
 * failed after it was sent is told here: its replies waiting in srv->waiting, and the deferred turn's
 * held ones, are answered 507/503 and the model reloaded (egs_server_turn_failed, reload.c).  Any
 * other use of the session (the lease's renewal, a read of finished GPRs, a meta write) reads the
 * turn's answers first, waiting, and makes the descriptor readable: the loop takes that news at its
 * next turn (the tick at once, after the lease's renewal).
 *
 * A failed fsync: egsd cannot know which of the WAL's pages reached the disk, and a later fsync
 * that succeeds proves nothing about them (the kernel may have dropped the failed pages), so it
 * exits 70 at once without sending what waits, as PostgreSQL does after an fsync failure; the
 * restart loads what the disk holds.
 *
 * Shown: a status read whose reply shows only durable changes goes out at once, even while other
 * changes wait for their commit or fsync (docs/internals/http.md, "Reads").  Every change of the
 * model moves the state's change clock (state.h view_clock), and a commit takes every change made
 * before it; so egs_durable_mark pairs the clock at each commit with its write number, and once the
 * store says that write is durable, every change made at or before that clock is on disk: that
 * clock is srv->shown.upto.  A kept view (gpr_view.c) knows the clock of the last change it shows;
 * at or below upto, it waits for nothing.  The pairs are made only for a commit that took the
 * turn's changes and succeeded (so they rise in both numbers), are dropped when a turn sent to the
 * store fails (egs_durable_forget: PostgreSQL then counts the lost write ended), and start again
 * when the model is replaced (egs_durable_shown_reset: a reloaded model's clock starts again, and
 * what it holds is durable once the writes made so far are).
 */
#include "server/server.h"

#include "server/observe.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

void egs_durable_failed(struct egs_server *srv)
{
	fprintf(srv->log, "level=fatal msg=\"fsync of the store failed: what was committed since the last durable "
			  "write may be lost; exiting without acknowledging it\" waiting=%zu\n",
		srv->waiting.len);
	fflush(srv->log);
	_exit(70);
}

void egs_durable_poll(struct egs_server *srv)
{
	uint64_t before = egs_store_durable(srv->store);
	enum egs_err err = egs_store_sync_done(srv->store);
	if (err == EGS_ERR_IO)
		egs_durable_failed(srv);
	if (err) /* a turn sent to PostgreSQL failed: its replies, and the next turn's, are refused */
		egs_server_turn_failed(srv, err, before);
	egs_server_send_durable(srv);
	if (!srv->turn_deferred || srv->stepped_down)
		return;
	if (egs_store_durable(srv->store) < egs_store_written(srv->store)) {
		/* A write outside a turn came during the fsync (the tick's event pruning, a meta set): one
		 * more fsync, and the deferred turn after it. */
		egs_store_sync(srv->store);
		return;
	}
	if (egs_store_commit_held(srv->store))
		return; /* a catch-up of the WAL runs: its end is told through the same descriptor */
	srv->turn_deferred = false; /* the turn that gathered meanwhile: commit it now */
	if (!event_pending(srv->commit_ev, EV_TIMEOUT, NULL))
		event_active(srv->commit_ev, EV_TIMEOUT, 0);
}

static void on_durable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	egs_durable_poll(arg);
}

bool egs_durable_turn_leaves(const struct egs_server *srv)
{
	const struct egs_obs *ob = srv->obs;
	return ob && ((srv->st.new_events.len && ob->watchers.len) || ob->outbox_new.len);
}

void egs_durable_start(struct egs_server *srv)
{
	int fd = egs_store_sync_fd(srv->store);
	if (fd < 0)
		return;
	/* Priority 0 (the highest): replies whose fsync ended go out before more requests are read. */
	srv->durable_ev = event_new(srv->base, fd, EV_READ | EV_PERSIST, on_durable, srv);
	EGS_ASSERT(srv->durable_ev && event_priority_set(srv->durable_ev, 0) == 0);
	event_add(srv->durable_ev, NULL);
}

void egs_durable_wait(struct egs_server *srv)
{
	uint64_t before = egs_store_durable(srv->store);
	enum egs_err err = egs_store_sync_wait(srv->store);
	if (err == EGS_ERR_IO)
		egs_durable_failed(srv);
	if (err)
		egs_server_turn_failed(srv, err, before);
	egs_server_send_durable(srv);
}

enum egs_err egs_durable_settle(struct egs_server *srv)
{
	enum egs_err err = egs_store_sync_wait(srv->store);
	if (err == EGS_ERR_IO)
		egs_durable_failed(srv);
	if (!err)
		egs_server_send_durable(srv);
	return err;
}

void egs_durable_stop(struct egs_server *srv)
{
	if (srv->durable_ev)
		event_free(srv->durable_ev);
	srv->durable_ev = NULL;
}

/* Appends the pair (clock, write): the ring is short (a mark waits for one fsync, or one PostgreSQL
 * turn, and the next commit waits for that), so when full the newest pair replaces the last one,
 * which only makes reads wait for a later write. */
static void mark_push(struct egs_server *srv, uint64_t clock, uint64_t write)
{
	size_t n = srv->shown.len;
	if (n == EGS_SHOWN_MARKS)
		n--;
	srv->shown.mark[n].clock = clock;
	srv->shown.mark[n].write = write;
	srv->shown.len = n + 1;
}

void egs_durable_mark(struct egs_server *srv)
{
	mark_push(srv, srv->st.view_clock, egs_store_written(srv->store));
}

void egs_durable_forget(struct egs_server *srv, uint64_t after)
{
	while (srv->shown.len && srv->shown.mark[srv->shown.len - 1].write > after)
		srv->shown.len--;
}

void egs_durable_shown_reset(struct egs_server *srv)
{
	srv->shown.len = 0;
	srv->shown.upto = 0;
	srv->shown.prices = 0; /* an older change, of a write the mark below covers */
	mark_push(srv, srv->st.view_clock, egs_store_written(srv->store));
}

uint64_t egs_durable_shown(struct egs_server *srv)
{
	if (srv->follower || srv->stepped_down)
		return 0;
	uint64_t durable = egs_store_durable(srv->store);
	size_t i = 0;
	while (i < srv->shown.len && srv->shown.mark[i].write <= durable)
		srv->shown.upto = srv->shown.mark[i++].clock;
	if (i) {
		srv->shown.len -= i;
		memmove(srv->shown.mark, srv->shown.mark + i, srv->shown.len * sizeof(srv->shown.mark[0]));
	}
	/* Nothing waits for a commit or an fsync: the model is what the disk holds (finish_buf's rule
	 * for every reply), so every change made so far counts. */
	if (durable == egs_store_written(srv->store) && !srv->held.len && !egs_state_has_changes(&srv->st)) {
		srv->shown.upto = srv->st.view_clock;
		srv->shown.len = 0;
	}
	return srv->shown.upto;
}
