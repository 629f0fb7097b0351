/*
 * query.c: a request's query string into name/value pairs in a caller's arena (query.h).
 *
 * The rules are evhttp_parse_query_str's (libevent 2.1), so egs_query and the audit log see exactly
 * the pairs they saw before: the string is cut at each '&' while bytes remain (so "a=1&" is one pair
 * and "a=1&&b=2" is refused: its middle part has no '='), each part at its first '=' (a part without
 * one, or with an empty name, refuses the whole query), names are kept as sent and values decoded.
 */
#include "server/query.h"
#include "core/util.h"

#include <stdbool.h>
#include <string.h>

/* Decodes v[0..n) into out (room for n + 1 bytes) as evhttp_decode_uri_internal with '+' always a
 * space, NUL-terminated; returns the decoded length (a "%00" is a NUL inside it, which the caller
 * refuses). */
static size_t decode_value(const char *v, size_t n, char *out)
{
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		char c = v[i];
		int hi, lo;
		if (c == '+') {
			c = ' ';
		} else if (c == '%' && i + 2 < n && (hi = egs_hex_digit(v[i + 1])) >= 0 && (lo = egs_hex_digit(v[i + 2])) >= 0) {
			c = (char)(hi * 16 + lo);
			i += 2;
		}
		out[j++] = c;
	}
	out[j] = '\0';
	return j;
}

enum egs_query_result egs_query_parse(const char *q, struct evkeyvalq *out, struct egs_query_arena *a)
{
	TAILQ_INIT(out);
	if (!q || !*q)
		return EGS_QUERY_OK;
	size_t len = strlen(q), used = 0, pairs = 0;
	/* Each part's name and value with their NULs take at most the part and its separator. */
	if (len + 1 > sizeof(a->text))
		return EGS_QUERY_TOO_BIG;
	const char *p = q, *end = q + len;
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *part_end = amp ? amp : end;
		const char *eq = memchr(p, '=', (size_t)(part_end - p));
		if (!eq || eq == p) {
			TAILQ_INIT(out);
			return EGS_QUERY_MALFORMED;
		}
		if (pairs == EGS_QUERY_ARENA_PAIRS) {
			TAILQ_INIT(out);
			return EGS_QUERY_TOO_BIG;
		}
		size_t name_len = (size_t)(eq - p);
		char *name = a->text + used;
		memcpy(name, p, name_len);
		name[name_len] = '\0';
		used += name_len + 1;
		char *value = a->text + used;
		used += decode_value(eq + 1, (size_t)(part_end - (eq + 1)), value) + 1;
		struct evkeyval *kv = &a->kv[pairs++];
		memset(kv, 0, sizeof(*kv));
		kv->key = name;
		kv->value = value;
		TAILQ_INSERT_TAIL(out, kv, next);
		p = amp ? amp + 1 : end;
	}
	return EGS_QUERY_OK;
}
