/*
 * replica_load.c: a follower's full load off its loop (docs/ha.md, "Followers serve").
 *
 * A follower loads the whole store when the change log cannot bring it up to date (a gap, a row it
 * cannot apply, a model that may hold what the store does not).  With 1,000,000 GPRs that load takes
 * seconds; on the loop it would stop every read meanwhile.  So it runs on a thread of its own, with
 * a store handle (a database session) of its own, into a fresh struct egs_state that nothing else
 * sees; the loop goes on answering from the old model, and the follow timer (replica.c) looks at
 * the job each time: once the thread has ended, the fresh model is swapped in on the loop
 * (egs_server_swap_model), and srv->store takes the job handle's snapshot as its loaded turn
 * (egs_store_adopt_load), from which it follows the change log and may lead.
 *
 * A leader's reload after a failed commit (reload.c) runs the same job and waits for it, renewing
 * its lease meanwhile on its own session (egs_full_load_wait): the loop answers nothing during the
 * reload, as before, but a reload longer than the lease no longer costs the lead.
 *
 * The model a swap replaces is freed on a thread of its own too (egs_state_free_later): nothing
 * points into it any more, and freeing a large one was most of the swap's time on the loop.
 *
 * The thread touches only its job: the store URL and the state settings are copied in before it
 * starts, and the clock's now is read on the loop.  The job's state (RUNNING, DONE, ORPHANED) is the
 * one word both sides write: at exit a running job is orphaned and frees itself when its thread
 * ends (detached), so an exit never waits for a long load.
 */
#include "server/server.h"

#include "core/aging.h"
#include "core/util.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define WAIT_STEP_NS (10 * 1000 * 1000) /* a waiting leader looks at its job and its lease this often */
#define OPEN_FOR_US (30 * 1000000)       /* a job tries to open its session this long, as a commit reconnects */
#define OPEN_PAUSE_NS (500 * 1000 * 1000)
#define OPEN_LOG_US (5 * 1000000) /* a failing open logs its count of tries this often */
/* GPRs whose runtime fields one step of the loop carries into a fresh model: a few milliseconds,
 * so that reads wait that long at most (all at once: 0.24-0.45 s at 200,000 GPRs, loaded machine). */
#define CARRY_STEP 4096
#define BACKGROUND_NICE 10 /* the load's and the free's threads: the loop's goes first */

enum { JOB_RUNNING, JOB_DONE, JOB_ORPHANED };

struct egs_full_load {
	pthread_t thread;
	atomic_int state;
	char *url;                     /* the store's URL (owned) */
	FILE *log;                     /* srv->log (stdio locks it for each line) */
	struct egs_state_config cfg;   /* srv->state_cfg as the job started */
	int64_t now;                   /* egs_now at the start: the aging cut-off's clock */
	struct egs_store *store;       /* the job's own handle; its last load is the fresh model's */
	struct egs_state *fresh;       /* the loaded model (owned until it is swapped in) */
	enum egs_err err;              /* the load's outcome */
	/* After the thread: the loop carries the old model's runtime fields into fresh's GPRs, CARRY_STEP
	 * a call (egs_carry_gprs), before the swap: */
	size_t carry_pos;              /* the cursor over fresh's GPRs */
	bool carried;                  /* every GPR carried */
};

static void job_free(struct egs_full_load *j)
{
	if (j->fresh) {
		egs_state_cleanup(j->fresh);
		free(j->fresh);
	}
	egs_store_free(j->store);
	free(j->url);
	free(j);
}

/* libpq's message (several lines, maybe quotes) as one value of a log line, into out. */
static const char *one_line(const char *why, char *out, size_t outsz)
{
	size_t o = 0;
	for (const char *c = why; *c && o + 1 < outsz; c++)
		out[o++] = *c == '"' ? '\'' : (unsigned char)*c < 0x20 ? ' ' : *c;
	while (o && out[o - 1] == ' ')
		o--;
	out[o] = '\0';
	return out;
}

/* Opens the job's session.  The database may be restarting (a failed commit's reload often follows
 * one): it tries every OPEN_PAUSE_NS for as long as the main session would reconnect, while the job
 * is wanted (not orphaned), and logs the first failure, then one line with the count of tries every OPEN_LOG_US
 * (a line per try, two lines each before, filled the log), and the outcome when it had failed. */
static enum egs_err open_session(struct egs_full_load *j)
{
	char why[512], shown[512];
	int64_t start = egs_mono_us(), logged = 0;
	int tries = 0;
	enum egs_err err;
	while ((err = egs_store_open_pg_quiet(j->url, &j->store, why, sizeof(why)))) {
		int64_t now = egs_mono_us();
		bool last = now - start >= OPEN_FOR_US;
		if (atomic_load(&j->state) != JOB_RUNNING)
			return err; /* egsd exits: nobody waits for this load */
		tries++;
		if (tries == 1 || now - logged >= OPEN_LOG_US || last) {
			logged = now;
			fprintf(j->log, "level=%s msg=\"full load: cannot open a session to PostgreSQL; %s\" tries=%d error=\"%s\"\n",
				last ? "error" : "warn", last ? "giving up" : "retrying", tries,
				one_line(why, shown, sizeof(shown)));
			fflush(j->log);
		}
		if (last)
			return err;
		nanosleep(&(struct timespec){ 0, OPEN_PAUSE_NS }, NULL);
	}
	if (tries) {
		fprintf(j->log, "level=info msg=\"full load: opened a session to PostgreSQL\" tries=%d\n", tries + 1);
		fflush(j->log);
	}
	return EGS_OK;
}

/* Makes the calling thread a background one: signals are the loop's (libevent), and, with nice,
 * the loop's thread gets the CPU first (a nice value is per thread on Linux).  A model's free is
 * niced: nothing waits for it.  A load is not: niced, a follower's load took 17 s instead of 10 s
 * on the loaded machine (bench/ha/gap.py), and its reads are answered from an ever older model
 * meanwhile; a leader's loop waits for its reload. */
static void background(bool nice)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (nice)
		(void)setpriority(PRIO_PROCESS, (id_t)gettid(), BACKGROUND_NICE);
}

static void *run(void *arg)
{
	struct egs_full_load *j = arg;
	background(false);
	j->fresh = egs_malloc(sizeof(*j->fresh));
	egs_state_init(j->fresh, &j->cfg);
	egs_aging_cutoff(j->fresh, j->now);
	j->err = open_session(j);
	if (!j->err && atomic_load(&j->state) == JOB_RUNNING) /* an orphan loads nothing */
		j->err = egs_store_load(j->store, j->fresh);
	int was = JOB_RUNNING;
	if (!atomic_compare_exchange_strong(&j->state, &was, JOB_DONE)) /* orphaned: nobody will take it */
		job_free(j);
	return NULL;
}

enum egs_err egs_full_load_start(struct egs_server *srv)
{
	if (srv->full_load)
		return EGS_OK;
	if (!srv->store_url || strcmp(egs_store_kind(srv->store), "postgres") != 0)
		return EGS_ERR_STORE; /* SQLite has one egsd per file: no follower, no second session */
	struct egs_full_load *j = egs_calloc(1, sizeof(*j));
	atomic_init(&j->state, JOB_RUNNING);
	j->url = egs_strdup(srv->store_url);
	j->log = srv->log;
	j->cfg = srv->state_cfg;
	j->now = egs_now(srv);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&j->thread, &attr, run, j);
	pthread_attr_destroy(&attr);
	if (rc) {
		job_free(j);
		return EGS_ERR_IO;
	}
	srv->full_load = j;
	return EGS_OK;
}

/* egs_full_load_finish, carrying at most step GPRs' runtime fields per call before the swap. */
static bool finish(struct egs_server *srv, enum egs_err *err, size_t step)
{
	struct egs_full_load *j = srv->full_load;
	if (!j || atomic_load(&j->state) != JOB_DONE)
		return false;
	if (!j->err && !j->carried) {
		j->carried = egs_carry_gprs(&srv->st, j->fresh, &j->carry_pos, step, egs_now(srv));
		if (!j->carried)
			return false;
	}
	srv->full_load = NULL;
	*err = j->err;
	if (!j->err) {
		egs_store_adopt_load(srv->store, j->store);
		*err = egs_server_swap_model(srv, j->fresh, true);
		j->fresh = NULL;
	}
	job_free(j);
	return true;
}

bool egs_full_load_finish(struct egs_server *srv, enum egs_err *err)
{
	return finish(srv, err, CARRY_STEP);
}

bool egs_full_load_carrying(const struct egs_server *srv)
{
	const struct egs_full_load *j = srv->full_load;
	return j && atomic_load(&j->state) == JOB_DONE && !j->err && !j->carried;
}

void egs_full_load_abandon(struct egs_server *srv)
{
	struct egs_full_load *j = srv->full_load;
	int was = JOB_RUNNING;
	srv->full_load = NULL;
	if (j && !atomic_compare_exchange_strong(&j->state, &was, JOB_ORPHANED))
		job_free(j); /* it had ended */
}

enum egs_err egs_full_load_wait(struct egs_server *srv)
{
	enum egs_err err = egs_full_load_start(srv);
	if (err)
		return err;
	while (!finish(srv, &err, SIZE_MAX)) { /* the loop answers nothing meanwhile: carry at once */
		if (egs_store_renew(srv->store) != EGS_OK) { /* the lease is lost (logged): stop waiting */
			egs_full_load_abandon(srv);
			return EGS_ERR_UNAVAILABLE;
		}
		nanosleep(&(struct timespec){ 0, WAIT_STEP_NS }, NULL);
	}
	return err;
}

static void *free_state(void *arg)
{
	background(true);
	egs_state_cleanup(arg);
	free(arg);
	return NULL;
}

void egs_state_free_later(struct egs_state *old)
{
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&t, &attr, free_state, old);
	pthread_attr_destroy(&attr);
	if (rc)
		free_state(old);
}
