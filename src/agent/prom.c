/*
 * prom.c: the Prometheus text format parser (prom.h).  One pass over the text; each line is copied
 * into a scratch buffer, where label values are unescaped in place and names are cut with NULs, so a
 * sample's strings point into the scratch buffer and live until the next line.
 *
 * Two name sets enforce the TYPE rules: names that had a TYPE line, and names that had samples.
 */
#include "agent/prom.h"

#include "core/map.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

struct parser {
	char *buf; /* the current line, NUL-terminated, then cut and unescaped in place */
	char *p;   /* the cursor */
	size_t line;
	struct egs_map typed, sampled; /* name -> the name (owned) */
	struct egs_prom_label labels[EGS_PROM_LABELS_MAX];
	char *err;
	size_t errsz;
};

static bool fail(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(struct parser *ps, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(ps->err, ps->errsz, "line %zu: %s", ps->line, what);
	return false;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

static void skip_blanks(struct parser *ps)
{
	while (blank(*ps->p))
		ps->p++;
}

static bool name_start(char c, bool metric)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
}

static bool name_char(char c, bool metric)
{
	return name_start(c, metric) || (c >= '0' && c <= '9');
}

/* Reads a metric (metric) or label name at the cursor; returns it (in the buffer, not yet cut) and its
 * length in *n, or NULL when none starts here. */
static char *read_name(struct parser *ps, bool metric, size_t *n)
{
	char *s = ps->p;

	if (!name_start(*s, metric))
		return NULL;
	while (name_char(*ps->p, metric))
		ps->p++;
	*n = (size_t)(ps->p - s);
	return s;
}

/* Remembers name in set (a copy) unless it is there; returns false when it was already there. */
static bool remember(struct egs_map *set, const char *name)
{
	char *copy;

	if (egs_map_get(set, name))
		return false;
	copy = egs_strdup(name);
	egs_map_put(set, copy, copy);
	return true;
}

/* "# HELP name text" and "# TYPE name type"; other comments are ignored. */
static bool comment(struct parser *ps)
{
	static const char *const types[] = { "counter", "gauge", "histogram", "summary", "untyped" };
	char *kw, *name;
	size_t n;
	bool help, type;

	ps->p++;
	skip_blanks(ps);
	kw = ps->p;
	while (*ps->p && !blank(*ps->p))
		ps->p++;
	help = ps->p - kw == 4 && !strncmp(kw, "HELP", 4);
	type = ps->p - kw == 4 && !strncmp(kw, "TYPE", 4);
	if (!help && !type)
		return true;
	skip_blanks(ps);
	name = read_name(ps, true, &n);
	if (!name)
		return fail(ps, "# %s needs a metric name", help ? "HELP" : "TYPE");
	if (*ps->p && !blank(*ps->p))
		return fail(ps, "bad character '%c' in a metric name", *ps->p);
	if (*ps->p)
		*ps->p++ = '\0';
	else
		name[n] = '\0';
	skip_blanks(ps);
	if (help) {
		for (char *s = ps->p; *s; s++)
			if (*s == '\\' && s[1] != '\\' && s[1] != 'n')
				return fail(ps, "bad escape in the HELP text of %s", name);
			else if (*s == '\\')
				s++;
		return true;
	}
	char *t = ps->p;
	while (*ps->p && !blank(*ps->p))
		ps->p++;
	size_t tn = (size_t)(ps->p - t);
	skip_blanks(ps);
	bool known = false;
	for (size_t i = 0; i < EGS_ARRAY_LEN(types); i++)
		known |= tn == strlen(types[i]) && !strncmp(t, types[i], tn);
	if (!known || *ps->p)
		return fail(ps, "# TYPE of %s must be counter, gauge, histogram, summary or untyped", name);
	if (egs_map_get(&ps->sampled, name))
		return fail(ps, "# TYPE of %s after its samples", name);
	if (!remember(&ps->typed, name))
		return fail(ps, "a second # TYPE for %s", name);
	return true;
}

/* Reads a quoted label value at the cursor (on the '"'), unescaping it in place; returns it. */
static char *label_value(struct parser *ps)
{
	char *out = ++ps->p, *start = out;

	for (;;) {
		char c = *ps->p++;
		if (c == '\0')
			return fail(ps, "unterminated label value"), NULL;
		if (c == '"')
			break;
		if (c == '\\') {
			char e = *ps->p++;
			if (e == '\\' || e == '"')
				c = e;
			else if (e == 'n')
				c = '\n';
			else
				return fail(ps, "bad escape \\%c in a label value", e ? e : '0'), NULL;
		}
		*out++ = c;
	}
	*out = '\0'; /* out <= ps->p - 1: the closing quote's place at the latest */
	return start;
}

/* Reads "{name="value",...}" at the cursor into ps->labels; *n gets their number. */
static bool label_set(struct parser *ps, size_t *n)
{
	*n = 0;
	ps->p++;
	for (;;) {
		size_t len;
		char *name;
		skip_blanks(ps);
		if (*ps->p == '}')
			break;
		name = read_name(ps, false, &len);
		if (!name)
			return fail(ps, "a label name expected");
		char *end = ps->p;
		skip_blanks(ps);
		if (*ps->p != '=')
			return fail(ps, "'=' expected after the label name");
		*end = '\0';
		ps->p++;
		skip_blanks(ps);
		if (*ps->p != '"')
			return fail(ps, "a quoted value expected for label %s", name);
		char *value = label_value(ps);
		if (!value)
			return false;
		for (size_t i = 0; i < *n; i++)
			if (!strcmp(ps->labels[i].name, name))
				return fail(ps, "label %s given twice", name);
		if (*n == EGS_PROM_LABELS_MAX)
			return fail(ps, "more than %d labels", EGS_PROM_LABELS_MAX);
		ps->labels[(*n)++] = (struct egs_prom_label){ name, value };
		skip_blanks(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p != '}')
			return fail(ps, "',' or '}' expected after the value of label %s", name);
	}
	ps->p++;
	return true;
}

/* Cuts the next blank-separated token at the cursor; returns it ("" at the end). */
static char *token(struct parser *ps)
{
	char *t;

	skip_blanks(ps);
	t = ps->p;
	while (*ps->p && !blank(*ps->p))
		ps->p++;
	if (*ps->p)
		*ps->p++ = '\0';
	return t;
}

/* Parses a sample value: a decimal float (strtod's hex and "infinity" forms refused), NaN or Inf. */
static bool parse_value(const char *t, double *v)
{
	const char *s = t + (*t == '+' || *t == '-');
	char *end;

	if (!strcasecmp(s, "inf")) {
		*v = *t == '-' ? -INFINITY : INFINITY;
		return true;
	}
	if (!strcasecmp(t, "nan")) {
		*v = NAN;
		return true;
	}
	if (!*s || strspn(s, "0123456789.eE+-") != strlen(s) || !(isdigit((unsigned char)*s) || *s == '.'))
		return false;
	errno = 0;
	*v = strtod(t, &end);
	return *end == '\0' && end != t;
}

static bool parse_timestamp(const char *t, int64_t *ms)
{
	char *end;
	long long v;

	if (!*t || strspn(t + (*t == '-'), "0123456789") != strlen(t + (*t == '-')) || !t[*t == '-'])
		return false;
	errno = 0;
	v = strtoll(t, &end, 10);
	*ms = v;
	return *end == '\0' && errno == 0;
}

static bool sample(struct parser *ps, egs_prom_fn fn, void *arg, bool *stop)
{
	struct egs_prom_sample s = { 0 };
	size_t n;
	char *name = read_name(ps, true, &n), *end, *t;

	if (!name)
		return fail(ps, "a metric name expected");
	end = ps->p;
	skip_blanks(ps);
	if (*ps->p == '{') {
		*end = '\0';
		if (!label_set(ps, &s.n_labels))
			return false;
	} else if (end == ps->p && *ps->p) {
		return fail(ps, "bad character '%c' in a metric name", *ps->p);
	} else {
		*end = '\0';
	}
	t = token(ps);
	if (!*t)
		return fail(ps, "%s has no value", name);
	if (!parse_value(t, &s.value))
		return fail(ps, "%s: '%.32s' is not a number", name, t);
	t = token(ps);
	if (*t) {
		if (!parse_timestamp(t, &s.timestamp_ms))
			return fail(ps, "%s: '%.32s' is not a timestamp in milliseconds", name, t);
		s.has_timestamp = true;
	}
	skip_blanks(ps);
	if (*ps->p)
		return fail(ps, "%s: unexpected text after the timestamp", name);
	s.name = name;
	s.labels = ps->labels;
	remember(&ps->sampled, name);
	*stop = !fn(arg, &s);
	return true;
}

static void free_set(struct egs_map *m)
{
	void *v;

	for (size_t i = 0; egs_map_next(m, &i, NULL, &v);)
		egs_free(v);
	egs_map_cleanup(m);
}

enum egs_err egs_prom_parse(const char *text, size_t len, egs_prom_fn fn, void *arg, char *err, size_t errsz)
{
	struct parser ps = { .err = err, .errsz = errsz };
	enum egs_err rc = EGS_OK;
	size_t pos = 0;
	bool stop = false;

	egs_map_init(&ps.typed);
	egs_map_init(&ps.sampled);
	ps.buf = egs_malloc(EGS_PROM_LINE_MAX + 1);
	err[0] = '\0';
	while (pos < len && !stop) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = (nl ? (size_t)(nl - text) : len) - pos;
		ps.line++;
		if (n > EGS_PROM_LINE_MAX || memchr(text + pos, '\0', n)) {
			if (n > EGS_PROM_LINE_MAX)
				fail(&ps, "longer than %d bytes", EGS_PROM_LINE_MAX);
			else
				fail(&ps, "a NUL byte");
			rc = EGS_ERR_INVALID;
			goto out;
		}
		memcpy(ps.buf, text + pos, n);
		if (n && ps.buf[n - 1] == '\r')
			n--;
		ps.buf[n] = '\0';
		pos = nl ? (size_t)(nl - text) + 1 : len;
		ps.p = ps.buf;
		skip_blanks(&ps);
		bool ok = !*ps.p || (*ps.p == '#' ? comment(&ps) : sample(&ps, fn, arg, &stop));
		if (!ok) {
			rc = EGS_ERR_INVALID;
			goto out;
		}
	}
out:
	free_set(&ps.typed);
	free_set(&ps.sampled);
	egs_free(ps.buf);
	return rc;
}

const char *egs_prom_label(const struct egs_prom_sample *s, const char *name)
{
	for (size_t i = 0; i < s->n_labels; i++)
		if (!strcmp(s->labels[i].name, name))
			return s->labels[i].value;
	return NULL;
}
