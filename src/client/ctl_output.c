/*
 * ctl_output.c: how egsctl prints: aligned tables (kubectl style), indented JSON, and YAML through
 * libyaml's emitter.  YAML strings are quoted unless they are plain words that every YAML reader
 * (1.1 and 1.2) reads back as the same string, so `-o yaml` round-trips through any parser: a
 * timestamp or "0h2m40s" stays a string, "true" stays a string when it was one.
 */
#include "core/common.h"
#include "core/util.h"

#include "client/ctl.h"

#include <ctype.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

struct ctl_table {
	size_t ncols;
	struct egs_vec cells; /* char*, row-major; the headers are the first row */
};

struct ctl_table *ctl_table_new(const char *const *headers, size_t ncols)
{
	struct ctl_table *t = egs_calloc(1, sizeof(*t));

	t->ncols = ncols;
	for (size_t i = 0; i < ncols; i++)
		egs_vec_push(&t->cells, egs_strdup(headers[i]));
	return t;
}

void ctl_table_add(struct ctl_table *t, ...)
{
	va_list ap;

	va_start(ap, t);
	for (size_t i = 0; i < t->ncols; i++) {
		const char *s = va_arg(ap, const char *);
		char *cell = egs_strdup(s ? s : "");
		for (char *p = cell; *p; p++) /* one row per line, whatever the server said */
			if (*p == '\n' || *p == '\r' || *p == '\t')
				*p = ' ';
		egs_vec_push(&t->cells, cell);
	}
	va_end(ap);
}

/* Display width: UTF-8 continuation bytes take no column. */
static size_t width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

void ctl_table_print(struct ctl_table *t, FILE *f)
{
	size_t rows = t->cells.len / t->ncols, *w = egs_calloc(t->ncols, sizeof(*w));

	for (size_t i = 0; i < t->cells.len; i++) {
		size_t cw = width(t->cells.items[i]);
		if (cw > w[i % t->ncols])
			w[i % t->ncols] = cw;
	}
	for (size_t r = 0; r < rows; r++) {
		for (size_t col = 0; col < t->ncols; col++) {
			const char *s = t->cells.items[r * t->ncols + col];
			bool last = col + 1 == t->ncols;
			fputs(s, f);
			for (size_t pad = width(s); !last && pad < w[col] + 3; pad++)
				fputc(' ', f);
		}
		fputc('\n', f);
	}
	egs_free(w);
}

void ctl_table_free(struct ctl_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->cells.len; i++)
		egs_free(t->cells.items[i]);
	egs_vec_cleanup(&t->cells);
	egs_free(t);
}

void ctl_print_json(json_t *v, FILE *f)
{
	json_dumpf(v, f, JSON_INDENT(2) | JSON_ENCODE_ANY);
	fputc('\n', f);
}

/* ---- YAML ---- */

static void emit(yaml_emitter_t *e, yaml_event_t *ev)
{
	EGS_ASSERT(yaml_emitter_emit(e, ev)); /* fails only on out of memory or a closed stream */
}

/* May s be written as a plain scalar that YAML 1.1 and 1.2 readers both read back as this string? */
static bool plain_safe(const char *s)
{
	static const char *const words[] = {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "nan", "inf"};

	if (!isalpha((unsigned char)s[0]))
		return false;
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("-_./", *p))
			return false;
	for (size_t i = 0; i < EGS_ARRAY_LEN(words); i++)
		if (!strcasecmp(s, words[i]))
			return false;
	return true;
}

static void emit_scalar(yaml_emitter_t *e, const char *s, yaml_scalar_style_t style)
{
	yaml_event_t ev;

	EGS_ASSERT(yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1, style));
	emit(e, &ev);
}

static void emit_string(yaml_emitter_t *e, const char *s)
{
	if (plain_safe(s))
		emit_scalar(e, s, YAML_PLAIN_SCALAR_STYLE);
	else
		emit_scalar(e, s, strchr(s, '\n') ? YAML_LITERAL_SCALAR_STYLE : YAML_DOUBLE_QUOTED_SCALAR_STYLE);
}

static void emit_value(yaml_emitter_t *e, json_t *v);

static void emit_container(yaml_emitter_t *e, json_t *v)
{
	yaml_event_t ev;
	bool empty = json_is_object(v) ? json_object_size(v) == 0 : json_array_size(v) == 0;
	const char *key;
	json_t *x;
	size_t i;

	if (json_is_object(v)) {
		EGS_ASSERT(yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
							       empty ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE));
		emit(e, &ev);
		json_object_foreach(v, key, x) {
			emit_string(e, key);
			emit_value(e, x);
		}
		EGS_ASSERT(yaml_mapping_end_event_initialize(&ev));
	} else {
		EGS_ASSERT(yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
								empty ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE));
		emit(e, &ev);
		json_array_foreach(v, i, x)
			emit_value(e, x);
		EGS_ASSERT(yaml_sequence_end_event_initialize(&ev));
	}
	emit(e, &ev);
}

static void emit_value(yaml_emitter_t *e, json_t *v)
{
	char num[64];

	switch (json_typeof(v)) {
	case JSON_OBJECT:
	case JSON_ARRAY:
		emit_container(e, v);
		break;
	case JSON_STRING:
		emit_string(e, json_string_value(v));
		break;
	case JSON_INTEGER:
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		emit_scalar(e, num, YAML_PLAIN_SCALAR_STYLE);
		break;
	case JSON_REAL:
		snprintf(num, sizeof(num), "%.17g", json_real_value(v));
		if (!strpbrk(num, ".eEn")) /* keep it a real for the reader: 2 -> 2.0 */
			egs_strlcpy(num + strlen(num), ".0", sizeof(num) - strlen(num));
		emit_scalar(e, num, YAML_PLAIN_SCALAR_STYLE);
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		emit_scalar(e, json_is_true(v) ? "true" : "false", YAML_PLAIN_SCALAR_STYLE);
		break;
	default:
		emit_scalar(e, "null", YAML_PLAIN_SCALAR_STYLE);
	}
}

void ctl_print_yaml(json_t *v, FILE *f)
{
	yaml_emitter_t e;
	yaml_event_t ev;

	EGS_ASSERT(yaml_emitter_initialize(&e));
	yaml_emitter_set_output_file(&e, f);
	yaml_emitter_set_unicode(&e, 1);
	yaml_emitter_set_width(&e, -1);
	yaml_emitter_set_indent(&e, 2);
	EGS_ASSERT(yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
	emit(&e, &ev);
	EGS_ASSERT(yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
	emit(&e, &ev);
	emit_value(&e, v);
	EGS_ASSERT(yaml_document_end_event_initialize(&ev, 1));
	emit(&e, &ev);
	EGS_ASSERT(yaml_stream_end_event_initialize(&ev));
	emit(&e, &ev);
	yaml_emitter_flush(&e);
	yaml_emitter_delete(&e);
}

bool ctl_print_data(struct ctl *c, json_t *v)
{
	if (c->format == CTL_OUT_JSON)
		ctl_print_json(v, stdout);
	else if (c->format == CTL_OUT_YAML)
		ctl_print_yaml(v, stdout);
	else
		return false;
	return true;
}

/* ---- small helpers ---- */

const char *ctl_str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

long long ctl_int_of(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

void ctl_joined(json_t *a, char *buf, size_t n)
{
	size_t i, used = 0;
	json_t *x;

	buf[0] = '\0';
	json_array_foreach(a, i, x)
		if (used < n)
			used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "",
						 json_string_value(x) ? json_string_value(x) : "");
}

void ctl_sort_json(json_t *items, int (*cmp)(const void *, const void *))
{
	size_t n = json_array_size(items);
	json_t **v = egs_calloc(n + 1, sizeof(*v));

	for (size_t i = 0; i < n; i++)
		v[i] = json_incref(json_array_get(items, i));
	if (n)
		qsort(v, n, sizeof(*v), cmp);
	json_array_clear(items);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(items, v[i]);
	egs_free(v);
}

void ctl_num_text(json_t *o, const char *key, char *buf, size_t n)
{
	json_t *v = json_object_get(o, key);
	if (json_is_real(v))
		snprintf(buf, n, "%.2f", json_real_value(v));
	else
		snprintf(buf, n, "%lld", (long long)json_integer_value(v));
	char *dot = strchr(buf, '.');
	if (dot) { /* 0.20 -> 0.2, 1.00 -> 1 */
		char *e = buf + strlen(buf);
		while (e > dot + 1 && e[-1] == '0')
			*--e = '\0';
		if (e == dot + 1)
			*dot = '\0';
	}
}

void ctl_duration_text(int64_t secs, char *buf, size_t n)
{
	int64_t d = secs / 86400, h = secs % 86400 / 3600, m = secs % 3600 / 60, s = secs % 60;
	size_t used = 0;

	buf[0] = '\0';
	if (secs <= 0) {
		egs_strlcpy(buf, "0s", n);
		return;
	}
	if (d && used < n)
		used += (size_t)snprintf(buf + used, n - used, "%lldd", (long long)d);
	if (h && used < n)
		used += (size_t)snprintf(buf + used, n - used, "%lldh", (long long)h);
	if (m && !d && used < n)
		used += (size_t)snprintf(buf + used, n - used, "%lldm", (long long)m);
	if (s && !d && !h && used < n)
		snprintf(buf + used, n - used, "%llds", (long long)s);
}

void ctl_age(const char *rfc3339, int64_t now, char *buf, size_t n)
{
	int64_t t;
	char d[32];

	if (!rfc3339 || !*rfc3339 || !egs_time_parse(rfc3339, &t)) {
		egs_strlcpy(buf, "-", n);
		return;
	}
	ctl_duration_text(t > now ? t - now : now - t, d, sizeof(d));
	snprintf(buf, n, "%s%s", t > now ? "in " : "", d);
}
