/*
 * util.h: pure helpers shared by the core and the server: the EGS duration syntax, RFC 3339 time
 * formatting, name validation and the memory-unit rule of the Contracts.
 */
#ifndef EGS_UTIL_H
#define EGS_UTIL_H

#include "core/common.h"

#define EGS_MAX_DURATION_S (366LL * 24 * 3600) /* one year: the longest window we accept */

/*
 * Parses a duration such as "0d6h0m", "6h", "90m", "1h15m0s" or "45s": components d, h, m, s in that
 * order, each at most once, at least one.  Stores seconds in *out.  Returns false (and a static
 * reason in *why) when malformed, zero, or longer than EGS_MAX_DURATION_S.
 */
bool egs_duration_parse(const char *s, int64_t *out, const char **why);
/* Writes secs as "<h>h<m>m<s>s" (e.g. "0h2m40s", "150h0m0s") into buf.  Negative prints as 0. */
void egs_duration_format(int64_t secs, char *buf, size_t n);
/* Writes a UNIX time as RFC 3339 UTC ("2026-11-23T10:00:00Z") into buf (>= 21 bytes). */
void egs_time_format(int64_t t, char *buf, size_t n);
/* Parses RFC 3339 UTC ("...Z" or "+00:00"); returns false when malformed. */
bool egs_time_parse(const char *s, int64_t *out);

/* Kubernetes DNS-1123 label: 1-63 of [a-z0-9-], alphanumeric at both ends (workspaces, clusters,
 * namespaces, projects).  On failure stores a static reason in *why. */
bool egs_dns_label_valid(const char *s, const char **why);
/* Kubernetes DNS-1123 subdomain (object names): 1-253 of [a-z0-9.-], alphanumeric at both ends. */
bool egs_dns_subdomain_valid(const char *s);
/* A display label: 1-63 of [A-Za-z0-9._-], starting with an alphanumeric (GPR names, node names,
 * instance types, GPU shapes, key names). */
bool egs_label_valid(const char *s, const char **why);

/* Parses all of s as a decimal integer in [lo, hi] (no sign games, no trailing text, no overflow). */
bool egs_int_parse(const char *s, int64_t lo, int64_t hi, int64_t *out);

/* Writes v in decimal backwards: its last digit just before end, the others before it (20 at
 * most); returns where the first one is.  By hand, here once: snprintf's "%llu" was hundreds of
 * instructions of every answer, create and scrape that wrote a number (issue 16). */
static inline char *egs_u64_digits(char *end, uint64_t v)
{
	do
		*--end = (char)('0' + v % 10);
	while (v /= 10);
	return end;
}

/* Writes v in decimal at p, '-' first when negative, without a NUL; returns the end (21 bytes at
 * most). */
static inline char *egs_i64_digits(char *p, int64_t v)
{
	char tmp[20], *d = egs_u64_digits(tmp + sizeof(tmp), v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
	if (v < 0)
		*p++ = '-';
	while (d < tmp + sizeof(tmp))
		*p++ = *d++;
	return p;
}

/* FNV-1a (64-bit), continuing from h (EGS_FNV_OFFSET to start): a quick hash for tables whose keys
 * no client chooses (a client's keys go through map.c's keyed SipHash), and for values derived
 * from names.  Over n bytes of p, or over the string s without its NUL. */
#define EGS_FNV_OFFSET 0xcbf29ce484222325ull
#define EGS_FNV_PRIME 0x100000001b3ull
static inline uint64_t egs_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * EGS_FNV_PRIME;
	return h;
}
static inline uint64_t egs_fnv1a_str(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * EGS_FNV_PRIME;
	return h;
}

/* The value of one hexadecimal digit (either case), or -1 when c is none. */
static inline int egs_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The memory rule of the Contracts: below 1024 the value is GB, from 1024 up it is MiB.
 * Returns MiB, or -1 when v is negative or absurdly large. */
int64_t egs_memory_to_mib(int64_t v);

#endif
