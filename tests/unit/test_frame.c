/*
 * test_frame.c: egsd's HTTP/1.1 request parser (server/frame.h) against hostile input: request
 * smuggling (two Content-Lengths, Content-Length with Transfer-Encoding, codings other than chunked,
 * bad chunk sizes and chunk ends), header folding, overlong heads and chunk lines, NUL and CR bytes,
 * and pipelined requests that arrive across read boundaries.  Every case is fed whole, byte by byte
 * and in 50 random splits (tests/unit/frame_feed.h, the way the front feeds it): the transcripts
 * (requests, fields, bodies, the refusal) must be the same and the one expected.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame_feed.h"

/* Feeds s (n bytes) every way; all must agree.  Returns the transcript (caller frees) and the
 * refusal. */
static char *feed_all(const char *s, size_t n, enum egs_frame_reason *why)
{
	enum egs_frame_reason w;
	char *whole = frame_transcript((const unsigned char *)s, n, 0, why);
	char *bytes = frame_transcript((const unsigned char *)s, n, 1, &w);
	if (w != *why || strcmp(whole, bytes) != 0)
		fail_msg("byte by byte differs:\n%s(%d)\nvs\n%s(%d)", whole, (int)*why, bytes, (int)w);
	free(bytes);
	for (int seed = 0; seed < 50; seed++) {
		rng_seed((uint64_t)seed);
		char *pieces = frame_transcript((const unsigned char *)s, n, 2, &w);
		if (w != *why || strcmp(whole, pieces) != 0)
			fail_msg("split (seed %d) differs:\n%s\nvs\n%s", seed, whole, pieces);
		free(pieces);
	}
	return whole;
}

/* s (a C string) is refused for want, after the requests whose transcript is before. */
static void refused(const char *s, enum egs_frame_reason want, const char *before)
{
	enum egs_frame_reason why;
	char *t = feed_all(s, strlen(s), &why);
	if (why != want)
		fail_msg("want reason %d, got %d for: %s\ntranscript: %s", (int)want, (int)why, s, t);
	char tail[32];
	snprintf(tail, sizeof(tail), "R%d\n", (int)want);
	size_t bl = strlen(before);
	if (strncmp(t, before, bl) != 0 || strcmp(t + bl, tail) != 0)
		fail_msg("transcript %s, want %s then %s", t, before, tail);
	free(t);
}

/* s is accepted with exactly this transcript. */
static void accepted(const char *s, size_t n, const char *want)
{
	enum egs_frame_reason why;
	char *t = feed_all(s, n, &why);
	if (why != EGS_FRAME_OK || strcmp(t, want) != 0)
		fail_msg("for %s\ngot (%d)\n%s\nwant\n%s", s, (int)why, t, want);
	free(t);
}

#define GET_OK "M0 v1.1 close=0 ka=0 T/healthz H Host=x B0:\n"

static void test_smuggling_refused(void **state)
{
	(void)state;
	const char *ok = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
	char buf[512];
	struct {
		const char *head;
		enum egs_frame_reason why;
	} cases[] = {
		{ "Content-Length: 2\r\nContent-Length: 2\r\n", EGS_FRAME_CL_TWICE },
		{ "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n", EGS_FRAME_CL_TE },
		{ "Transfer-Encoding: chunked\r\nContent-Length: 2\r\n", EGS_FRAME_CL_TE },
		{ "Transfer-Encoding: gzip\r\n", EGS_FRAME_TE },
		{ "Transfer-Encoding: gzip, chunked\r\n", EGS_FRAME_TE },
		{ "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", EGS_FRAME_TE },
		{ "Content-Length: 2x\r\n", EGS_FRAME_CL_BAD },
		{ "Content-Length: -1\r\n", EGS_FRAME_CL_BAD },
		{ "Content-Length: 2, 2\r\n", EGS_FRAME_CL_BAD },
		{ "Content-Length: 1234567890123456789\r\n", EGS_FRAME_CL_BAD },
		{ "Content-Length: 1048577\r\n", EGS_FRAME_BODY_BIG },
		{ "Content-Length : 2\r\n", EGS_FRAME_HEADER },
		{ "X-A: a\r\n folded\r\n", EGS_FRAME_HEADER },
		{ "X-A: a\r\n\tfolded\r\n", EGS_FRAME_HEADER },
		{ "Bad Header\r\n", EGS_FRAME_HEADER },
		{ ": empty-name\r\n", EGS_FRAME_HEADER },
		{ "X-A: a\rb\r\n", EGS_FRAME_HEADER },
		{ "Host: y\r\n", EGS_FRAME_HOST_TWICE },
		{ "Authorization: a\r\nAuthorization: b\r\n", EGS_FRAME_AUTH_TWICE },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* one good request first: it comes out; the refused one and all after it do not */
		snprintf(buf, sizeof(buf), "%sPOST /api/v1/auth HTTP/1.1\r\nHost: x\r\n%s\r\n{}%s", ok, cases[i].head, ok);
		refused(buf, cases[i].why, GET_OK);
	}
	refused("POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", EGS_FRAME_TE, "");
	refused("HEAD /a HTTP/1.1\r\nContent-Length: 1\r\n\r\nx", EGS_FRAME_HEAD_BODY, "");
	refused("HEAD /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", EGS_FRAME_HEAD_BODY, "");
}

static void test_request_line_refused(void **state)
{
	(void)state;
	refused("GARBAGE\r\n\r\n", EGS_FRAME_LINE, "");
	refused("GET /healthz HTTP/9.9\r\n\r\n", EGS_FRAME_VERSION, "");
	refused("GET /healthz HTTP/2\r\n\r\n", EGS_FRAME_VERSION, "");
	refused("GET /healthz\r\n\r\n", EGS_FRAME_LINE, "");
	refused("GET  /healthz HTTP/1.1\r\n\r\n", EGS_FRAME_LINE, "");
	refused("GET /a\x1b[31m HTTP/1.1\r\n\r\n", EGS_FRAME_LINE, "");
	refused("GET /a\x80 HTTP/1.1\r\n\r\n", EGS_FRAME_LINE, "");
	refused("GET /a\rb HTTP/1.1\r\n\r\n", EGS_FRAME_LINE, "");
	refused("GET a HTTP/1.1\r\n\r\n", EGS_FRAME_LINE, "");
	refused("TRACE / HTTP/1.1\r\n\r\n", EGS_FRAME_METHOD, "");
	refused("get / HTTP/1.1\r\n\r\n", EGS_FRAME_METHOD, "");
	/* a TLS ClientHello has no line end: refused at its first byte */
	refused("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", EGS_FRAME_LINE, "");
	/* NUL bytes: in the method, the target, a field's value */
	static const char nul_method[] = "G\0T / HTTP/1.1\r\n\r\n", nul_target[] = "GET /a\0b HTTP/1.1\r\n\r\n",
			  nul_value[] = "GET / HTTP/1.1\r\nX-A: a\0b\r\n\r\n";
	enum egs_frame_reason why;
	free(feed_all(nul_method, sizeof(nul_method) - 1, &why));
	assert_int_equal(why, EGS_FRAME_LINE);
	free(feed_all(nul_target, sizeof(nul_target) - 1, &why));
	assert_int_equal(why, EGS_FRAME_LINE);
	free(feed_all(nul_value, sizeof(nul_value) - 1, &why));
	assert_int_equal(why, EGS_FRAME_HEADER);
}

static void test_bounds(void **state)
{
	(void)state;
	size_t big = EGS_FRAME_MAX_HEAD + 100;
	char *s = malloc(big + 64);
	assert_non_null(s);
	/* an overlong header line: refused once 16 KiB passed without the head's end */
	int n = snprintf(s, 64, "GET / HTTP/1.1\r\nX-Big: ");
	memset(s + n, 'a', big - (size_t)n);
	s[big] = '\0';
	refused(s, EGS_FRAME_HEAD_BIG, "");
	/* an overlong request line, with no line end at all */
	memcpy(s, "GET /", 5);
	memset(s + 5, 'a', big - 5);
	s[big] = '\0';
	refused(s, EGS_FRAME_HEAD_BIG, "");
	/* an overlong chunk-size line (extensions) */
	n = snprintf(s, 128, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;");
	memset(s + n, 'e', 2000);
	s[n + 2000] = '\0';
	refused(s, EGS_FRAME_CHUNK, "");
	free(s);
}

static void test_chunked(void **state)
{
	(void)state;
	const char *ok = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
	char buf[512];
	/* de-chunked in place, extensions and trailers dropped, then the next request */
	snprintf(buf, sizeof(buf),
		 "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n%s", ok);
	accepted(buf, strlen(buf),
		 "M1 v1.1 close=0 ka=0 T/a H Transfer-Encoding=chunked B5:abcde\n" GET_OK);
	/* bare LF line ends, upper-case hex, a zero-length body */
	snprintf(buf, sizeof(buf), "POST /a HTTP/1.1\nTransfer-Encoding: Chunked\n\nA\n0123456789\n0\n\n%s", ok);
	accepted(buf, strlen(buf), "M1 v1.1 close=0 ka=0 T/a H Transfer-Encoding=Chunked B10:0123456789\n" GET_OK);
	struct {
		const char *body;
		enum egs_frame_reason why;
	} bad[] = {
		{ "zz\r\nab\r\n0\r\n\r\n", EGS_FRAME_CHUNK },               /* not hex */
		{ "\r\n0\r\n\r\n", EGS_FRAME_CHUNK },                       /* no size */
		{ "-1\r\na\r\n0\r\n\r\n", EGS_FRAME_CHUNK },                /* a sign */
		{ "1000000000000000\r\n", EGS_FRAME_CHUNK },                /* 16 hex digits */
		{ "2\r\nabc\r\n0\r\n\r\n", EGS_FRAME_CHUNK },               /* data longer than its size */
		{ "2 x\r\nab\r\n0\r\n\r\n", EGS_FRAME_CHUNK },              /* junk after the size */
		{ "1;\x01\r\na\r\n0\r\n\r\n", EGS_FRAME_CHUNK },            /* a control byte in an extension */
		{ "100001\r\n", EGS_FRAME_BODY_BIG },                      /* one chunk over the bound */
		{ "80000\r\n", EGS_FRAME_OK },                             /* (incomplete: still waiting) */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n%s%s", bad[i].body, ok);
		if (bad[i].why)
			refused(buf, bad[i].why, "");
		else
			accepted(buf, strlen(buf), "");
	}
	/* two chunks that together pass the bound */
	size_t half = EGS_FRAME_MAX_BODY / 2 + 1;
	char *big = malloc(2 * half + 256);
	assert_non_null(big);
	int n = snprintf(big, 128, "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n", half);
	memset(big + n, 'a', half);
	n += (int)half;
	n += snprintf(big + n, 64, "\r\n%zx\r\n", half);
	big[n] = '\0';
	enum egs_frame_reason why;
	char *t = frame_transcript((const unsigned char *)big, (size_t)n, 0, &why);
	assert_int_equal(why, EGS_FRAME_BODY_BIG);
	free(t);
	free(big);
}

static void test_pipelined_across_reads(void **state)
{
	(void)state;
	char buf[1024];
	snprintf(buf, sizeof(buf),
		 "\r\n\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
		 "POST /api/v1/gpr?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\nAuthorization:  Bearer k \r\n\r\n{\"a\":1}"
		 "GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
		 "GET /c HTTP/1.0\r\n\r\n"
		 "DELETE /d HTTP/1.1\r\nconnection: Close\r\n\r\n"
		 "GET /e HTTP/1.1\r\nConnection: close, x\r\n\r\n");
	accepted(buf, strlen(buf),
		 GET_OK "M1 v1.1 close=0 ka=0 T/api/v1/gpr?x=1 H Host=x H Content-Length=7 H Authorization=Bearer k B7:{\"a\":1}\n"
			"M0 v1.0 close=0 ka=1 T/b H Connection=keep-alive B0:\n"
			"M0 v1.0 close=1 ka=0 T/c B0:\n"
			"M4 v1.1 close=1 ka=0 T/d H connection=Close B0:\n"
			"M0 v1.1 close=0 ka=0 T/e H Connection=close, x B0:\n");
	/* a body holding what looks like a request is a body */
	snprintf(buf, sizeof(buf), "POST /a HTTP/1.1\r\nContent-Length: 35\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n");
	accepted(buf, strlen(buf), "M1 v1.1 close=0 ka=0 T/a H Content-Length=35 B35:GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n\n");
	/* a body with NUL bytes is passed whole */
	static const char nul_body[] = "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\na\0b";
	enum egs_frame_reason why;
	char *t = feed_all(nul_body, sizeof(nul_body) - 1, &why);
	assert_int_equal(why, EGS_FRAME_OK);
	assert_int_equal(memcmp(t, "M1 v1.1 close=0 ka=0 T/a H Content-Length=3 B3:a", 48), 0);
	assert_int_equal(t[48], '\0');
	free(t);
}

/* The parse keeps the places of a head's first EGS_FRAME_KEPT_FIELDS lines and egs_frame_fields scans
 * the head for more: both give the same fields; names are matched ignoring case a word at a time
 * (a name one byte off is another field); a value's and the target's bytes are checked a word at a
 * time, a refused byte anywhere in a word, a tab passing. */
static void test_fields_kept_and_scanned(void **state)
{
	(void)state;
	char buf[1024], want[1024];
	for (int n = EGS_FRAME_KEPT_FIELDS - 1; n <= EGS_FRAME_KEPT_FIELDS + 2; n++) {
		size_t bl = (size_t)snprintf(buf, sizeof(buf), "GET /f HTTP/1.1\r\n");
		size_t wl = (size_t)snprintf(want, sizeof(want), "M0 v1.1 close=0 ka=0 T/f");
		for (int i = 0; i < n; i++) {
			bl += (size_t)snprintf(buf + bl, sizeof(buf) - bl, "X-Field-%d: \t value %d \t\r\n", i, i);
			wl += (size_t)snprintf(want + wl, sizeof(want) - wl, " H X-Field-%d=value %d", i, i);
		}
		snprintf(buf + bl, sizeof(buf) - bl, "\r\n");
		snprintf(want + wl, sizeof(want) - wl, " B0:\n");
		accepted(buf, strlen(buf), want);
	}
	static const char upper[] = "POST /c HTTP/1.1\r\nCONTENT-LENGTH: 2\r\nCONNECTION: CLOSE\r\n\r\nab";
	static const char near[] = "POST /c HTTP/1.1\r\nContent-Lengtx: 2\r\nContent_Length: 3\r\n\r\n";
	accepted(upper, sizeof(upper) - 1,
		 "M1 v1.1 close=1 ka=0 T/c H CONTENT-LENGTH=2 H CONNECTION=CLOSE B2:ab\n");
	accepted(near, sizeof(near) - 1,
		 "M1 v1.1 close=0 ka=0 T/c H Content-Lengtx=2 H Content_Length=3 B0:\n");
	refused("GET /a HTTP/1.1\r\nauthorization: a\r\nAUTHORIZATION: b\r\n\r\n", EGS_FRAME_AUTH_TWICE, "");
	refused("POST /a HTTP/1.1\r\ncontent-length: 1\r\nTRANSFER-ENCODING: chunked\r\n\r\n", EGS_FRAME_CL_TE, "");
	static const char bad_bytes[] = { 0x01, 0x1f, 0x7f, 0x0d, 0x00 };
	for (size_t at = 0; at < 20; at++) { /* every place in a word, in a long value and a long target */
		for (size_t b = 0; b < sizeof(bad_bytes); b++) {
			char v[24];
			memset(v, 'v', sizeof(v));
			v[at] = bad_bytes[b]; /* NUL too: the bytes are put by hand, not printed */
			size_t len = 0;
			memcpy(buf, "GET /a HTTP/1.1\r\nX: ", 21);
			memcpy(buf + 21, v, sizeof(v));
			memcpy(buf + 21 + sizeof(v), "\r\n\r\n", 4);
			len = 21 + sizeof(v) + 4;
			enum egs_frame_reason why;
			free(feed_all(buf, len, &why));
			assert_int_equal(why, EGS_FRAME_HEADER);
			memcpy(buf, "GET /", 5);
			memcpy(buf + 5, v, sizeof(v));
			memcpy(buf + 5 + sizeof(v), " HTTP/1.1\r\n\r\n", 13);
			free(feed_all(buf, 5 + sizeof(v) + 13, &why));
			assert_int_equal(why, EGS_FRAME_LINE);
		}
		char v[25];
		memset(v, 'v', 24);
		v[24] = '\0';
		v[at] = '\x80'; /* UTF-8 and other high bytes: allowed in a value, not in a target */
		snprintf(buf, sizeof(buf), "GET /a HTTP/1.1\r\nX: %s\r\n\r\n", v);
		enum egs_frame_reason why;
		free(feed_all(buf, strlen(buf), &why));
		assert_int_equal(why, EGS_FRAME_OK);
		snprintf(buf, sizeof(buf), "GET /%s HTTP/1.1\r\n\r\n", v);
		free(feed_all(buf, strlen(buf), &why));
		assert_int_equal(why, EGS_FRAME_LINE);
		v[at] = '\t';
		snprintf(buf, sizeof(buf), "GET /a HTTP/1.1\r\nX: %s\r\n\r\n", v);
		free(feed_all(buf, strlen(buf), &why));
		assert_int_equal(why, EGS_FRAME_OK);
	}
}

/* Random requests from pieces that matter, each fed every way: the parse never depends on the
 * reads' boundaries (the property the fuzz target checks on arbitrary bytes). */
static void test_generated(void **state)
{
	(void)state;
	static const char *const parts[] = {
		"GET / HTTP/1.1\r\n", "POST /a HTTP/1.1\r\n", "HEAD /h HTTP/1.0\r\n", "Host: x\r\n", "Content-Length: 3\r\n",
		"Transfer-Encoding: chunked\r\n", "\r\n", "\n", "abc", "3\r\nabc\r\n", "0\r\n\r\n", " x\r\n", "X: \t\r\n",
		"Connection: close\r\n", "\r", "1;a=b\r\nz\r\n", "Content-Length: 0\r\n",
	};
	char buf[2048];
	rng_seed(7);
	for (int i = 0; i < 3000; i++) {
		size_t len = 0, k = 1 + rng_below(12);
		for (size_t j = 0; j < k; j++) {
			const char *p = parts[rng_below(sizeof(parts) / sizeof(parts[0]))];
			size_t pl = strlen(p);
			memcpy(buf + len, p, pl);
			len += pl;
		}
		enum egs_frame_reason w0, w1, w2;
		char *a = frame_transcript((const unsigned char *)buf, len, 0, &w0);
		char *b = frame_transcript((const unsigned char *)buf, len, 1, &w1);
		char *c = frame_transcript((const unsigned char *)buf, len, 2, &w2);
		if (w0 != w1 || w0 != w2 || strcmp(a, b) || strcmp(a, c))
			fail_msg("differs on %.*s:\n%s\n%s\n%s", (int)len, buf, a, b, c);
		free(a);
		free(b);
		free(c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smuggling_refused), cmocka_unit_test(test_request_line_refused),
		cmocka_unit_test(test_bounds),		  cmocka_unit_test(test_chunked),
		cmocka_unit_test(test_pipelined_across_reads), cmocka_unit_test(test_generated),
		cmocka_unit_test(test_fields_kept_and_scanned),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
