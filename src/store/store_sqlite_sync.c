/*
 * store_sqlite_sync.c: the SQLite store's durability thread and its checkpoint thread
 * (docs/internals/store.md, "Durability apart from the commit").
 *
 * The connection commits with synchronous=NORMAL: in WAL mode COMMIT then writes the WAL frames
 * (to the page cache) and returns without an fsync.  The durability thread makes them durable: the
 * loop asks for "every write numbered <= upto" (egs__sqlite_sync_request) and goes on with its next
 * turn; the thread fdatasyncs the WAL file and publishes the number it covered.  Writes numbered
 * <= upto were all in the WAL (their write() returned) before the request, so an fdatasync begun
 * after the request covers them; requests that arrive during one fdatasync are coalesced into the
 * next, which covers all of them.  One fdatasync is in flight at a time.  That thread touches no
 * SQLite structure: it has its own descriptor on the WAL file (fsync flushes the file, whichever
 * descriptor wrote it), opened at start so that a write-back error after that is reported to it.
 *
 * Checkpoints (copying the WAL's pages into the database file) are not made by the loop's
 * connection: SQLite's automatic one ran inside a COMMIT on the loop, and with its two fsyncs (the
 * WAL, then the database file) held the loop 5-15 ms every 1,000 pages, several times a second
 * under a stream of creates.  The loop's connection has a WAL hook instead (which replaces the
 * automatic checkpoint) that reports the WAL's length here, and a thread with its own connection
 * makes a PASSIVE checkpoint once CKPT_FRAMES pages wait: the loop, and the fdatasyncs of the WAL,
 * go on meanwhile.  SQLite's checkpoint fsyncs the WAL before it copies frames, so no frame is
 * copied from an unsynced WAL, and the database file after, before the WAL may be restarted.
 *
 * The WAL is restarted (written again from its start) only by a commit that begins when every frame
 * was copied; with commits coming while each checkpoint runs, that may not happen for as long as
 * creates keep coming, and the WAL would grow.  So once it is RESTART_PARTS * CKPT_FRAMES long and
 * the concurrent checkpoints left little to copy (must_catch_up), the durability thread, after an
 * fdatasync, publishes it and then has the checkpoint thread copy what is left, while the loop's
 * commits wait (holding, egs__sqlite_sync_held: set with the publish, under the same lock, and its
 * end told through the eventfd as an fdatasync's is; the loop defers its commit turn meanwhile as
 * while an fdatasync is in flight, durable.c), so the next commit restarts the WAL.  That catch-up
 * copies a few dozen pages once per RESTART_PARTS * CKPT_FRAMES pages, and only the commit after it
 * waits for it: it ran before the publish until the tenth session, and held that fdatasync's
 * replies too (2-10 ms, several times in deep.sh's 10 s).  A write outside a commit turn (a meta
 * set, a prune) does not wait; one made during a catch-up only leaves the WAL to grow to the next.
 *
 * Shared state, all under mu: requested, durable, failed, stop, holding, the checkpoint's frames,
 * copied, ckpt_asked, ckpt_done, ckpt_ended, and the timings /metrics shows (stats: how long each
 * fdatasync, checkpoint and catch-up took, and the WAL's restarts, which the WAL hook sees).  The loop learns of progress from an eventfd the
 * durability thread writes after each fdatasync (egs__sqlite_sync_fd).  A failed checkpoint (an I/O
 * error writing or fsyncing the database file) counts as a failed fdatasync.
 */
#include "store/store_sqlite.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define CKPT_FRAMES 1000      /* pages waiting in the WAL that start a checkpoint (SQLite's default) */
#define RESTART_PARTS 8       /* a WAL this many times CKPT_FRAMES long is caught up after a publish */
#define HOLD_POLL_MS 10

struct egs_sqlite_sync {
	pthread_mutex_t mu;
	pthread_cond_t wake; /* the durability thread waits here for a request or stop */
	pthread_cond_t done; /* waiters (egs__sqlite_sync_wait) wait here for progress */
	pthread_cond_t ckpt_wake; /* the checkpoint thread waits here for pages or stop */
	pthread_cond_t ckpt_news; /* the durability thread waits here for a catch-up */
	uint64_t requested;  /* the highest write number asked to be made durable */
	uint64_t durable;    /* every write numbered <= durable is on disk */
	int failed;          /* errno of a failed fdatasync or checkpoint; 0 while none failed.  Sticky. */
	bool stop;
	pthread_t thread, ckpt_thread;
	bool ckpt_started;
	int wal_fd;          /* our own descriptor on <db>-wal; -1 until it could be opened */
	int efd;             /* eventfd: written after each fdatasync (or its failure) */
	char *wal_path;
	sqlite3 *ckdb;       /* the checkpoint thread's own connection */
	sqlite3 *db;         /* the loop's connection (borrowed): its WAL hook points here */
	int frames;          /* the WAL's length in pages after the loop's last commit (its WAL hook) */
	int copied;          /* of those, copied into the database file by the last checkpoint */
	int ckpt_frames;     /* CKPT_FRAMES, or EGS_TEST_CHECKPOINT_FRAMES */
	uint64_t ckpt_asked, ckpt_done; /* catch-ups asked for, and checkpoints begun after one was */
	bool ckpt_ended;     /* the checkpoint thread has ended: nobody answers a catch-up */
	bool ckpt_running;   /* a checkpoint is copying now */
	bool holding;        /* a catch-up runs: the loop's next commit waits for it (egs__sqlite_sync_held) */
	int tried;           /* frames when the last checkpoint began: one that copied nothing waits for more */
	int caught;          /* frames at the last catch-up: the next waits for CKPT_FRAMES more */
	long delay_ms;       /* EGS_TEST_FSYNC_DELAY_MS: sleep before each fdatasync (tests only) */
	char *fail_path;     /* EGS_TEST_FSYNC_FAIL_IF_EXISTS: an fdatasync fails (EIO) while this file exists */
	char *hold_path;     /* EGS_TEST_CHECKPOINT_HOLD_IF_EXISTS: checkpoints wait while this file exists */
	struct egs_store_stats stats;
};

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* One fdatasync of the WAL, on the thread.  Returns 0 or an errno. */
static int sync_wal(struct egs_sqlite_sync *y)
{
	if (y->delay_ms > 0) {
		struct timespec ts = { y->delay_ms / 1000, (y->delay_ms % 1000) * 1000000L };
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	if (y->fail_path && access(y->fail_path, F_OK) == 0)
		return EIO;
	if (y->wal_fd < 0)
		y->wal_fd = open(y->wal_path, O_RDWR | O_CLOEXEC); /* a write happened: the WAL exists */
	if (y->wal_fd < 0)
		return errno ? errno : EIO;
	return fdatasync(y->wal_fd) == 0 ? 0 : errno;
}

/* Whether the WAL is long enough that it must be copied out before the next commit (under mu).
 * Only what is left after the concurrent checkpoints (a quarter of CKPT_FRAMES at most, none
 * running) is caught up, so that the replies wait for a few pages' copy; past twice the length,
 * whatever is left. */
static bool must_catch_up(const struct egs_sqlite_sync *y)
{
	int left = y->frames - y->copied, small = y->ckpt_frames / 4 > 1 ? y->ckpt_frames / 4 : 1;
	if (y->ckpt_ended || y->failed || y->frames < RESTART_PARTS * y->ckpt_frames || left <= 0)
		return false;
	if (y->frames >= y->caught && y->frames - y->caught < y->ckpt_frames)
		return false; /* one catch-up per CKPT_FRAMES pages, if a restart did not come of the last */
	return y->frames >= 2 * RESTART_PARTS * y->ckpt_frames || (left <= small && !y->ckpt_running);
}

/* After an fdatasync's publish, with holding set in the same hold of mu (mu held): a WAL grown too
 * long is copied out while the loop's commits wait, so that the next commit restarts it. */
static void catch_up(struct egs_sqlite_sync *y)
{
	uint64_t want = ++y->ckpt_asked;
	int64_t t0 = mono_us();
	y->caught = y->frames;
	pthread_cond_signal(&y->ckpt_wake);
	while (y->ckpt_done < want && !y->ckpt_ended)
		pthread_cond_wait(&y->ckpt_news, &y->mu);
	egs_store_timing_add(&y->stats.catch_up, mono_us() - t0);
}

static void *sync_main(void *arg)
{
	struct egs_sqlite_sync *y = arg;
	uint64_t one = 1;
	pthread_mutex_lock(&y->mu);
	for (;;) {
		while (!y->stop && y->requested <= y->durable)
			pthread_cond_wait(&y->wake, &y->mu);
		if (y->failed || y->requested <= y->durable)
			break; /* stopping with nothing left to sync, or a failure already told */
		uint64_t upto = y->requested;
		pthread_mutex_unlock(&y->mu);
		int64_t t0 = mono_us();
		int rc = sync_wal(y);
		int64_t took = mono_us() - t0;
		pthread_mutex_lock(&y->mu);
		egs_store_timing_add(&y->stats.fsync, took);
		if (rc)
			y->failed = rc;
		else if (!y->failed)
			y->durable = upto;
		/* Set with the publish, so that the loop never sees this fdatasync's end without it. */
		y->holding = !rc && must_catch_up(y);
		pthread_cond_broadcast(&y->done);
		pthread_mutex_unlock(&y->mu);
		if (write(y->efd, &one, sizeof(one)) < 0) {
			/* the counter cannot overflow at one per fdatasync: nothing to do */
		}
		pthread_mutex_lock(&y->mu);
		if (y->holding) {
			/* The replies of this fdatasync are on their way; the loop's next commit waits for
			 * the catch-up and is told of its end as of an fdatasync's. */
			catch_up(y);
			y->holding = false;
			pthread_mutex_unlock(&y->mu);
			if (write(y->efd, &one, sizeof(one)) < 0) {
				/* as above */
			}
			pthread_mutex_lock(&y->mu);
		}
		if (y->failed)
			break; /* nothing durable can be claimed after a failed fdatasync */
	}
	pthread_mutex_unlock(&y->mu);
	return NULL;
}

/* ---- checkpoints ---- */

/* The loop's connection calls this after each commit (its WAL hook, on the loop thread): n is the
 * WAL's length in pages.  Wakes the checkpoint thread when enough wait to be copied. */
static int on_wal(void *arg, sqlite3 *db, const char *name, int n)
{
	(void)db;
	(void)name;
	struct egs_sqlite_sync *y = arg;
	pthread_mutex_lock(&y->mu);
	if (n < y->frames) { /* the WAL was restarted: written again from its start */
		y->copied = 0;
		y->stats.wal_restarts++;
	}
	y->frames = n;
	if (n - y->copied >= y->ckpt_frames)
		pthread_cond_signal(&y->ckpt_wake);
	pthread_mutex_unlock(&y->mu);
	return SQLITE_OK;
}

/* Whether the checkpoint thread has work (under mu): a catch-up asked for, or CKPT_FRAMES pages
 * not yet copied that a checkpoint has not already tried. */
static bool ckpt_due(const struct egs_sqlite_sync *y)
{
	return y->ckpt_done < y->ckpt_asked || (y->frames - y->copied >= y->ckpt_frames && y->frames != y->tried);
}

/* Tests only: waits while EGS_TEST_CHECKPOINT_HOLD_IF_EXISTS names a file, or until a stop. */
static void hold(struct egs_sqlite_sync *y)
{
	while (y->hold_path && access(y->hold_path, F_OK) == 0) {
		pthread_mutex_lock(&y->mu);
		bool stop = y->stop;
		pthread_mutex_unlock(&y->mu);
		if (stop)
			return;
		struct timespec ts = { 0, HOLD_POLL_MS * 1000000L };
		nanosleep(&ts, NULL);
	}
}

/* One PASSIVE checkpoint on the thread's connection (mu not held): copies every frame no reader
 * still needs, without waiting for the loop's writes.  Returns 0 or an errno. */
static int checkpoint(struct egs_sqlite_sync *y, int *log, int *copied, int64_t *took_us)
{
	hold(y);
	*log = *copied = -1;
	int64_t t0 = mono_us();
	int rc = sqlite3_wal_checkpoint_v2(y->ckdb, NULL, SQLITE_CHECKPOINT_PASSIVE, log, copied);
	*took_us = mono_us() - t0;
	if (rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
		return 0; /* busy: a reader or the loop's restart held a lock; the next one copies it */
	fprintf(stderr, "store: checkpoint of the WAL failed: %s\n", sqlite3_errmsg(y->ckdb));
	return EIO;
}

static void *ckpt_main(void *arg)
{
	struct egs_sqlite_sync *y = arg;
	uint64_t one = 1;
	pthread_mutex_lock(&y->mu);
	for (;;) {
		while (!y->stop && !y->failed && !ckpt_due(y))
			pthread_cond_wait(&y->ckpt_wake, &y->mu);
		if (y->failed || (y->stop && y->ckpt_done >= y->ckpt_asked))
			break;
		uint64_t asked = y->ckpt_asked;
		y->tried = y->frames;
		y->ckpt_running = true;
		pthread_mutex_unlock(&y->mu);
		int log, copied;
		int64_t took;
		int rc = checkpoint(y, &log, &copied, &took);
		pthread_mutex_lock(&y->mu);
		y->ckpt_running = false;
		egs_store_timing_add(&y->stats.checkpoint, took);
		if (copied >= 0) /* a restart meanwhile makes this an estimate: the next hook corrects it */
			y->copied = copied < y->frames ? copied : y->frames;
		if (rc && !y->failed) {
			y->failed = rc;
			pthread_cond_broadcast(&y->done);
			if (write(y->efd, &one, sizeof(one)) < 0) {
				/* as in sync_main */
			}
		}
		y->ckpt_done = asked;
		pthread_cond_broadcast(&y->ckpt_news);
	}
	y->ckpt_ended = true;
	pthread_cond_broadcast(&y->ckpt_news);
	pthread_mutex_unlock(&y->mu);
	return NULL;
}

/* Opens the checkpoint thread's connection and hands the loop's WAL hook to it; false (printed) when
 * it cannot. */
static bool ckpt_open(struct egs_sqlite_sync *y, const char *db_path, sqlite3 *db)
{
	int rc = sqlite3_open_v2(db_path, &y->ckdb, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		fprintf(stderr, "store: cannot open %s for checkpoints: %s\n", db_path,
			y->ckdb ? sqlite3_errmsg(y->ckdb) : sqlite3_errstr(rc));
		return false;
	}
	sqlite3_busy_timeout(y->ckdb, 5000);
	/* The database is in WAL mode already (this reads it, so the connection opens the WAL); FULL:
	 * the checkpoint fsyncs the WAL before copying and the database file after. */
	if (sqlite3_exec(y->ckdb, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL", NULL, NULL, NULL) !=
	    SQLITE_OK) {
		fprintf(stderr, "store: %s: %s\n", db_path, sqlite3_errmsg(y->ckdb));
		return false;
	}
	const char *f = getenv("EGS_TEST_CHECKPOINT_FRAMES");
	long n = f && *f ? strtol(f, NULL, 10) : 0;
	y->ckpt_frames = n > 0 && n < CKPT_FRAMES ? (int)n : CKPT_FRAMES;
	const char *h = getenv("EGS_TEST_CHECKPOINT_HOLD_IF_EXISTS");
	y->hold_path = h && *h ? egs_strdup(h) : NULL;
	y->db = db;
	sqlite3_wal_hook(db, on_wal, y); /* replaces SQLite's automatic checkpoint on the loop */
	return true;
}

struct egs_sqlite_sync *egs__sqlite_sync_new(const char *db_path, sqlite3 *db)
{
	struct egs_sqlite_sync *y = egs_calloc(1, sizeof(*y));
	size_t n = strlen(db_path) + 5;
	y->wal_path = egs_malloc(n);
	snprintf(y->wal_path, n, "%s-wal", db_path);
	y->wal_fd = open(y->wal_path, O_RDWR | O_CLOEXEC); /* may not exist before the first write */
	y->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	const char *d = getenv("EGS_TEST_FSYNC_DELAY_MS");
	y->delay_ms = d && *d ? strtol(d, NULL, 10) : 0;
	const char *f = getenv("EGS_TEST_FSYNC_FAIL_IF_EXISTS");
	y->fail_path = f && *f ? egs_strdup(f) : NULL;
	if (!ckpt_open(y, db_path, db))
		goto fail;
	if (y->efd < 0 || pthread_mutex_init(&y->mu, NULL) || pthread_cond_init(&y->wake, NULL) ||
	    pthread_cond_init(&y->done, NULL) || pthread_cond_init(&y->ckpt_wake, NULL) ||
	    pthread_cond_init(&y->ckpt_news, NULL) || pthread_create(&y->ckpt_thread, NULL, ckpt_main, y)) {
		fprintf(stderr, "store: cannot start the WAL checkpoint thread: %s\n", strerror(errno));
		goto fail;
	}
	y->ckpt_started = true;
	if (pthread_create(&y->thread, NULL, sync_main, y)) {
		fprintf(stderr, "store: cannot start the WAL sync thread: %s\n", strerror(errno));
		goto fail;
	}
	return y;
fail:
	sqlite3_wal_hook(db, NULL, NULL);
	if (y->ckpt_started) {
		pthread_mutex_lock(&y->mu);
		y->stop = true;
		pthread_cond_signal(&y->ckpt_wake);
		pthread_mutex_unlock(&y->mu);
		pthread_join(y->ckpt_thread, NULL);
	}
	sqlite3_close(y->ckdb);
	if (y->efd >= 0)
		close(y->efd);
	if (y->wal_fd >= 0)
		close(y->wal_fd);
	free(y->wal_path);
	free(y->fail_path);
	free(y->hold_path);
	free(y);
	return NULL;
}

void egs__sqlite_sync_free(struct egs_sqlite_sync *y)
{
	if (!y)
		return;
	pthread_mutex_lock(&y->mu);
	y->stop = true; /* the threads sync what was requested and make the catch-ups asked, then end */
	pthread_cond_signal(&y->wake);
	pthread_cond_signal(&y->ckpt_wake);
	pthread_mutex_unlock(&y->mu);
	pthread_join(y->thread, NULL);
	pthread_join(y->ckpt_thread, NULL);
	sqlite3_close(y->ckdb); /* the loop's connection, closed last, checkpoints what is left */
	sqlite3_wal_hook(y->db, NULL, NULL);
	pthread_cond_destroy(&y->wake);
	pthread_cond_destroy(&y->done);
	pthread_cond_destroy(&y->ckpt_wake);
	pthread_cond_destroy(&y->ckpt_news);
	pthread_mutex_destroy(&y->mu);
	if (y->wal_fd >= 0)
		close(y->wal_fd);
	close(y->efd);
	free(y->wal_path);
	free(y->fail_path);
	free(y->hold_path);
	free(y);
}

void egs__sqlite_sync_request(struct egs_sqlite_sync *y, uint64_t upto)
{
	pthread_mutex_lock(&y->mu);
	if (upto > y->requested) {
		y->requested = upto;
		pthread_cond_signal(&y->wake);
	}
	pthread_mutex_unlock(&y->mu);
}

int egs__sqlite_sync_fd(const struct egs_sqlite_sync *y)
{
	return y->efd;
}

enum egs_err egs__sqlite_sync_poll(struct egs_sqlite_sync *y, uint64_t *durable)
{
	uint64_t n;
	while (read(y->efd, &n, sizeof(n)) > 0)
		;
	pthread_mutex_lock(&y->mu);
	*durable = y->durable;
	int failed = y->failed;
	pthread_mutex_unlock(&y->mu);
	if (failed)
		fprintf(stderr, "store: a sync of the store failed (an fdatasync of the WAL or a checkpoint): %s\n",
			strerror(failed));
	return failed ? EGS_ERR_IO : EGS_OK;
}

enum egs_err egs__sqlite_sync_wait(struct egs_sqlite_sync *y, uint64_t upto, uint64_t *durable)
{
	egs__sqlite_sync_request(y, upto);
	pthread_mutex_lock(&y->mu);
	while (!y->failed && y->durable < upto)
		pthread_cond_wait(&y->done, &y->mu);
	pthread_mutex_unlock(&y->mu);
	return egs__sqlite_sync_poll(y, durable);
}

bool egs__sqlite_sync_held(struct egs_sqlite_sync *y)
{
	pthread_mutex_lock(&y->mu);
	bool held = y->holding;
	pthread_mutex_unlock(&y->mu);
	return held;
}

void egs__sqlite_sync_stats(struct egs_sqlite_sync *y, struct egs_store_stats *out)
{
	pthread_mutex_lock(&y->mu);
	*out = y->stats;
	pthread_mutex_unlock(&y->mu);
}
