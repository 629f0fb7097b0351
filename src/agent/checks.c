/*
 * checks.c: the check runner and what is done with its reports: the one-line summary that goes into
 * an action result, the JSON form, and the per-GPR log files (see checks.h).  The checks themselves
 * are in checks_builtin.c.
 */
#include "agent/checks.h"

#include "agent/clock.h"
#include "core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOG_SUFFIX ".jsonl"

const char *egs_check_phase_name(enum egs_check_phase phase)
{
	return phase == EGS_CHECK_PRE ? "pre" : "post";
}

static const char *status_name(enum egs_check_status s)
{
	return s == EGS_CHECK_PASSED ? "passed" : s == EGS_CHECK_FAILED ? "failed" : "skipped";
}

unsigned egs_checks_all(enum egs_check_phase phase)
{
	size_t n;
	const struct egs_check *c = egs_checks_builtin(&n);
	unsigned set = 0;

	for (size_t i = 0; i < n; i++)
		if (c[i].phases & phase)
			set |= 1u << i;
	return set;
}

enum egs_err egs_checks_parse_list(const char *list, enum egs_check_phase phase, unsigned *set, char *err,
				   size_t errsz)
{
	size_t n;
	const struct egs_check *c = egs_checks_builtin(&n);
	const char *p = list;

	*set = 0;
	if (strcmp(list, "none") == 0)
		return EGS_OK;
	while (*p) {
		size_t len = strcspn(p, ","), i;
		for (i = 0; i < n; i++)
			if (strlen(c[i].name) == len && strncmp(c[i].name, p, len) == 0)
				break;
		if (len == 0) {
			p++;
			continue;
		}
		if (i == n) {
			snprintf(err, errsz, "unknown check '%.*s'", (int)len, p);
			return EGS_ERR_INVALID;
		}
		if (!(c[i].phases & phase)) {
			snprintf(err, errsz, "check '%s' does not run %s", c[i].name,
				 phase == EGS_CHECK_PRE ? "before an attach" : "after a detach");
			return EGS_ERR_INVALID;
		}
		*set |= 1u << i;
		p += len;
		if (*p == ',')
			p++;
	}
	return EGS_OK;
}

void egs_checks_run(const struct egs_check_ctx *ctx, struct egs_check_report *rep)
{
	size_t n;
	const struct egs_check *c = egs_checks_builtin(&n);
	unsigned set = ctx->phase == EGS_CHECK_PRE ? ctx->cfg->pre : ctx->cfg->post;

	memset(rep, 0, sizeof(*rep));
	rep->phase = ctx->phase;
	rep->failed = -1;
	for (size_t i = 0; i < n && rep->n < EGS_CHECKS_MAX; i++) {
		struct egs_check_result *r;
		int64_t t0;
		if (!(set & (1u << i)) || !(c[i].phases & ctx->phase))
			continue;
		r = &rep->results[rep->n];
		r->name = c[i].name;
		t0 = egs_clock_ms();
		if (c[i].costly && rep->failed >= 0) {
			r->status = EGS_CHECK_SKIPPED;
			snprintf(r->output, sizeof(r->output), "not run: %s failed", rep->results[rep->failed].name);
		} else {
			r->status = c[i].run(ctx, r->output, sizeof(r->output));
		}
		r->duration_ms = egs_clock_ms() - t0;
		if (r->status == EGS_CHECK_FAILED && rep->failed < 0)
			rep->failed = (int)rep->n;
		rep->n++;
	}
}

bool egs_checks_ok(const struct egs_check_report *rep)
{
	return rep->failed < 0;
}

/* Appends the names of rep's results with status s to buf (at *k), after label; returns how many. */
static size_t list_names(const struct egs_check_report *rep, enum egs_check_status s, const char *label,
			 char *buf, size_t n, size_t *k)
{
	size_t count = 0;

	for (size_t i = 0; i < rep->n; i++) {
		int w;
		if (rep->results[i].status != s)
			continue;
		w = snprintf(buf + *k, n - *k, "%s%s", count ? ", " : label, rep->results[i].name);
		if (w < 0 || (size_t)w >= n - *k) {
			*k = n - 1;
			return count + 1;
		}
		*k += (size_t)w;
		count++;
	}
	return count;
}

void egs_checks_summary(const struct egs_check_report *rep, char *buf, size_t n)
{
	const char *phase = egs_check_phase_name(rep->phase);
	size_t k = 0;
	int w;

	buf[0] = '\0';
	if (rep->failed >= 0) {
		const struct egs_check_result *r = &rep->results[rep->failed];
		snprintf(buf, n, "%s-check %s failed: %s", phase, r->name, r->output);
		return;
	}
	if (rep->n == 0) {
		snprintf(buf, n, "no %s-checks enabled", phase);
		return;
	}
	w = snprintf(buf, n, "%s-checks ", phase);
	if (w < 0 || (size_t)w >= n)
		return;
	k = (size_t)w;
	if (list_names(rep, EGS_CHECK_PASSED, "passed: ", buf, n, &k) == 0) {
		w = snprintf(buf + k, n - k, "passed");
		k += w > 0 && (size_t)w < n - k ? (size_t)w : 0;
	}
	list_names(rep, EGS_CHECK_SKIPPED, "; skipped: ", buf, n, &k);
}

json_t *egs_checks_json(const struct egs_check_report *rep)
{
	json_t *a = json_array();

	for (size_t i = 0; i < rep->n; i++) {
		const struct egs_check_result *r = &rep->results[i];
		json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I}", "name", r->name, "phase",
				      egs_check_phase_name(rep->phase), "status", status_name(r->status), "output",
				      r->output, "durationMs", (json_int_t)r->duration_ms);
		if (!o) /* output that is not UTF-8 (a command printed bytes): keep the result, not the text */
			o = json_pack("{s:s, s:s, s:s, s:s, s:I}", "name", r->name, "phase",
				      egs_check_phase_name(rep->phase), "status", status_name(r->status), "output",
				      "(output not UTF-8)", "durationMs", (json_int_t)r->duration_ms);
		json_array_append_new(a, o);
	}
	return a;
}

/* GPR ids become file names: refuse anything that could leave the directory. */
static bool file_name_ok(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n < 128 && s[0] != '.' && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
							    "0123456789._-") == n;
}

enum egs_err egs_checks_log_append(const char *dir, const char *cluster, const char *gpr_id, const char *node,
				   int64_t now, const struct egs_check_report *rep, char *err, size_t errsz)
{
	char path[4096], when[32], *line = NULL;
	enum egs_err rc = EGS_ERR_IO;
	json_t *o;
	int fd = -1;

	if (!file_name_ok(gpr_id)) {
		snprintf(err, errsz, "GPR id '%.64s' cannot name a file", gpr_id);
		return EGS_ERR_INVALID;
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		snprintf(err, errsz, "%s: %s", dir, strerror(errno));
		return EGS_ERR_IO;
	}
	snprintf(path, sizeof(path), "%s/%s%s", dir, gpr_id, LOG_SUFFIX);
	egs_time_format(now, when, sizeof(when));
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:o}", "time", when, "cluster", cluster, "gprId", gpr_id,
		      "node", node, "phase", egs_check_phase_name(rep->phase), "ok", egs_checks_ok(rep), "checks",
		      egs_checks_json(rep));
	EGS_ASSERT(o); /* every string is UTF-8: names are labels, outputs were checked by egs_checks_json */
	line = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	EGS_ASSERT(line);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0 || dprintf(fd, "%s\n", line) < 0) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		goto out;
	}
	rc = EGS_OK;
out:
	if (fd >= 0)
		close(fd);
	free(line);
	return rc;
}

size_t egs_checks_log_prune(const char *dir, int64_t now, int64_t max_age_s)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t removed = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name), sl = strlen(LOG_SUFFIX);
		struct stat st;
		if (len <= sl || strcmp(e->d_name + len - sl, LOG_SUFFIX) != 0)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
			continue;
		if ((int64_t)st.st_mtime < now - max_age_s && unlinkat(dirfd(d), e->d_name, 0) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}
