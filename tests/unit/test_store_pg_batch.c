/*
 * test_store_pg_batch.c: the PostgreSQL store's batched turn (store_pg_batch.c) against a real
 * server of its own (pgtest.h).
 *
 * The binary arrays first: hostile strings (quotes, backslashes, braces, commas, the words NULL
 * and null, SQL NULL, the empty string, whitespace, control characters, multi-byte UTF-8) and
 * extreme numbers, bytes and JSON go through egs__pg_batch_* and come back from the server's
 * unnest() one for one; doubles' edges bit for bit, a long string, a string that is not UTF-8
 * refused by the server, a value of the wrong type refused before it is sent.  Then the store as a whole: one turn holding hostile strings in every kind
 * of text column (GPR, document, event, audit entry) loads back equal; a turn that puts and deletes
 * the same keys keeps only the last change of each, as SQLite's row-at-a-time turn does; a turn
 * larger than EGS_PG_BATCH_ROWS lands whole; rows known new go in as plain INSERTs, and a wrong guess
 * or a turn sent again after its commit sends the turn again as upserts; the logs' BRIN time indexes
 * serve pruning and the audit listing exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "store/store_pg.h"

#include "pgtest.h"

static struct pgtest pg;

/* Every entry goes through as a string; NULL stands for SQL NULL. */
static const char *const hostile[] = {
	"", "NULL", "null", " NULL ", "\"NULL\"", NULL, "\"", "\\", "\\\\", "\\\"", "\"\\", "{", "}", "{}",
	"{a,b}", "{\"a\",NULL}", ",", ",,", " ", "  two  spaces  ", "a\tb\nc\rd", "\x01\x1f", "'", "''; DROP TABLE x; --",
	"$1", "(1,2)", "[1:2]={3,4}", "\\x00ff", "E'\\n'", "\xc3\xbc\xe2\x9c\x93 \xe6\xbc\xa2\xe5\xad\x97 \xf0\x9f\x8e\x89",
	"end\\", "\x7f", "\xef\xbb\xbf", "\xf0\x9f\x98\x80\xf0\x90\x8d\x88",
};
#define NHOSTILE (sizeof(hostile) / sizeof(hostile[0]))

static PGconn *connect_db(void)
{
	PGconn *c = PQconnectdb(pg.url);
	assert_int_equal(PQstatus(c), CONNECTION_OK);
	return c;
}

/* The hostile strings, as one text column, come back from unnest() unchanged and in order. */
static void test_text_array_roundtrip(void **unused)
{
	(void)unused;
	struct egs_pg_batch b = { 0 };
	struct egs_row_binder rb = egs__pg_batch_binder(&b);
	egs__pg_batch_start(&b, 1, NULL);
	for (size_t i = 0; i < NHOSTILE; i++) {
		egs__pg_batch_row_begin(&b);
		rb.text(rb.ctx, hostile[i]);
		assert_true(egs__pg_batch_row_end(&b));
	}
	const char *const *v = egs__pg_batch_finish(&b);
	PGconn *c = connect_db();
	PGresult *r = PQexecParams(c, "SELECT x IS NULL, x FROM unnest($1::text[]) WITH ORDINALITY AS u(x, i) ORDER BY i",
				   1, NULL, v, b.lengths, b.formats, 0);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_int_equal(PQntuples(r), NHOSTILE);
	for (size_t i = 0; i < NHOSTILE; i++) {
		if (!hostile[i]) {
			assert_string_equal(PQgetvalue(r, (int)i, 0), "t");
			continue;
		}
		assert_string_equal(PQgetvalue(r, (int)i, 0), "f");
		assert_string_equal(PQgetvalue(r, (int)i, 1), hostile[i]);
	}
	PQclear(r);
	PQfinish(c);
	egs__pg_batch_cleanup(&b);
}

/* Numbers, bytes and JSON in their own columns of the same rows: bigint extremes, doubles that
 * need 17 digits, bytea with 0x00, 0x5c (a backslash) and 0x22 (a quote), JSON with quotes and
 * backslashes in it.  A second batch on the same buffers starts empty. */
static void test_typed_columns_roundtrip(void **unused)
{
	(void)unused;
	static const int64_t ints[] = { INT64_MIN, -1, 0, INT64_MAX };
	static const double reals[] = { -0.1, 1e-300, 0.30000000000000004, 1.7976931348623157e308 };
	static const unsigned char bytes[4][3] = { { 0, 0, 0 }, { 0x5c, 0x22, 0x2c }, { 0x7b, 0x7d, 0xff }, { 1, 2, 3 } };
	struct egs_pg_batch b = { 0 };
	struct egs_row_binder rb = egs__pg_batch_binder(&b);
	egs__pg_batch_start(&b, 1, NULL);
	egs__pg_batch_key(&b, "left over"); /* dropped by the next start */
	egs__pg_batch_start(&b, 4, NULL);
	for (int i = 0; i < 4; i++) {
		egs__pg_batch_row_begin(&b);
		rb.int64(rb.ctx, ints[i]);
		rb.real(rb.ctx, reals[i]);
		rb.blob(rb.ctx, bytes[i], 3);
		rb.json(rb.ctx, json_pack("[s, s, i]", hostile[6 + i], "{\"k\": \"\\\\\"}", i));
		assert_true(egs__pg_batch_row_end(&b));
	}
	const char *const *v = egs__pg_batch_finish(&b);
	PGconn *c = connect_db();
	PGresult *r = PQexecParams(c,
				   "SELECT a::text, encode(c, 'hex'), d FROM "
				   "unnest($1::bigint[], $2::double precision[], $3::bytea[], $4::text[]) "
				   "WITH ORDINALITY AS u(a, b, c, d, i) ORDER BY i",
				   4, NULL, v, b.lengths, b.formats, 0);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_int_equal(PQntuples(r), 4);
	for (int i = 0; i < 4; i++) {
		char num[32], hex[8];
		snprintf(num, sizeof(num), "%" PRId64, ints[i]);
		assert_string_equal(PQgetvalue(r, i, 0), num);
		snprintf(hex, sizeof(hex), "%02x%02x%02x", bytes[i][0], bytes[i][1], bytes[i][2]);
		assert_string_equal(PQgetvalue(r, i, 1), hex);
		json_t *j = json_loads(PQgetvalue(r, i, 2), 0, NULL);
		assert_non_null(j);
		assert_string_equal(json_string_value(json_array_get(j, 0)), hostile[6 + i]);
		assert_string_equal(json_string_value(json_array_get(j, 1)), "{\"k\": \"\\\\\"}");
		json_decref(j);
	}
	PQclear(r);
	/* The doubles exactly: compared on the server, bit for bit after the text round trip. */
	r = PQexecParams(c, "SELECT bool_and(x = y) FROM unnest($1::double precision[], "
			    "ARRAY[-0.1, 1e-300, 0.30000000000000004, 1.7976931348623157e308]::double precision[]) AS u(x, y)",
			 1, NULL, (const char *const[]){ v[1] }, (const int[]){ b.lengths[1] }, (const int[]){ 1 }, 0);
	assert_string_equal(PQgetvalue(r, 0, 0), "t");
	PQclear(r);
	/* A column bound as int8 where the statement says text is refused by the server, not converted. */
	r = PQexecParams(c, "SELECT unnest($1::text[])", 1, NULL, v, b.lengths, b.formats, 0);
	assert_int_equal(PQresultStatus(r), PGRES_FATAL_ERROR);
	PQclear(r);
	PQfinish(c);
	egs__pg_batch_cleanup(&b);
}

/* What the binary form carries that text would have to spell: doubles' -0, infinities, NaN and the
 * smallest denormal bit for bit; a 100,000-byte string of quotes, backslashes and braces; and a
 * string that is not UTF-8 is refused by the server (it checks each element's encoding), not stored. */
static void test_binary_edges(void **unused)
{
	(void)unused;
	static const double reals[] = { -0.0, 1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0, 4.9406564584124654e-324 };
	static const char *const want[] = { "-0", "Infinity", "-Infinity", "NaN", "5e-324" };
	struct egs_pg_batch b = { 0 };
	struct egs_row_binder rb = egs__pg_batch_binder(&b);
	char *big = egs_malloc(100001);
	for (int i = 0; i < 100000; i++)
		big[i] = "\"\\{},x"[i % 6];
	big[100000] = '\0';
	egs__pg_batch_start(&b, 2, NULL);
	for (int i = 0; i < 5; i++) {
		egs__pg_batch_row_begin(&b);
		rb.real(rb.ctx, reals[i]);
		rb.text(rb.ctx, i == 0 ? big : NULL);
		assert_true(egs__pg_batch_row_end(&b));
	}
	const char *const *v = egs__pg_batch_finish(&b);
	PGconn *c = connect_db();
	PGresult *r = PQexecParams(c,
				   "SELECT x::text, y IS NULL, y FROM unnest($1::double precision[], $2::text[]) "
				   "WITH ORDINALITY AS u(x, y, i) ORDER BY i",
				   2, NULL, v, b.lengths, b.formats, 0);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_int_equal(PQntuples(r), 5);
	for (int i = 0; i < 5; i++) {
		assert_string_equal(PQgetvalue(r, i, 0), want[i]);
		assert_string_equal(PQgetvalue(r, i, 1), i == 0 ? "f" : "t");
	}
	assert_string_equal(PQgetvalue(r, 0, 2), big);
	PQclear(r);
	/* -0 is not 0 bit for bit: its sign survives. */
	r = PQexecParams(c, "SELECT (unnest($1::double precision[]))::text", 1, NULL, v, b.lengths, b.formats, 0);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_string_equal(PQgetvalue(r, 0, 0), "-0");
	PQclear(r);
	egs__pg_batch_start(&b, 1, NULL);
	egs__pg_batch_key(&b, "ok");
	egs__pg_batch_key(&b, "\xc3(");
	v = egs__pg_batch_finish(&b);
	r = PQexecParams(c, "SELECT unnest($1::text[])", 1, NULL, v, b.lengths, b.formats, 0);
	assert_int_equal(PQresultStatus(r), PGRES_FATAL_ERROR);
	assert_string_equal(PQresultErrorField(r, PG_DIAG_SQLSTATE), "22021"); /* character_not_in_repertoire */
	PQclear(r);
	/* A value bound as another type than its column's fails its row in egsd; a NULL fits any. */
	static const uint32_t int8_col[1] = { 20 };
	egs__pg_batch_start(&b, 1, int8_col);
	egs__pg_batch_row_begin(&b);
	rb.text(rb.ctx, NULL);
	assert_true(egs__pg_batch_row_end(&b));
	egs__pg_batch_row_begin(&b);
	rb.text(rb.ctx, "7");
	assert_false(egs__pg_batch_row_end(&b));
	assert_non_null(b.why);
	PQfinish(c);
	free(big);
	egs__pg_batch_cleanup(&b);
}

/* ---- the store ---- */

static struct egs_store *open_pg(const char *schema)
{
	char sql[128], url[768];
	snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s", schema, schema);
	assert_true(pgtest_exec(pg.url, sql));
	snprintf(url, sizeof(url), "%s&options=-csearch_path%%3D%s", pg.url, schema);
	struct egs_store *s = NULL;
	assert_int_equal(egs_store_open(url, &s), EGS_OK);
	return s;
}

static void commit(struct egs_store *s, struct egs_state *st)
{
	assert_int_equal(egs_store_commit_changes(s, st), EGS_OK);
	egs_state_clear_changes(st);
}

static struct egs_gpr *mk_gpr(const char *id, uint64_t seq)
{
	struct egs_gpr *g = egs_gpr_new();
	egs_strlcpy(g->id, id, sizeof(g->id));
	egs_strlcpy(g->workspace, "ws", sizeof(g->workspace));
	g->gpus_per_node = 1;
	g->node_count = 1;
	g->state = EGS_GPR_QUEUED;
	g->seq = seq;
	return g;
}

static void expect_str(const char *got, const char *want)
{
	if (!want)
		assert_null(got);
	else
		assert_string_equal(got ? got : "(null)", want);
}

/* One turn with a hostile string in the text columns of a GPR, a document, an event and an audit
 * entry per hostile string: all load back as written (SQL NULL stays NULL where a column allows
 * it, and "NULL" stays the string). */
static void test_hostile_rows_roundtrip(void **unused)
{
	(void)unused;
	struct egs_store *s = open_pg("hostile");
	struct egs_state st, back;
	char id[EGS_ID_MAX];
	egs_state_init(&st, NULL);
	for (size_t i = 0; i < NHOSTILE; i++) {
		const char *h = hostile[i] ? hostile[i] : "NULL";
		snprintf(id, sizeof(id), "gpr-%02zu", i);
		struct egs_gpr *g = mk_gpr(id, i + 1);
		egs_strlcpy(g->name, h, sizeof(g->name));
		g->failure_reason = egs_strdup(hostile[i]);
		g->pending_reason = egs_strdup(hostile[(i + 5) % NHOSTILE]);
		egs_strlist_add(&g->preferred_clusters, h);
		assert_int_equal(egs_state_add_gpr(&st, g), EGS_OK);
		egs_state_touch(&st, EGS_KIND_GPR, g);
		struct egs_doc *d = egs_calloc(1, sizeof(*d));
		snprintf(d->name, sizeof(d->name), "doc-%02zu", i);
		egs_strlcpy(d->project, h, sizeof(d->project));
		d->spec = egs_strdup(h);
		assert_int_equal(egs_state_add_doc(&st, EGS_KIND_TEMPLATE, d), EGS_OK);
		egs_state_touch(&st, EGS_KIND_TEMPLATE, d);
		egs_state_event(&st, 1700000000, "Normal", h, "GPR", id, h, "%s", h);
		struct egs_audit *a = egs_calloc(1, sizeof(*a));
		a->time = 1700000000 + (int64_t)i;
		egs_strlcpy(a->target, h, sizeof(a->target));
		egs_strlcpy(a->peer, h, sizeof(a->peer));
		a->status = 200;
		egs_state_audit(&st, a);
	}
	commit(s, &st);
	egs_state_init(&back, NULL);
	assert_int_equal(egs_store_load(s, &back), EGS_OK);
	assert_int_equal(back.events_len, NHOSTILE);
	for (size_t i = 0; i < NHOSTILE; i++) {
		const char *h = hostile[i] ? hostile[i] : "NULL";
		snprintf(id, sizeof(id), "gpr-%02zu", i);
		struct egs_gpr *g = egs_state_gpr(&back, id);
		assert_non_null(g);
		assert_string_equal(g->name, h);
		expect_str(g->failure_reason, hostile[i]);
		expect_str(g->pending_reason, hostile[(i + 5) % NHOSTILE]);
		assert_int_equal(g->preferred_clusters.n, 1);
		assert_string_equal(g->preferred_clusters.v[0], h);
		char name[EGS_NAME_MAX];
		snprintf(name, sizeof(name), "doc-%02zu", i);
		struct egs_doc *d = egs_state_doc(&back, EGS_KIND_TEMPLATE, name);
		assert_non_null(d);
		assert_string_equal(d->project, h);
		assert_string_equal(d->spec, h);
		const struct egs_event *ev = back.events[(back.events_head + i) % back.cfg.event_retention];
		assert_string_equal(ev->reason, h);
		assert_string_equal(ev->workspace, h);
		assert_string_equal(ev->message, h);
	}
	struct egs_vec audit = { 0 };
	struct egs_audit_filter f = { .limit = 1000 };
	assert_int_equal(egs_store_audit_list(s, &f, &audit), EGS_OK);
	assert_int_equal(audit.len, NHOSTILE);
	for (size_t i = 0; i < audit.len; i++) {
		const struct egs_audit *a = audit.items[i];
		assert_string_equal(a->target, hostile[i] ? hostile[i] : "NULL");
		assert_string_equal(a->peer, hostile[i] ? hostile[i] : "NULL");
		free(audit.items[i]);
	}
	egs_vec_cleanup(&audit);
	egs_state_cleanup(&back);
	egs_state_cleanup(&st);
	egs_store_free(s);
}

/* Within one turn only the last change of a key counts: created then deleted is absent, deleted
 * then created anew is present with the new row, touched twice is written once; a turn of more
 * rows than one statement carries (EGS_PG_BATCH_ROWS) lands whole. */
static void test_turn_keeps_last_change(void **unused)
{
	(void)unused;
	struct egs_store *s = open_pg("lastchange");
	struct egs_state st, back;
	char id[EGS_ID_MAX];
	egs_state_init(&st, NULL);
	struct egs_gpr *old = mk_gpr("gpr-recreated", 1), *gone = mk_gpr("gpr-gone", 2);
	egs_strlcpy(old->name, "old", sizeof(old->name));
	assert_int_equal(egs_state_add_gpr(&st, old), EGS_OK);
	egs_state_touch(&st, EGS_KIND_GPR, old);
	assert_int_equal(egs_state_add_gpr(&st, gone), EGS_OK);
	egs_state_touch(&st, EGS_KIND_GPR, gone);
	commit(s, &st);

	/* One turn: the old row deleted and a new one with its key created; a new GPR created and
	 * deleted; another created, touched, changed and touched again; 1,500 more. */
	egs_state_del(&st, EGS_KIND_GPR, old);
	struct egs_gpr *fresh = mk_gpr("gpr-recreated", 3);
	egs_strlcpy(fresh->name, "new", sizeof(fresh->name));
	assert_int_equal(egs_state_add_gpr(&st, fresh), EGS_OK);
	egs_state_touch(&st, EGS_KIND_GPR, fresh);
	struct egs_gpr *brief = mk_gpr("gpr-brief", 4);
	assert_int_equal(egs_state_add_gpr(&st, brief), EGS_OK);
	egs_state_touch(&st, EGS_KIND_GPR, brief);
	egs_state_del(&st, EGS_KIND_GPR, brief);
	egs_state_del(&st, EGS_KIND_GPR, gone);
	struct egs_gpr *twice = mk_gpr("gpr-twice", 5);
	assert_int_equal(egs_state_add_gpr(&st, twice), EGS_OK);
	egs_state_touch(&st, EGS_KIND_GPR, twice);
	egs_strlcpy(twice->name, "second", sizeof(twice->name));
	egs_state_touch(&st, EGS_KIND_GPR, twice);
	for (int i = 0; i < EGS_PG_BATCH_ROWS + 476; i++) {
		snprintf(id, sizeof(id), "gpr-many-%04d", i);
		struct egs_gpr *g = mk_gpr(id, 100 + (uint64_t)i);
		assert_int_equal(egs_state_add_gpr(&st, g), EGS_OK);
		egs_state_touch(&st, EGS_KIND_GPR, g);
	}
	commit(s, &st);

	egs_state_init(&back, NULL);
	assert_int_equal(egs_store_load(s, &back), EGS_OK);
	assert_int_equal(back.gprs.len, 2 + EGS_PG_BATCH_ROWS + 476);
	assert_string_equal(egs_state_gpr(&back, "gpr-recreated")->name, "new");
	assert_int_equal(egs_state_gpr(&back, "gpr-recreated")->seq, 3);
	assert_null(egs_state_gpr(&back, "gpr-brief"));
	assert_null(egs_state_gpr(&back, "gpr-gone"));
	assert_string_equal(egs_state_gpr(&back, "gpr-twice")->name, "second");
	assert_non_null(egs_state_gpr(&back, "gpr-many-1499"));
	/* gpr-recreated, new since the last commit, went in as a plain INSERT and met the old row (not
	 * deleted: the turn's last change of it is the put): the turn was sent again as upserts. */
	assert_int_equal(((struct pg_store *)s)->resent, 1);
	egs_state_cleanup(&back);
	egs_state_cleanup(&st);
	egs_store_free(s);
}

static void add_audit(struct egs_state *st, const char *target)
{
	struct egs_audit *a = egs_calloc(1, sizeof(*a));
	a->time = 1700000000;
	egs_strlcpy(a->target, target, sizeof(a->target));
	a->status = 200;
	egs_state_audit(st, a);
}

/* Rows known new go in as plain INSERTs, beside upserts of stored rows in the same turn, without a
 * retry; a guess that was wrong, and a turn sent again whole after it committed (a COMMIT whose
 * answer was lost), are sent again as upserts and leave each row once, as the turn wrote it. */
static void test_new_rows_plain_insert(void **unused)
{
	(void)unused;
	struct egs_store *s = open_pg("fresh");
	struct pg_store *ps = (struct pg_store *)s;
	struct egs_state st, back;
	egs_state_init(&st, NULL);
	struct egs_gpr *a = mk_gpr("gpr-a", 1);
	assert_int_equal(egs_state_add_gpr(&st, a), EGS_OK);
	egs_state_touch(&st, EGS_KIND_GPR, a);
	egs_state_event(&st, 1700000000, "Normal", "Created", "GPR", "gpr-a", "ws", "one");
	add_audit(&st, "first");
	commit(s, &st); /* the first turn after a start: all upserts (nothing known yet) */
	assert_int_equal(ps->seq_floor, st.next_seq);

	/* Turn 2: a stored GPR changed, a new one, a repeat of the stored event, a new event and audit
	 * entry: all guesses right, no retry. */
	egs_strlcpy(a->name, "changed", sizeof(a->name));
	egs_state_touch(&st, EGS_KIND_GPR, a);
	struct egs_gpr *b = mk_gpr("gpr-b", st.next_seq);
	assert_int_equal(egs_state_add_gpr(&st, b), EGS_OK);
	egs_state_touch(&st, EGS_KIND_GPR, b);
	egs_state_event_repeat(&st, 1700000001, 60, "Normal", "Created", "GPR", "gpr-a", "ws", "two");
	egs_state_event(&st, 1700000001, "Normal", "Created", "GPR", "gpr-b", "ws", "b");
	add_audit(&st, "second");
	assert_true(egs__pg_fresh(ps, st.changes.items[1]));  /* b */
	assert_false(egs__pg_fresh(ps, st.changes.items[0])); /* a */
	commit(s, &st);
	assert_int_equal(ps->resent, 0);

	/* Turn 3, committed, then sent again as if its COMMIT's answer had been lost (the changes
	 * still there, b taken for new again): the plain INSERTs meet the stored keys. */
	uint64_t floor = ps->seq_floor;
	struct egs_gpr *c = mk_gpr("gpr-c", st.next_seq);
	assert_int_equal(egs_state_add_gpr(&st, c), EGS_OK);
	egs_state_touch(&st, EGS_KIND_GPR, c);
	egs_state_event(&st, 1700000002, "Normal", "Created", "GPR", "gpr-c", "ws", "c");
	add_audit(&st, "third");
	assert_int_equal(egs_store_commit_changes(s, &st), EGS_OK);
	assert_int_equal(ps->resent, 0);
	ps->seq_floor = floor;
	egs_strlcpy(c->name, "sent again", sizeof(c->name));
	commit(s, &st);
	assert_int_equal(ps->resent, 1);

	egs_state_init(&back, NULL);
	assert_int_equal(egs_store_load(s, &back), EGS_OK);
	assert_int_equal(back.gprs.len, 3);
	assert_string_equal(egs_state_gpr(&back, "gpr-a")->name, "changed");
	assert_non_null(egs_state_gpr(&back, "gpr-b"));
	assert_string_equal(egs_state_gpr(&back, "gpr-c")->name, "sent again");
	assert_int_equal(back.events_len, 3);
	const struct egs_event *ev = back.events[back.events_head % back.cfg.event_retention];
	assert_int_equal(ev->count, 2);
	assert_string_equal(ev->message, "two");
	struct egs_vec audit = { 0 };
	struct egs_audit_filter f = { .limit = 10 };
	assert_int_equal(egs_store_audit_list(s, &f, &audit), EGS_OK);
	assert_int_equal(audit.len, 3);
	for (size_t i = 0; i < audit.len; i++)
		free(audit.items[i]);
	egs_vec_cleanup(&audit);
	egs_state_cleanup(&back);
	egs_state_cleanup(&st);
	egs_store_free(s);
}

/* The logs' time indexes are BRIN (migration 15), and what reads them by time still finds exactly
 * the rows: 3,000 events and audit entries over 3,000 seconds, their ranges summarised, listed
 * between two times and pruned below one. */
static void test_log_time_brin(void **unused)
{
	(void)unused;
	struct egs_store *s = open_pg("brin");
	struct egs_state st;
	egs_state_init(&st, NULL);
	for (int i = 0; i < 3000; i++) {
		egs_state_event(&st, 1700000000 + i, "Normal", "Tick", "GPR", "gpr-x", "ws", "event %d", i);
		struct egs_audit *a = egs_calloc(1, sizeof(*a));
		a->time = 1700000000 + i;
		egs_strlcpy(a->target, "t", sizeof(a->target));
		a->status = 200;
		egs_state_audit(&st, a);
	}
	commit(s, &st);
	PGconn *c = connect_db();
	PGresult *r = PQexec(c, "SELECT string_agg(a.amname, ',' ORDER BY i.relname) FROM pg_class i "
				"JOIN pg_am a ON a.oid = i.relam JOIN pg_namespace n ON n.oid = i.relnamespace "
				"WHERE n.nspname = 'brin' AND i.relname IN ('audit_time', 'events_time')");
	assert_string_equal(PQgetvalue(r, 0, 0), "brin,brin");
	PQclear(r);
	PQclear(PQexec(c, "SELECT brin_summarize_new_values('brin.events_time'), "
			  "brin_summarize_new_values('brin.audit_time')"));
	PQfinish(c);
	struct egs_vec audit = { 0 };
	struct egs_audit_filter f = { .since = 1700001000, .until = 1700001010, .limit = 100 };
	assert_int_equal(egs_store_audit_list(s, &f, &audit), EGS_OK);
	assert_int_equal(audit.len, 10);
	assert_int_equal(((struct egs_audit *)audit.items[0])->time, 1700001000);
	for (size_t i = 0; i < audit.len; i++)
		free(audit.items[i]);
	egs_vec_cleanup(&audit);
	int64_t n = 0;
	assert_int_equal(egs_store_prune_events_below(s, 1700002000, 0, &n), EGS_OK);
	assert_int_equal(n, 2000);
	assert_int_equal(egs_store_audit_prune(s, 1700000500, &n), EGS_OK);
	assert_int_equal(n, 500);
	egs_state_cleanup(&st);
	egs_store_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_array_roundtrip),
		cmocka_unit_test(test_typed_columns_roundtrip),
		cmocka_unit_test(test_binary_edges),
		cmocka_unit_test(test_hostile_rows_roundtrip),
		cmocka_unit_test(test_turn_keeps_last_change),
		cmocka_unit_test(test_new_rows_plain_insert),
		cmocka_unit_test(test_log_time_brin),
	};
	if (!pgtest_start(&pg))
		return 1;
	int failed = cmocka_run_group_tests_name("postgres batch", tests, NULL, NULL);
	pgtest_cleanup(&pg);
	return failed;
}
