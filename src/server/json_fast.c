/*
 * json_fast.c: the plain subset of JSON request bodies, parsed straight into jansson trees
 * (json_fast.h says what the subset is and what the caller does with everything else).
 *
 * A recursive descent over the bytes, bounded by len and by FAST_DEPTH.  Every rule below either
 * matches exactly what jansson's decoder accepts for the same bytes, or declines: declining is always
 * safe, since the caller then parses the whole body with jansson, so when in doubt this file declines.
 * Whitespace is JSON's four bytes (jansson's too); strings are bytes 0x20-0x7e other than '"' and '\';
 * integers are -?(0|[1-9][0-9]{0,17}) without '-0', a fraction or an exponent (jansson's json_int_t
 * holds 18 digits); literals are true, false, null not followed by a letter (jansson reads a whole
 * word of letters as one token).
 */
#include "server/json_fast.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define FAST_DEPTH 32     /* deeper bodies go to jansson (its own limit is 2048) */
#define FAST_KEY_MAX 256  /* longer keys go to jansson: a key is copied to the stack to end it */
#define FAST_DIGITS_MAX 18

struct fast {
	const char *p, *end;
	int depth;
};

static json_t *fast_value(struct fast *f);

static void skip_ws(struct fast *f)
{
	while (f->p < f->end && (*f->p == ' ' || *f->p == '\t' || *f->p == '\n' || *f->p == '\r'))
		f->p++;
}

/* At a '"': sets *s and *n to the string's bytes (borrowed from the input) and steps past it.
 * false when it ends the input or holds a byte outside the subset. */
static bool fast_string(struct fast *f, const char **s, size_t *n)
{
	const char *q = f->p + 1;
	while (q < f->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20 && (unsigned char)*q <= 0x7e)
		q++;
	if (q >= f->end || *q != '"')
		return false;
	*s = f->p + 1;
	*n = (size_t)(q - *s);
	f->p = q + 1;
	return true;
}

static json_t *fast_integer(struct fast *f)
{
	const char *q = f->p;
	bool neg = *q == '-';
	q += neg;
	const char *digits = q;
	int64_t v = 0;
	while (q < f->end && *q >= '0' && *q <= '9' && q - digits < FAST_DIGITS_MAX)
		v = v * 10 + (*q++ - '0');
	size_t nd = (size_t)(q - digits);
	if (nd == 0 || (*digits == '0' && (nd > 1 || neg)))
		return NULL;
	if (q < f->end && (*q == '.' || *q == 'e' || *q == 'E' || (*q >= '0' && *q <= '9')))
		return NULL; /* a real, a leading zero, or more digits than the subset takes */
	f->p = q;
	return json_integer(neg ? -v : v);
}

/* true, false or null at f->p, when the word is exactly one of them. */
static json_t *fast_literal(struct fast *f)
{
	static const struct {
		const char *word;
		size_t n;
	} words[] = { { "true", 4 }, { "false", 5 }, { "null", 4 } };
	for (size_t i = 0; i < 3; i++) {
		size_t n = words[i].n;
		if ((size_t)(f->end - f->p) < n || memcmp(f->p, words[i].word, n) != 0)
			continue;
		const char *q = f->p + n;
		if (q < f->end && ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z')))
			return NULL;
		f->p = q;
		return i == 0 ? json_true() : i == 1 ? json_false() : json_null();
	}
	return NULL;
}

/* At a '[': the array, or NULL (nothing leaked). */
static json_t *fast_array(struct fast *f)
{
	json_t *a = json_array();
	f->p++;
	skip_ws(f);
	if (f->p < f->end && *f->p == ']') {
		f->p++;
		return a;
	}
	for (;;) {
		json_t *v = fast_value(f);
		if (!v || json_array_append_new(a, v) != 0)
			goto fail;
		skip_ws(f);
		if (f->p >= f->end)
			goto fail;
		if (*f->p++ == ']')
			return a;
		if (f->p[-1] != ',')
			goto fail;
		skip_ws(f);
	}
fail:
	json_decref(a);
	return NULL;
}

/* One "key": value member into o; false on anything outside the subset, a duplicate key included. */
static bool fast_member(struct fast *f, json_t *o)
{
	const char *k;
	size_t kn;
	char key[FAST_KEY_MAX];
	if (f->p >= f->end || *f->p != '"' || !fast_string(f, &k, &kn) || kn >= sizeof(key))
		return false;
	memcpy(key, k, kn);
	key[kn] = '\0';
	skip_ws(f);
	if (f->p >= f->end || *f->p++ != ':')
		return false;
	skip_ws(f);
	json_t *v = fast_value(f);
	size_t before = json_object_size(o);
	/* A duplicate key replaces the value and leaves the size: jansson answers it with its own error,
	 * so decline (the caller drops o).  One hash lookup per member instead of a get before the set. */
	return v && json_object_set_new_nocheck(o, key, v) == 0 && json_object_size(o) > before;
}

/* At a '{': the object, or NULL (nothing leaked). */
static json_t *fast_obj(struct fast *f)
{
	json_t *o = json_object();
	f->p++;
	skip_ws(f);
	if (f->p < f->end && *f->p == '}') {
		f->p++;
		return o;
	}
	for (;;) {
		if (!fast_member(f, o))
			goto fail;
		skip_ws(f);
		if (f->p >= f->end)
			goto fail;
		if (*f->p++ == '}')
			return o;
		if (f->p[-1] != ',')
			goto fail;
		skip_ws(f);
	}
fail:
	json_decref(o);
	return NULL;
}

/* The value at f->p (no whitespace before it), or NULL when it is outside the subset. */
static json_t *fast_value(struct fast *f)
{
	if (f->p >= f->end)
		return NULL;
	char c = *f->p;
	if (c == '"') {
		const char *s;
		size_t n;
		return fast_string(f, &s, &n) ? json_stringn_nocheck(s, n) : NULL;
	}
	if (c == '-' || (c >= '0' && c <= '9'))
		return fast_integer(f);
	if (c != '{' && c != '[')
		return fast_literal(f);
	if (f->depth >= FAST_DEPTH)
		return NULL;
	f->depth++;
	json_t *v = c == '{' ? fast_obj(f) : fast_array(f);
	f->depth--;
	return v;
}

json_t *egs_json_fast_object(const char *p, size_t len)
{
	struct fast f = { p, p + len, 0 };
	skip_ws(&f);
	if (f.p >= f.end || *f.p != '{')
		return NULL;
	json_t *o = fast_value(&f);
	if (!o)
		return NULL;
	skip_ws(&f);
	if (f.p != f.end) { /* trailing bytes: jansson's error */
		json_decref(o);
		return NULL;
	}
	return o;
}

bool egs_json_same_order(json_t *a, json_t *b)
{
	if (json_is_array(a)) {
		for (size_t i = 0; i < json_array_size(a); i++)
			if (!egs_json_same_order(json_array_get(a, i), json_array_get(b, i)))
				return false;
		return true;
	}
	if (!json_is_object(a))
		return true;
	void *ia = json_object_iter(a), *ib = json_object_iter(b);
	for (; ia && ib; ia = json_object_iter_next(a, ia), ib = json_object_iter_next(b, ib))
		if (strcmp(json_object_iter_key(ia), json_object_iter_key(ib)) != 0 ||
		    !egs_json_same_order(json_object_iter_value(ia), json_object_iter_value(ib)))
			return false;
	return !ia && !ib;
}
