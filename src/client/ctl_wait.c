/*
 * ctl_wait.c: `egsctl wait gpr ID --for=STATE --timeout=DUR` and the waiting that `apply --wait`
 * and `create --wait` share: poll the GPR once a second and show, on stderr, its queue position,
 * the estimated start and every state change as it happens.  On a terminal that is one live line
 * redrawn in place, with each state change left above it; piped, it is one plain line per change of
 * state, position or estimate, so CI logs stay short and readable.
 *
 * Ctrl-C ends a wait promptly (the call in flight is aborted through libegs's abort callback) and
 * leaves the terminal tidy; the exit code is then 130.
 */
#include "core/common.h"
#include "core/util.h"

#include "client/ctl.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static const char wait_help[] =
	"usage: egsctl wait gpr ID... [--for=STATE] [--timeout=DURATION]\n"
	"\n"
	"Waits until each GPR is in STATE (default Provisioned), showing its queue position, the\n"
	"estimated start and each state change on stderr (a live line on a terminal, plain lines\n"
	"when piped).  Prints \"gpr/ID condition met\" on stdout for each.\n"
	"\n"
	"options:\n"
	"  --for STATE          Pending, Queued, Provisioning, Provisioned (default), Releasing, Complete,\n"
	"                       Cancelled, Rejected or Error; \"condition=Provisioned\" works too\n"
	"  --timeout DURATION   give up after this long (default 30m), for all the GPRs together\n"
	"\n"
	"exit codes: 0 reached, 6 timed out, 8 the GPR can no longer reach STATE (it was cancelled,\n"
	"rejected, failed or finished), 3 no such GPR, 130 interrupted.\n"
	"\n"
	"example:\n"
	"  egsctl wait gpr gpr-00000001-ab12 --for=Provisioned --timeout=10m\n";

static const char *const states[] = {"Pending",  "Queued",   "Provisioning", "Provisioned", "Releasing",
				     "Complete", "Cancelled", "Rejected",    "Error",       "Failed"};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

static bool abort_check(void *arg)
{
	(void)arg;
	return interrupted != 0;
}

const char *ctl_state_name(const char *s)
{
	for (size_t i = 0; s && i < EGS_ARRAY_LEN(states); i++)
		if (!strcasecmp(s, states[i]))
			return states[i];
	return NULL;
}

double ctl_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Queue order: estimated start (unknown last), then priority (high first), then id (creation). */
static int cmp_queue(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	const char *ex = ctl_str(x, "estimatedStartTime"), *ey = ctl_str(y, "estimatedStartTime");
	int c;

	if (!*ex != !*ey)
		return *ex ? -1 : 1;
	c = strcmp(ex, ey);
	if (c)
		return c;
	if (ctl_int_of(x, "priority") != ctl_int_of(y, "priority"))
		return ctl_int_of(x, "priority") > ctl_int_of(y, "priority") ? -1 : 1;
	return strcmp(ctl_str(x, "gprId"), ctl_str(y, "gprId"));
}

void ctl_sort_queue(json_t *items)
{
	ctl_sort_json(items, cmp_queue);
}

/* The position among the Queued GPRs of GET /api/v1/gpr/list, for servers without the queue route. */
static int position_from_list(struct ctl *c, const char *id, int *of)
{
	json_t *items = NULL;
	int pos = 0;

	if (egs_client_gpr_list(c->client, NULL, "Queued", &items) != EGS_OK)
		return 0;
	ctl_sort_queue(items);
	*of = (int)json_array_size(items);
	for (size_t i = 0; i < json_array_size(items) && !pos; i++)
		if (!strcmp(ctl_str(json_array_get(items, i), "gprId"), id))
			pos = (int)i + 1;
	json_decref(items);
	return pos;
}

int ctl_queue_position(struct ctl *c, const char *id, int *of)
{
	json_t *ans = NULL, *x;
	enum egs_err err;
	int pos = 0;
	size_t i;

	*of = 0;
	if (!c->client)
		return 0;
	err = egs_client_queue(c->client, &ans);
	if (err == EGS_ERR_NOT_FOUND && !strcmp(egs_client_errkey(c->client), "ROUTE_NOT_FOUND"))
		return position_from_list(c, id, of);
	if (err)
		return 0;
	*of = (int)ctl_int_of(ans, "queueLength");
	json_array_foreach(json_object_get(ans, "items"), i, x)
		if (!strcmp(ctl_str(x, "gprId"), id))
			pos = (int)ctl_int_of(x, "position");
	json_decref(ans);
	return pos;
}

/* ---- progress ---- */

struct progress {
	bool tty;
	bool live;       /* a live line is on the terminal */
	char state[32];  /* last state shown */
	char key[160];   /* state, position and estimate last printed (piped mode) */
};

static void clear_live(struct progress *p)
{
	if (p->live) {
		fputs("\r\033[K", stderr);
		p->live = false;
	}
}

/* A line that stays: a state change, or (piped) any change worth a line. */
static void progress_line(struct progress *p, const char *text)
{
	char ts[32];

	clear_live(p);
	egs_time_format((int64_t)time(NULL), ts, sizeof(ts));
	fprintf(stderr, "%s %s\n", ts, text);
	fflush(stderr);
}

static void progress_live(struct progress *p, const char *text)
{
	fprintf(stderr, "\r\033[K%.*s", 150, text);
	fflush(stderr);
	p->live = true;
}

/* Describes where the GPR g stands, e.g. "Queued: position 2 of 5, estimated start ... (in 1h2m)". */
static void describe_state(struct ctl *c, json_t *g, char *buf, size_t n, char *key, size_t keysz)
{
	json_t *st = json_object_get(g, "status");
	const char *state = ctl_str(st, "provisioningStatus"), *est = ctl_str(g, "estimatedStartTime"), *why;
	char in[48] = "";
	int64_t secs;
	int pos = 0, of = 0;

	if (!strcmp(state, "Queued"))
		pos = ctl_queue_position(c, ctl_str(g, "gprId"), &of);
	if (egs_duration_parse(ctl_str(g, "estimatedWaitTime"), &secs, &why))
		ctl_duration_text(secs, in, sizeof(in));
	snprintf(key, keysz, "%s|%d|%d|%s", state, pos, of, est);
	if (!strcmp(state, "Queued") && pos)
		snprintf(buf, n, "Queued: position %d of %d, estimated start %s%s%s%s", pos, of, *est ? est : "unknown",
			 *in ? " (in " : "", in, *in ? ")" : "");
	else if (!strcmp(state, "Queued"))
		snprintf(buf, n, "Queued: estimated start %s", *est ? est : "unknown");
	else if (!strcmp(state, "Pending"))
		snprintf(buf, n, "Pending: waiting for an admin's approval%s%s", *ctl_str(st, "pendingReason") ? ": " : "",
			 ctl_str(st, "pendingReason"));
	else if (!strcmp(state, "Provisioned"))
		snprintf(buf, n, "Provisioned: %lld GPUs until %s", ctl_int_of(st, "numGpusAllocated"),
			 *ctl_str(st, "exitTimestamp") ? ctl_str(st, "exitTimestamp") : "its exit time");
	else if (*ctl_str(st, "failureReason"))
		snprintf(buf, n, "%s: %s", state, ctl_str(st, "failureReason"));
	else
		snprintf(buf, n, "%s", state);
}

/* Shows g: a lasting line for a new state (or, piped, any change), the live line otherwise. */
static void progress_show(struct ctl *c, struct progress *p, json_t *g)
{
	char what[400], line[600], key[160];
	const char *state = ctl_str(json_object_get(g, "status"), "provisioningStatus");
	bool new_state = strcmp(state, p->state) != 0;

	describe_state(c, g, what, sizeof(what), key, sizeof(key));
	snprintf(line, sizeof(line), "gpr/%s (%s) %s", ctl_str(g, "gprId"), ctl_str(g, "gprName"), what);
	if (new_state || (!p->tty && strcmp(key, p->key) != 0))
		progress_line(p, line);
	else if (p->tty)
		progress_live(p, line);
	egs_strlcpy(p->state, state, sizeof(p->state));
	egs_strlcpy(p->key, key, sizeof(p->key));
}

/* ---- the wait ---- */

/* Can a GPR in state still reach want?  Finished states are final; Releasing only ends. */
static bool reachable(const char *state, const char *want)
{
	static const char *const final[] = {"Complete", "Cancelled", "Rejected", "Error", "Failed"};

	for (size_t i = 0; i < EGS_ARRAY_LEN(final); i++)
		if (!strcmp(state, final[i]))
			return false;
	if (!strcmp(state, "Releasing"))
		return !strcmp(want, "Complete");
	return true;
}

/* Sleeps up to secs, or less when interrupted. */
static void nap(double secs)
{
	struct timespec ts;

	if (secs <= 0)
		return;
	ts.tv_sec = (time_t)secs;
	ts.tv_nsec = (long)((secs - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

#define KEEP_WAITING (-1)

/* One poll: KEEP_WAITING, else the wait's exit code.  *g receives the GPR (caller frees). */
static int poll_once(struct ctl *c, const char *id, const char *want, struct progress *p, json_t **g)
{
	char what[160];
	enum egs_err err = egs_client_gpr_status(c->client, id, g);
	const char *state;

	if (interrupted)
		return CTL_INTERRUPTED;
	if (err == EGS_ERR_IO && egs_client_status(c->client) == 0) {
		progress_line(p, "the server does not answer; still trying");
		return KEEP_WAITING;
	}
	if (err) {
		clear_live(p);
		snprintf(what, sizeof(what), "wait for gpr %s", id);
		return ctl_fail(c, err, what);
	}
	progress_show(c, p, *g);
	state = ctl_str(json_object_get(*g, "status"), "provisioningStatus");
	if (!strcmp(state, want))
		return CTL_OK;
	if (!reachable(state, want))
		return CTL_NEVER;
	return KEEP_WAITING;
}

static void install_sigint(struct sigaction *old)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, old);
}

/* Says how the wait ended, on stdout for success and stderr otherwise. */
static int report_end(struct ctl *c, int rc, const char *id, const char *want, json_t *g, int64_t timeout_s)
{
	char d[32];
	const char *state = ctl_str(json_object_get(g, "status"), "provisioningStatus");

	ctl_duration_text(timeout_s, d, sizeof(d));
	if (rc == CTL_OK)
		printf("gpr/%s condition met: %s\n", id, want);
	else if (rc == CTL_NEVER)
		ctl_errorf(c, rc, "gpr %s is %s and can no longer become %s%s%s", id, state, want,
			   *ctl_str(json_object_get(g, "status"), "failureReason") ? ": " : "",
			   ctl_str(json_object_get(g, "status"), "failureReason"));
	else if (rc == CTL_TIMEOUT)
		ctl_errorf(c, rc, "timed out after %s waiting for gpr %s to be %s (it is %s)", d, id, want,
			   *state ? state : "unknown");
	else if (rc == CTL_INTERRUPTED)
		ctl_errorf(c, rc, "interrupted while waiting for gpr %s", id);
	return rc;
}

int ctl_wait_gpr(struct ctl *c, const char *id, const char *want, int64_t timeout_s, double deadline)
{
	struct progress p = {.tty = isatty(STDERR_FILENO) == 1};
	struct sigaction old;
	json_t *g = NULL;
	int rc;

	if (deadline == 0)
		deadline = ctl_mono() + (double)timeout_s;
	interrupted = 0;
	install_sigint(&old);
	egs_client_set_abort(c->client, abort_check, NULL);
	for (;;) {
		double start = ctl_mono(), step, left;
		json_decref(g);
		g = NULL;
		rc = poll_once(c, id, want, &p, &g);
		if (rc != KEEP_WAITING)
			break;
		left = deadline - ctl_mono();
		if (left <= 0) {
			rc = CTL_TIMEOUT;
			break;
		}
		step = 1.0 - (ctl_mono() - start); /* one poll a second, whatever the calls took */
		nap(step < left ? step : left);
		if (interrupted) {
			rc = CTL_INTERRUPTED;
			break;
		}
	}
	clear_live(&p);
	egs_client_set_abort(c->client, NULL, NULL);
	sigaction(SIGINT, &old, NULL);
	rc = report_end(c, rc, id, want, g, timeout_s);
	json_decref(g);
	return rc;
}

int ctl_cmd_wait(struct ctl *c, int argc, char **argv)
{
	const char *want = "condition=Provisioned", *timeout = "30m", *pos[17], *state, *ids[17];
	const struct ctl_opt opts[] = {{"for", 0, &want, NULL, NULL}, {"timeout", 0, &timeout, NULL, NULL},
				       {NULL, 0, NULL, NULL, NULL}};
	int npos, nids = 0, rc;
	int64_t secs;
	double deadline;
	bool help;

	rc = ctl_args(c, argc, argv, 1, opts, pos, 17, &npos, &help);
	if (rc || help) {
		return ctl_help(rc, help, wait_help);
	}
	for (int i = 0; i < npos; i++) /* "gpr ID..." or "gpr/ID..." */
		if (!strncasecmp(pos[i], "gpr/", 4))
			ids[nids++] = pos[i] + 4;
		else if (i > 0 || strcasecmp(pos[i], "gpr") != 0)
			ids[nids++] = pos[i];
	if (nids == 0)
		return ctl_usage(c, "usage: egsctl wait gpr ID... [--for=STATE] [--timeout=DURATION]");
	state = ctl_state_name(strncmp(want, "condition=", 10) ? want : want + 10);
	if (!state)
		return ctl_usage(c, "--for %s: expected a GPR state such as Provisioned or Complete", want);
	if (!ctl_duration(c, "--timeout", timeout, &secs) || !ctl_client(c, &rc))
		return rc ? rc : CTL_USAGE;
	deadline = ctl_mono() + (double)secs;
	for (int i = 0; i < nids && rc == CTL_OK; i++)
		rc = ctl_wait_gpr(c, ids[i], state, secs, deadline);
	return rc;
}
