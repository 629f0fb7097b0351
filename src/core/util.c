/*
 * util.c: durations, times, names and memory units; see util.h.  All functions are pure.
 */
#include "core/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool egs_duration_parse(const char *s, int64_t *out, const char **why)
{
	static const char units[] = "dhms";
	static const int64_t mult[] = { 86400, 3600, 60, 1 };
	const char *p = s;
	int64_t total = 0;
	int next_unit = 0, parts = 0;

	if (!s || !*s) {
		*why = "must not be empty (format 0d0h0m)";
		return false;
	}
	while (*p) {
		if (!isdigit((unsigned char)*p)) {
			*why = "must look like 0d6h0m, 6h or 90m";
			return false;
		}
		int64_t v = 0;
		int digits = 0;
		while (isdigit((unsigned char)*p)) {
			if (++digits > 9) {
				*why = "has a number that is too large";
				return false;
			}
			v = v * 10 + (*p++ - '0');
		}
		const char *u = *p ? strchr(units + next_unit, *p) : NULL;
		if (!u) {
			*why = "must use the units d, h, m, s in that order, each once";
			return false;
		}
		int ui = (int)(u - units);
		total += v * mult[ui];
		next_unit = ui + 1;
		parts++;
		p++;
		if (total > EGS_MAX_DURATION_S) {
			*why = "must not exceed 366 days";
			return false;
		}
	}
	if (!parts || total <= 0) {
		*why = "must be greater than zero";
		return false;
	}
	*out = total;
	return true;
}

void egs_duration_format(int64_t secs, char *buf, size_t n)
{
	if (secs < 0)
		secs = 0;
	snprintf(buf, n, "%lldh%lldm%llds", (long long)(secs / 3600), (long long)(secs % 3600 / 60),
		 (long long)(secs % 60));
}

void egs_time_format(int64_t t, char *buf, size_t n)
{
	time_t tt = (time_t)t;
	struct tm tm;
	gmtime_r(&tt, &tm);
	strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

bool egs_time_parse(const char *s, int64_t *out)
{
	/* RFC 3339 is fixed width: check the shape first (strptime alone takes " 2026-1-2T3:4:5Z"). */
	static const char shape[] = "dddd-dd-ddTdd:dd:dd";
	size_t i;
	for (i = 0; shape[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (shape[i] == 'd' ? !isdigit(c) : c != (unsigned char)shape[i])
			return false;
	}
	const char *end = s + i;
	if (*end == '.') {
		if (!isdigit((unsigned char)end[1]))
			return false;
		for (end++; isdigit((unsigned char)*end); end++)
			;
	}
	if (strcmp(end, "Z") != 0 && strcmp(end, "+00:00") != 0)
		return false;
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	if (!strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
		return false;
	int64_t t = (int64_t)timegm(&tm);
	/* timegm() normalises February 30 to March 2: a date that does not exist does not come back. */
	char back[32];
	egs_time_format(t, back, sizeof(back));
	if (strncmp(back, s, i) != 0)
		return false;
	*out = t;
	return true;
}

bool egs_dns_label_valid(const char *s, const char **why)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > 63) {
		*why = "must be 1 to 63 characters";
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
			*why = "may contain only lowercase letters, digits and '-'";
			return false;
		}
	}
	if (s[0] == '-' || s[n - 1] == '-') {
		*why = "must start and end with a letter or digit";
		return false;
	}
	return true;
}

bool egs_dns_subdomain_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (!n || n > 253 || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

bool egs_label_valid(const char *s, const char **why)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > 63) {
		*why = "must be 1 to 63 characters";
		return false;
	}
	if (!isalnum((unsigned char)s[0])) {
		*why = "must start with a letter or digit";
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!(isalnum(c) || c == '.' || c == '_' || c == '-')) {
			*why = "may contain only letters, digits, '.', '_' and '-'";
			return false;
		}
	}
	return true;
}

int64_t egs_memory_to_mib(int64_t v)
{
	if (v < 0 || v > (int64_t)1 << 40)
		return -1;
	return v < 1024 ? v * 1024 : v;
}

bool egs_int_parse(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}
