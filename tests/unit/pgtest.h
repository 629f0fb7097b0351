/*
 * pgtest.h: a throwaway PostgreSQL server for unit tests, started through tests/api/pgserver.py
 * (initdb and pg_ctl in a temporary directory, a unix socket there, no TCP port).  The path of
 * the script is relative to the repository root, where `make unit` runs the tests; EGS_PGSERVER
 * overrides it.  Header-only: the test that includes it is its only user.
 */
#ifndef EGS_TEST_PGTEST_H
#define EGS_TEST_PGTEST_H

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pgtest {
	char dir[256];
	char url[512]; /* of the database "egs" */
};

static const char *pgtest_script(void)
{
	const char *s = getenv("EGS_PGSERVER");
	return s && *s ? s : "tests/api/pgserver.py";
}

/* Runs "pgserver.py VERB DIR"; when out is given, its first output line goes there. */
static bool pgtest_run(const char *verb, const char *dir, char *out, size_t n)
{
	char cmd[768];
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %s %s", pgtest_script(), verb, dir);
	FILE *p = popen(cmd, "r");
	if (!p)
		return false;
	char line[512] = "";
	if (!fgets(line, sizeof(line), p))
		line[0] = '\0';
	line[strcspn(line, "\n")] = '\0';
	if (out)
		egs_strlcpy(out, line, n);
	return pclose(p) == 0;
}

/* Starts a server; false (with a line on stderr) when PostgreSQL cannot run here. */
static bool pgtest_start(struct pgtest *t)
{
	const char *base = getenv("TMPDIR");
	snprintf(t->dir, sizeof(t->dir), "%.200s/egs-test-pg-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(t->dir) || !pgtest_run("start", t->dir, t->url, sizeof(t->url)) ||
	    strncmp(t->url, "postgres", 8) != 0) {
		fprintf(stderr, "pgtest: cannot start PostgreSQL with %s in %s\n", pgtest_script(), t->dir);
		return false;
	}
	return true;
}

static void pgtest_cleanup(struct pgtest *t)
{
	pgtest_run("cleanup", t->dir, NULL, 0);
}

static void pgtest_quiet(void *arg, const char *msg)
{
	(void)arg;
	(void)msg; /* NOTICEs such as "schema already exists, skipping" */
}

/* Runs sql on url; returns whether it succeeded. */
static bool pgtest_exec(const char *url, const char *sql)
{
	PGconn *c = PQconnectdb(url);
	PQsetNoticeProcessor(c, pgtest_quiet, NULL);
	PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
	bool ok = r && (PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK);
	if (!ok)
		fprintf(stderr, "pgtest: %s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
	return ok;
}

#endif
