/*
 * query.h: the query string of a request, parsed into its name/value pairs without a heap allocation.
 *
 * evhttp_parse_query_str makes three allocations per pair and a copy of the whole string: a tenth of
 * a kept status read's instructions went to it (issue 16).  egs_query_parse gives the same pairs in
 * the same order, with the same refusals, but carves them out of a caller's arena; a query that does
 * not fit is left to evhttp.  tests/unit/test_query.c holds it to evhttp's answers.
 */
#ifndef EGS_SERVER_QUERY_H
#define EGS_SERVER_QUERY_H

#include <sys/queue.h> /* before event2: the TAILQ macros the pairs are linked with */

#include <event2/keyvalq_struct.h>

#define EGS_QUERY_ARENA_PAIRS 16
#define EGS_QUERY_ARENA_TEXT 1024

/* Caller-owned storage for the pairs of one query (about 1.8 KiB: a stack variable is fine). */
struct egs_query_arena {
	struct evkeyval kv[EGS_QUERY_ARENA_PAIRS];
	char text[EGS_QUERY_ARENA_TEXT];
};

enum egs_query_result {
	EGS_QUERY_OK = 0,        /* out holds the pairs, in a (borrowed) */
	EGS_QUERY_MALFORMED = -1, /* a part without '=' or with an empty name: out is empty */
	EGS_QUERY_TOO_BIG = 1,   /* more pairs or text than a holds: out is empty, parse with evhttp */
};

/* Parses q (borrowed; "" or NULL: no pairs) as evhttp_parse_query_str does: parts split at '&' (an
 * empty part ends the string only at its end), each "name=value" split at its first '='; the name is
 * taken as it is, the value percent-decoded with '+' as a space (a '%' not followed by two hex digits
 * stays).  out is initialized here; its pairs point into a and must not be freed with
 * evhttp_clear_headers (drop them by dropping a).  Never allocates. */
enum egs_query_result egs_query_parse(const char *q, struct evkeyvalq *out, struct egs_query_arena *a);

#endif
