/*
 * server.c: egsd's lifecycle: open and load the store, bootstrap (default project, admin key,
 * token secret), the libevent loop with its commit, plan and tick events, and a clean drain on
 * SIGTERM.
 */
#include "server/server.h"

#include "server/aged.h"
#include "server/audit.h"
#include "server/kubecred.h"
#include "server/kubeslice.h"

#include "core/policy.h"
#include "core/aging.h"
#include "core/sched.h"
#include "core/util.h"
#include "server/conn.h"
#include "server/tls.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void egs__http_set_callbacks(struct egs_server *srv);

static void arm_plan_timer(struct egs_server *srv, int64_t delay_us)
{
	struct timeval tv = { delay_us / 1000000, delay_us % 1000000 };
	event_del(srv->plan_ev);
	event_add(srv->plan_ev, &tv);
}

/*
 * The scheduler runs in slices (core/sched.h: egs_sched_begin/step/end), so that walking a deep
 * queue never holds the loop up for long: a slice takes steps until about PLAN_SLICE_US of the
 * loop thread's CPU have passed (the run's set-up counts in its first slice), and the next slice comes PLAN_DUTY times
 * its cost later, so planning takes at most about a quarter of the loop while requests are served
 * in between.  A step of GPRs is sized to a fraction (1 / PLAN_STEP_PARTS) of a slice at the pace
 * of the last full one, and grows at most twice a step: a pace measured on a cheap stretch of the
 * queue (GPRs that place at once) then meeting a costly one (backfill searches) overshoots by a
 * fraction of a slice, not by tens of milliseconds.  A step that places no GPR (the first state,
 * freeing the last plan: bounded pieces, core/sched.h) begins a slice of its own, except the
 * pieces of the queue's order (at most 4,096 queued GPRs each), which go on in a slice as steps
 * of GPRs do.  The first slice
 * runs in the commit turn that found the plan due: a small queue is planned in it at once, as
 * before.  A run that requests made stale on the way is due again when it ends (coalescing every
 * change meanwhile into one more run).
 */
#define PLAN_SLICE_US 1000
#define PLAN_DUTY 4
#define PLAN_STEP_PARTS 8
#define PLAN_STEP_MIN 16
#define PLAN_STEP_MAX 256 /* a GPR's cost varies many times over along a deep queue: 512 held the loop 7.4 ms */
/* A run over at most this many queued GPRs and nodes ends in the turn that began it, however
 * its first slice was cut: its whole cost is a few slices at most, and a create into a short
 * queue (the common case) is then placed before its reply goes out, on a loaded machine too. */
#define PLAN_SMALL_QUEUE 64
#define PLAN_SMALL_NODES 1024

/* CPU time of the loop thread in microseconds: on a loaded machine a slice's wall time also
 * counts the time others ran, so the metric keeps both. */
static int64_t cpu_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Notes a piece of planning that held the loop from wall time t0 and CPU time c0 to CPU time c1
 * (the reading its last slice ended with: plan_slice). */
static void note_slice(struct egs_server *srv, int64_t t0, int64_t c0, int64_t c1)
{
	static const int64_t le_us[EGS_SLICE_BUCKETS] = { 1000, 2000, 5000, 10000, 20000, 50000 };
	int64_t wall = egs_mono_us() - t0, cpu = c1 - c0;
	size_t bw = 0, bc = 0;
	while (bw < EGS_SLICE_BUCKETS && wall > le_us[bw])
		bw++;
	while (bc < EGS_SLICE_BUCKETS && cpu > le_us[bc])
		bc++;
	srv->slice_hist[0][bw]++;
	srv->slice_hist[1][bc]++;
	srv->slice_sum_us[0] += wall;
	srv->slice_sum_us[1] += cpu;
	if (wall > srv->slice_max_us)
		srv->slice_max_us = wall;
	if (cpu > srv->slice_max_cpu_us)
		srv->slice_max_cpu_us = cpu;
}

static void arm_slice_timer(struct egs_server *srv, int64_t delay_us)
{
	struct timeval tv = { delay_us / 1000000, delay_us % 1000000 };
	event_del(srv->slice_ev);
	event_add(srv->slice_ev, &tv);
}

/* The run in progress has ended: takes its next due time and arms the timers. */
static void plan_ended(struct egs_server *srv, int64_t next)
{
	int64_t now = egs_now(srv);
	srv->next_wake = next;
	int64_t wall = egs_mono_us() - srv->run_begun_us;
	srv->runs++;
	srv->runs_resumed += egs_sched_from(srv->plan) > 0;
	srv->runs_stale += egs_sched_stale(srv->plan);
	srv->run_wall_us += wall;
	if (wall > srv->run_wall_max_us)
		srv->run_wall_max_us = wall;
	egs_obs_due(srv, now); /* observability: exit warnings with the scheduler's own transitions */
	/* A stale run (requests changed the state while it walked) leaves the plan due again. */
	srv->planned_gen = egs_sched_stale(srv->plan) ? srv->st.generation - 1 : srv->st.generation;
	if (srv->next_wake != EGS_NEVER) {
		int64_t d = srv->next_wake - now;
		arm_plan_timer(srv, d > 0 ? d * 1000000 : 1000);
	}
}

/* Notes a step (or a run's set-up) that took cpu microseconds doing what: the longest, and those
 * over 5 ms by kind. */
static void note_step(struct egs_server *srv, const char *what, int64_t cpu)
{
	if (cpu > srv->step_max_cpu_us) {
		srv->step_max_cpu_us = cpu;
		srv->step_max_what = what;
	}
	if (cpu <= 5000)
		return;
	for (size_t k = 0; k < EGS_SLOW_KINDS; k++)
		if (!srv->slow_steps[k].what || srv->slow_steps[k].what == what) {
			srv->slow_steps[k].what = what;
			srv->slow_steps[k].n++;
			return;
		}
}

/* Sizes the next steps from one that placed dg GPRs (all it was asked: n) in dt microseconds of CPU. */
static void size_steps(struct egs_server *srv, size_t n, size_t dg, int64_t dt)
{
	if (dg != n)
		return; /* the walk's end, or a piece placing none: no pace */
	size_t want = (size_t)((double)dg * (PLAN_SLICE_US / PLAN_STEP_PARTS) / (double)(dt > 0 ? dt : 1));
	if (want > 2 * n)
		want = 2 * n;
	srv->slice_gprs = want < PLAN_STEP_MIN ? PLAN_STEP_MIN : want > PLAN_STEP_MAX ? PLAN_STEP_MAX : want;
}

/* Walks one slice of the run in progress, begun at the loop thread's CPU time c0 (the run's
 * set-up, when it came in this slice, included) and called at CPU time c: steps of
 * srv->slice_gprs GPRs (max at most) until about PLAN_SLICE_US of CPU have passed.  CPU, not wall
 * time: on a loaded machine the wall clock also counts other processes' turns, and slices cut by it
 * left even a small queue's run unplaced for several slices (a create or an early release then
 * waited milliseconds for its placement).  Arms the next slice, or takes the run's end.  Notes the
 * longest single step and what it did (egs_sched_piece) for /metrics.  Returns the CPU time it
 * ended at.  The thread's CPU clock is a system call (no vDSO path; ~2.5 us on this kind of
 * virtual machine), so it is read once per step boundary: one step's end is the next one's start,
 * and the slice's last reading is its caller's too. */
static int64_t plan_slice(struct egs_server *srv, size_t max, int64_t c0, int64_t c)
{
	int64_t cost = c - c0, next;
	bool walked = false;
	while (!walked && cost < PLAN_SLICE_US) {
		const char *what = egs_sched_piece(srv->plan);
		bool placing = !strcmp(what, "walk");
		/* The queue's order comes in pieces of a bounded size (core/sched_order.c): several go
		 * in one slice, as steps of GPRs do. */
		bool bounded = placing || !strncmp(what, "queue order", 11);
		if (!bounded && cost > PLAN_SLICE_US / PLAN_STEP_PARTS)
			break; /* a piece placing no GPR takes a slice of its own */
		size_t n = max < srv->slice_gprs ? max : srv->slice_gprs, at = egs_sched_progress(srv->plan);
		walked = egs_sched_step(srv->plan, n);
		int64_t now_cpu = cpu_us(), dc = now_cpu - c;
		note_step(srv, what, dc);
		if (placing)
			size_steps(srv, n, walked ? 0 : egs_sched_progress(srv->plan) - at, dc);
		c = now_cpu;
		cost = c - c0;
	}
	bool more = !walked || !egs_sched_end(srv->plan, &next); /* not done, or preemption began another walk */
	if (walked)
		c = cpu_us(); /* the run's end (egs_sched_end) counts in the planner's CPU */
	srv->plan_cpu_us += c - c0;
	if (more)
		arm_slice_timer(srv, PLAN_DUTY * (cost > 250 ? cost : 250));
	else
		plan_ended(srv, next);
	return c;
}

/* Begins a scheduler run when one is due (or force) and none is in progress, and walks its first
 * slice.  force runs it to the end at once (a fresh run: one in progress is dropped). */
static void maybe_plan(struct egs_server *srv, bool force)
{
	if (egs_sched_walking(srv->plan) && !force)
		return; /* its slices go on (slice_ev) */
	int64_t now = egs_now(srv);
	bool due = srv->st.generation != srv->planned_gen || now >= srv->next_wake;
	if (!due && !force)
		return;
	egs_sched_abort(srv->plan);
	int64_t t = egs_mono_us(), c = cpu_us();
	srv->run_begun_us = t;
	egs_sched_begin(&srv->st, now, srv->plan);
	int64_t c1 = cpu_us();
	note_step(srv, "set-up", c1 - c);
	c1 = plan_slice(srv, srv->slice_gprs, c, c1);
	bool small = egs_queue_len(&srv->st.queue) <= PLAN_SMALL_QUEUE && srv->st.nodes.len <= PLAN_SMALL_NODES;
	while ((force || small) && egs_sched_walking(srv->plan)) /* each call makes one step at least */
		c1 = plan_slice(srv, SIZE_MAX, c1, c1);
	if (!force) /* the set-up and the first slice (a small run: all of it) hold the loop together */
		note_slice(srv, t, c, c1);
}

/* Called for a turn's changes before they are freed: a walk in progress holds pointers into the
 * state, so a deletion (freed at egs_state_clear_changes) drops it, and the plan is due again. */
static void plan_drop_on_delete(struct egs_server *srv)
{
	if (!egs_sched_walking(srv->plan))
		return;
	for (size_t i = 0; i < srv->st.changes.len; i++) {
		const struct egs_change *c = srv->st.changes.items[i];
		if (c->deleted) {
			egs_sched_abort(srv->plan);
			srv->planned_gen = srv->st.generation - 1;
			event_del(srv->slice_ev);
			egs_server_changed(srv);
			return;
		}
	}
}

static void on_slice(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct egs_server *srv = arg;
	if (!egs_sched_walking(srv->plan))
		return;
	int64_t t = egs_mono_us(), c = cpu_us();
	note_slice(srv, t, c, plan_slice(srv, SIZE_MAX, c, c));
	egs_server_changed(srv); /* commit what the slice changed (starts, estimates) */
}

static void commit_turn(struct egs_server *srv)
{
	if (srv->follower) {
		egs_replica_turn(srv); /* followers plan nothing and write nothing */
		return;
	}
	if (egs_store_written(srv->store) > egs_store_durable(srv->store) || egs_store_commit_held(srv->store)) {
		if (!srv->stopping) {
			/* An fsync or a PostgreSQL turn is in flight (or SQLite copies a long WAL out, so that
			 * the next commit restarts it): this turn goes on gathering requests, and is committed
			 * when it ends (durable.c), so that the next commit pays for all that came meanwhile. */
			srv->turn_deferred = true;
			egs_store_sync(srv->store); /* in flight already, but for writes outside a turn (a meta set) */
			return;
		}
		egs_durable_wait(srv); /* draining: the turn in flight ends first */
	}
	maybe_plan(srv, false);
	egs_obs_due(srv, egs_now(srv));           /* observability: exit warnings due since the last plan */
	egs_obs_before_commit(srv, egs_now(srv)); /* observability: settings of new nodes, estimates */
	if (egs_state_has_changes(&srv->st)) {
		uint64_t before = egs_store_durable(srv->store);
		/* PostgreSQL: sent, not yet committed; the replies wait for its COMMIT (durable.c). */
		int64_t c0 = cpu_us();
		enum egs_err err = egs_store_commit_send(srv->store, &srv->st);
		srv->commit_cpu_us += cpu_us() - c0;
		if (!err && egs_durable_turn_leaves(srv))
			err = egs_durable_settle(srv); /* streamed events and webhooks cannot wait as replies do */
		if (err) {
			/* Disk full or I/O error: refuse the turn's writes, drop them from memory (reload.c). */
			egs_server_turn_failed(srv, err, before);
			if (srv->stepped_down)
				return;
		} else {
			egs_durable_mark(srv); /* once this write is durable, so is every change so far */
			egs_obs_committed(srv); /* observability: stream and notify the committed events */
			plan_drop_on_delete(srv);
			egs_state_clear_changes(&srv->st);
		}
	}
	egs_server_flush(srv);
	if (srv->polls.len)
		egs_agent_wake_polls(srv, false);
}

static void on_commit(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	commit_turn(arg);
}

void egs_server_wake_at(struct egs_server *srv, int64_t t)
{
	if (t >= srv->next_wake)
		return;
	srv->next_wake = t;
	int64_t d = t - egs_now(srv);
	arm_plan_timer(srv, d > 0 ? d * 1000000 : 1000);
}

void egs_server_plan_now(struct egs_server *srv)
{
	maybe_plan(srv, true);
	egs_server_changed(srv);
}

static void on_plan(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct egs_server *srv = arg;
	srv->planned_gen = srv->st.generation - 1; /* force */
	egs_server_changed(srv);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct egs_server *srv = arg;
	egs_replica_tick(srv); /* the leader's lease; a follower's event streams */
	if (!srv->follower && egs_store_written(srv->store) > egs_store_durable(srv->store))
		egs_durable_poll(srv); /* a turn the lease's renewal read to its end (PostgreSQL): at once */
	if (srv->follower || srv->stepped_down) {
		/* Its model is no longer loaded afresh on each turn (follow.c): it ages too, but not while a
		 * full load replaces it (replica_load.c carries from it by key, in steps). */
		if (srv->follower && !srv->full_load)
			egs_aged_sweep(srv, egs_now(srv));
		fflush(srv->log);
		return;
	}
	if (egs_now(srv) >= srv->next_wake)
		egs_server_changed(srv);
	egs_obs_tick(srv, egs_now(srv)); /* observability: silent nodes, exit warnings, retention */
	egs_aged_sweep(srv, egs_now(srv)); /* finished GPRs leave memory by age */
	fflush(srv->log);
}

/* SIGHUP: loads --tls-cert and --tls-key again (a renewed certificate) for new connections; open ones
 * keep the old.  A file that does not load, or a key that does not match, keeps the old pair. */
static void on_reload(evutil_socket_t sig, short what, void *arg)
{
	(void)sig, (void)what;
	struct egs_server *srv = arg;
	SSL_CTX *fresh = NULL;
	char msg[768], esc[1024];

	if (!srv->tls) {
		fprintf(srv->log, "level=info msg=\"SIGHUP: no --tls-cert to reload\"\n");
		return;
	}
	if (egs_tls_server_ctx(srv->tls_cert, srv->tls_key, &fresh, msg, sizeof(msg)) != EGS_OK) {
		fprintf(srv->log, "level=warn msg=\"SIGHUP: TLS certificate not reloaded; serving the previous one\" "
			"reason=%s\n", egs_log_escape(msg, esc, sizeof(esc)));
		return;
	}
	egs_conns_set_tls(srv->conns, fresh);
	SSL_CTX_free(srv->tls); /* connections still on it hold their own reference */
	srv->tls = fresh;
	fprintf(srv->log, "level=info msg=\"SIGHUP: TLS certificate reloaded\" cert=%s\n",
		egs_log_escape(srv->tls_cert, esc, sizeof(esc)));
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	struct egs_server *srv = arg;
	fprintf(srv->log, "level=info msg=\"signal %d: draining\"\n", (int)sig);
	srv->stopping = true;
	commit_turn(srv);
	egs_agent_drop_polls(srv);
	egs_durable_wait(srv); /* the last fsync, then every reply waiting for it */
	egs_obs_stop(srv); /* observability: end event streams, stop the webhook worker */
	struct timeval tv = { 0, 200000 }; /* let replies already written reach their clients */
	event_base_loopexit(srv->base, &tv);
}

static enum egs_err write_key_file(const char *path, const char *key)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return EGS_ERR_IO;
	size_t len = strlen(key);
	bool ok = write(fd, key, len) == (ssize_t)len && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
	close(fd);
	if (!ok || rename(tmp, path) != 0) {
		unlink(tmp);
		return EGS_ERR_IO;
	}
	return EGS_OK;
}

/* The first admin key: the one in --admin-key-file (a Kubernetes Secret, so that the admin knows it
 * before egsd ever runs) or a new random one.  Fills key (the text) and hash; EGS_ERR_INVALID with a
 * message on stderr when the file is unreadable or holds no well-formed key. */
static enum egs_err first_admin_key(const struct egs_server *srv, char key[37], unsigned char hash[32])
{
	if (!srv->admin_key_file) {
		egs_auth_new_key(key, hash);
		return EGS_OK;
	}
	char buf[64] = { 0 };
	FILE *f = fopen(srv->admin_key_file, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	bool ok = n == 36 && egs_auth_key_wellformed(buf);
	if (ok) {
		for (size_t i = 0; i < n; i++) /* keys are matched by hash: one spelling, lowercase */
			key[i] = (char)tolower((unsigned char)buf[i]);
		key[n] = '\0';
		egs_auth_hash(key, hash);
	} else {
		fprintf(stderr, "egsd: --admin-key-file %s must hold one API key (a lowercase UUID such as the output of "
			"`cat /proc/sys/kernel/random/uuid`)\n", srv->admin_key_file);
	}
	sodium_memzero(buf, sizeof(buf));
	return ok ? EGS_OK : EGS_ERR_INVALID;
}

void egs_server_step_down(struct egs_server *srv)
{
	egs_server_flush(srv); /* the turn's replies, failed by now */
	if (srv->stepped_down)
		return;
	srv->stepped_down = true;
	fprintf(srv->log, "level=error msg=\"this egsd no longer leads (deposed, or its lease ran out); exiting so that "
			  "its supervisor restarts it as a follower\"\n");
	fflush(srv->log);
	egs_agent_drop_polls(srv);
	struct timeval tv = { 0, 200000 }; /* let the replies reach their clients */
	event_base_loopexit(srv->base, &tv);
}

enum egs_err egs_server_bootstrap(struct egs_server *srv)
{
	struct egs_state *st = &srv->st;
	int64_t now = egs_now(srv);
	char *secret = NULL;
	enum egs_err err = egs_store_meta_get(srv->store, "token_secret", &secret);
	if (err)
		return err;
	if (secret && strlen(secret) == 2 * sizeof(srv->token_secret)) {
		size_t bin_len;
		sodium_hex2bin(srv->token_secret, sizeof(srv->token_secret), secret, strlen(secret), NULL, &bin_len, NULL);
	} else {
		char hex[2 * crypto_auth_KEYBYTES + 1];
		crypto_auth_keygen(srv->token_secret);
		sodium_bin2hex(hex, sizeof(hex), srv->token_secret, sizeof(srv->token_secret));
		err = egs_store_meta_set(srv->store, "token_secret", hex);
		sodium_memzero(hex, sizeof(hex));
		if (err)
			goto out;
	}
	if (!egs_state_project(st, "default")) {
		struct egs_project *p = egs_calloc(1, sizeof(*p));
		egs_strlcpy(p->name, "default", sizeof(p->name));
		p->created_at = now;
		EGS_ASSERT(egs_state_add_project(st, p) == EGS_OK);
		egs_state_touch(st, EGS_KIND_PROJECT, p);
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/admin.key", srv->data_dir);
	if (access(path, F_OK) != 0) {
		char key[37];
		unsigned char hash[32];
		if ((err = first_admin_key(srv, key, hash)))
			goto out;
		if (egs_state_apikey_by_hash(st, hash)) {
			/* --admin-key-file on a replica that takes over: the first leader stored this key */
			err = write_key_file(path, key);
			sodium_memzero(key, sizeof(key));
			if (err)
				goto out;
			goto keyed;
		}
		struct egs_apikey *k = egs_calloc(1, sizeof(*k));
		memcpy(k->hash, hash, sizeof(hash));
		egs_new_id("key", k->id);
		egs_strlcpy(k->name, "bootstrap-admin", sizeof(k->name));
		egs_strlcpy(k->user_name, "admin", sizeof(k->user_name));
		k->role = EGS_ROLE_ADMIN;
		k->created_at = now;
		EGS_ASSERT(egs_state_add_apikey(st, k) == EGS_OK);
		egs_state_touch(st, EGS_KIND_APIKEY, k);
		/* Commit the key before writing the file: a file never names a key the store lacks. */
		err = egs_store_commit_changes(srv->store, st);
		if (!err && !(err = egs_store_sync_wait(srv->store))) {
			egs_state_clear_changes(st);
			err = write_key_file(path, key);
		}
		sodium_memzero(key, sizeof(key));
		if (err)
			goto out;
		fprintf(srv->log, "level=info msg=\"bootstrap admin key written\" path=%s\n", path);
	}
keyed:
	if (egs_state_has_changes(st)) {
		err = egs_store_commit_changes(srv->store, st);
		if (!err)
			egs_state_clear_changes(st);
	}
out:
	free(secret);
	return err;
}

/* Where this egsd serves, for the others to forward to: --advertise, else --listen unless that
 * is a wildcard address (then the host name). */
static enum egs_err advertised(struct egs_server *srv, const char *listen, long port)
{
	char host[200];
	if (srv->advertise) {
		egs_strlcpy(srv->advertised, srv->advertise, sizeof(srv->advertised));
		return EGS_OK;
	}
	size_t hl = strcspn(listen, ":");
	if (hl == 0 || strncmp(listen, "0.0.0.0:", 8) == 0 || listen[0] == '[') {
		if (gethostname(host, sizeof(host)) != 0)
			return EGS_ERR_IO;
		host[sizeof(host) - 1] = '\0';
		snprintf(srv->advertised, sizeof(srv->advertised), "%s:%ld", host, port);
	} else {
		egs_strlcpy(srv->advertised, listen, sizeof(srv->advertised));
	}
	return EGS_OK;
}

enum egs_err egs_server_start(struct egs_server *srv, const char *listen, const char *data_dir, bool dev_clock)
{
	char host[256];
	const char *colon = strrchr(listen, ':');
	if (!colon || (size_t)(colon - listen) >= sizeof(host)) {
		fprintf(stderr, "egsd: --listen must be HOST:PORT\n");
		return EGS_ERR_INVALID;
	}
	memcpy(host, listen, (size_t)(colon - listen));
	host[colon - listen] = '\0';
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end || port < 0 || port > 65535) {
		fprintf(stderr, "egsd: bad port in --listen %s\n", listen);
		return EGS_ERR_INVALID;
	}
	if (srv->tls_cert) { /* main.c checked that --tls-key came with it */
		char msg[768];
		if (egs_tls_server_ctx(srv->tls_cert, srv->tls_key, &srv->tls, msg, sizeof(msg)) != EGS_OK) {
			fprintf(stderr, "egsd: %s\n", msg);
			return EGS_ERR_INVALID;
		}
	}
	if (mkdir(data_dir, 0700) != 0 && errno != EEXIST) {
		fprintf(stderr, "egsd: cannot create %s: %s\n", data_dir, strerror(errno));
		return EGS_ERR_IO;
	}
	srv->data_dir = egs_strdup(data_dir);
	srv->dev_clock = dev_clock;
	srv->dev_clock_base = (int64_t)time(NULL);
	if (!srv->token_ttl_s)
		srv->token_ttl_s = 3600;
	if (!srv->log)
		srv->log = stderr;
	egs_state_init(&srv->st, &srv->state_cfg);
	srv->plan = egs_plan_new();

	char path[4096];
	snprintf(path, sizeof(path), "%s/egs.db", data_dir);
	enum egs_err err = egs_store_open(srv->store_url ? srv->store_url : path, &srv->store);
	if (err)
		return err;
	if ((err = advertised(srv, listen, port)))
		return err;
	bool led;
	egs_aging_cutoff(&srv->st, egs_now(srv)); /* finished GPRs older than the retention stay in the store */
	/* PostgreSQL: load first, then try to lead from that snapshot (a large store's load would outlast
	 * a leader's lease; docs/ha.md): when a turn was committed in between, this egsd follows. */
	if ((err = egs_store_load(srv->store, &srv->st)) ||
	    (err = egs_store_try_lead(srv->store, srv->advertised, &led)))
		return err;
	srv->follower = !led;
	if ((err = egs_audit_start(srv)) ||
	    (led && (err = egs_server_bootstrap(srv))) ||
	    (err = egs_kubecred_start(srv)) || (err = egs_policy_start(srv))) /* policies: parse the stored ones */
		return err;
	/* Time-outs of active GPRs restart with the process: agents get a full period to converge. */
	for (size_t i = 0; i < srv->st.active.len; i++)
		((struct egs_gpr *)srv->st.active.items[i])->phase_since = egs_now(srv);
	/* Stored early-release holds stay until the agents have had a heartbeat period to report. */
	srv->st.held_settle = egs_now(srv) + srv->st.cfg.heartbeat_timeout_s;

	/* epoll's changelist: interest changes are applied at the next epoll_wait, so a change undone
	 * before it (a connection's write interest taken for a partial write that then completes, a read
	 * pause that ends within the turn) costs no epoll_ctl.  The HTTP front (conn.c) keeps a
	 * connection's read interest registered anyway; evhttp, before it, dropped and took it again for
	 * every request.  Its caveat, descriptors cloned by dup(), does not apply: egsd registers no
	 * dup()ed descriptor. */
	struct event_config *cfg = event_config_new();
	EGS_ASSERT(cfg && event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST) == 0);
	srv->base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	EGS_ASSERT(srv->base && event_base_priority_init(srv->base, 3) == 0);
	srv->commit_ev = event_new(srv->base, -1, 0, on_commit, srv);
	event_priority_set(srv->commit_ev, 2);
	srv->plan_ev = evtimer_new(srv->base, on_plan, srv);
	srv->slice_ev = evtimer_new(srv->base, on_slice, srv);
	srv->slice_gprs = 128; /* sized by the steps' pace from the first (plan_slice) */
	srv->tick_ev = event_new(srv->base, -1, EV_PERSIST, on_tick, srv);
	egs_durable_start(srv);
	struct timeval sec = { 1, 0 };
	event_add(srv->tick_ev, &sec);
	srv->sig_ev[0] = evsignal_new(srv->base, SIGTERM, on_signal, srv);
	srv->sig_ev[1] = evsignal_new(srv->base, SIGINT, on_signal, srv);
	srv->sig_ev[2] = evsignal_new(srv->base, SIGHUP, on_reload, srv);
	evsignal_add(srv->sig_ev[0], NULL);
	evsignal_add(srv->sig_ev[1], NULL);
	evsignal_add(srv->sig_ev[2], NULL);
	signal(SIGPIPE, SIG_IGN);

	/* egsd's own HTTP/1.1 front (conn.h): framing, bounds, replies in order, TLS. */
	srv->conns = egs_conns_new(srv->base, srv->log, srv->max_connections, srv->tls, egs__http_on_request, srv);
	srv->views = egs_views_new();
	if ((err = egs_obs_start(srv)) || /* observability: settings, prices, webhook worker */
	    (err = egs_replica_start(srv)))   /* a follower: the token secret, the follow timer */
		return err;
	if (egs_conns_listen(srv->conns, host, (int)port) != EGS_OK) {
		fprintf(stderr, "egsd: cannot listen on %s\n", listen);
		return EGS_ERR_IO;
	}
	srv->next_wake = 0;
	egs_server_changed(srv); /* first plan after load */
	fprintf(srv->log,
		"level=info msg=\"egsd listening\" listen=%s scheme=%s data=%s store=%s role=%s dev_clock=%d gprs=%zu "
		"nodes=%zu\n",
		listen, srv->tls ? "https" : "http", data_dir, egs_store_kind(srv->store),
		srv->follower ? "follower" : "leader", dev_clock, srv->st.gprs.len, srv->st.nodes.len);
	fflush(srv->log);
	return EGS_OK;
}

void egs_server_stop(struct egs_server *srv)
{
	egs_kubecred_stop(srv); /* wipe the token key */
	egs_obs_stop(srv); /* observability: ends the event streams first */
	egs_conns_close_all(srv->conns); /* requests still unanswered become orphans */
	egs_agent_drop_polls(srv);
	egs_gpr_free(srv->aged_read);
	srv->aged_read = NULL;
	egs_server_drop_replies(srv);
	egs_durable_stop(srv);
	if (srv->commit_ev)
		event_free(srv->commit_ev);
	if (srv->plan_ev)
		event_free(srv->plan_ev);
	if (srv->slice_ev)
		event_free(srv->slice_ev);
	if (srv->tick_ev)
		event_free(srv->tick_ev);
	if (srv->follow_ev)
		event_free(srv->follow_ev);
	egs_full_load_abandon(srv); /* a follower's load still running frees itself (replica_load.c) */
	for (size_t i = 0; i < EGS_ARRAY_LEN(srv->sig_ev); i++)
		if (srv->sig_ev[i])
			event_free(srv->sig_ev[i]);
	egs_conns_free(srv->conns); /* its events first */
	srv->conns = NULL;
	if (srv->base)
		event_base_free(srv->base);
	egs_views_free(srv->views);
	SSL_CTX_free(srv->tls);     /* after the connections' SSLs */
	SSL_CTX_free(srv->fwd_tls); /* forwarded requests' (forward.c) */
	egs_store_free(srv->store);
	egs_plan_free(srv->plan);
	egs_obs_free(srv);
	egs_policy_free(srv->policy_global);
	json_decref(srv->unmanaged);
	egs_kubeslice_cleanup(srv);
	egs_state_cleanup(&srv->st);
	free(srv->data_dir);
	fflush(srv->log);
}
