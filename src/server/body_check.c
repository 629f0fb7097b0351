/*
 * body_check.c: the JSON type of every field of every request body, checked in one place.
 *
 * The request schemas of openapi.c (the notation "name:s ~count:i? nodes:[AgentNode]") say what each
 * route takes; before a handler runs, egs_body_check() walks the parsed body against its route's
 * schema: every key must be a property of its object (nested objects too), and every value must be of
 * the property's JSON type.  So a wrong type is a 422 VALIDATION_FAILED naming the field
 * ("nodes[0].gpuCount") on every route alike, whichever order a handler reads its fields in and
 * whichever of its modes (PUT /gpr's earlyRelease, extendBy, edit) the rest of the body selects; and the
 * OpenAPI document cannot drift from what the server accepts without the API tests noticing.
 *
 * null is "not given" for an optional ('~') or nullable ('?') property: the public SDK sends null for
 * options left unset.  Only the JSON type is checked here: ranges, enum values, names and formats are
 * the handler's (they come with messages of their own).  The walk follows the schema, never the body
 * alone, so its depth is the schema's ("any" and "obj" values are not entered).
 */
#include "server/server.h"

#include <stdio.h>
#include <string.h>

#define FIELD_MAX 160

/* A schema's properties in one array (props_of): name, length, optionality and TYPE text of each,
 * in the text's order with "@Other" includes spliced in where they stand. */
struct prop {
	const char *name, *type; /* into the schema text; name ends at ':', type at the next ' ' */
	size_t len;
	bool optional;
};

struct prop_index {
	const char *props; /* the schema text this indexes (static, so its address is its identity) */
	struct prop *v;
	size_t n, cap;
};

/* Appends the properties of props (following includes, in order) to ix. */
static void index_props(struct prop_index *ix, const char *props, int depth)
{
	EGS_ASSERT(props && depth < 4); /* the tables are code */
	for (const char *p = props; *p;) {
		size_t tok = strcspn(p, " ");
		if (*p == '@') {
			index_props(ix, egs_openapi_schema(p + 1, tok - 1), depth + 1);
		} else {
			bool opt = *p == '~';
			const char *name = p + opt, *colon = memchr(name, ':', tok - opt);
			if (colon) { /* a token without ':' names nothing (the walk this replaced never matched one) */
				if (ix->n == ix->cap) {
					ix->cap = ix->cap ? 2 * ix->cap : 32;
					ix->v = egs_realloc(ix->v, ix->cap * sizeof(*ix->v));
				}
				ix->v[ix->n++] = (struct prop){ name, colon + 1, (size_t)(colon - name), opt };
			}
		}
		p += tok;
		p += *p == ' ';
	}
}

/* The index of the schema text props, built on first use and kept: a few dozen schemas, each a
 * few hundred bytes of index.  Direct-mapped by address; a collision rebuilds (only costs time). */
static const struct prop_index *props_of(const char *props)
{
	static struct prop_index memo[128];
	uintptr_t h = (uintptr_t)props >> 3;
	h ^= h >> 9;
	struct prop_index *ix = &memo[h % EGS_ARRAY_LEN(memo)];
	if (ix->props != props) {
		ix->n = 0;
		ix->props = props;
		index_props(ix, props, 0);
	}
	return ix;
}

/* The TYPE text of property key in props (following "@Other" includes; the first one named key),
 * with *optional set; NULL when props has no such property.  This runs for every key of every body:
 * walking the schema's text per key was ~800 instructions a key, the index ~100. */
static const char *find_prop(const char *props, const char *key, bool *optional)
{
	const struct prop_index *ix = props_of(props);
	size_t len = strlen(key);
	for (size_t i = 0; i < ix->n; i++) {
		const struct prop *q = &ix->v[i];
		if (q->len == len && q->name[0] == key[0] && memcmp(q->name, key, len) == 0) {
			*optional = q->optional;
			return q->type;
		}
	}
	return NULL;
}

/* Past the base of the TYPE at t (before its '?', if any). */
static const char *type_end(const char *t)
{
	if (*t == '[' || !strncmp(t, "m(", 2)) {
		char close = *t == '[' ? ']' : ')';
		t = type_end(t + (*t == '[' ? 1 : 2));
		t += *t == '?';
		EGS_ASSERT(*t == close);
		return t + 1;
	}
	if (!strncmp(t, "e(", 2)) {
		t = strchr(t, ')');
		EGS_ASSERT(t);
		return t + 1;
	}
	return t + strcspn(t, " ?])");
}

/* For a scalar TYPE (t, n bytes): what v should have been ("a string"), or NULL when it is that.
 * *scalar tells whether the TYPE is one. */
static const char *scalar_want(const char *t, size_t n, json_t *v, bool *scalar)
{
	*scalar = true;
	if (!strncmp(t, "e(", 2) || (n == 1 && (*t == 's' || *t == 't')))
		return json_is_string(v) ? NULL : "a string";
	if (n == 1 && *t == 'i')
		return json_is_integer(v) ? NULL : "an integer";
	if (n == 1 && *t == 'n')
		return json_is_number(v) ? NULL : "a number";
	if (n == 1 && *t == 'b')
		return json_is_boolean(v) ? NULL : "true or false";
	*scalar = false;
	return NULL;
}

/* Appends to field (a buffer of FIELD_MAX) ".key" (or "key" at the top), cut to fit, with bytes
 * outside printable ASCII shown as '?'; returns the old length, to cut it back.  (memcpy, not
 * snprintf: this runs for every key of every body, and snprintf was a fifth of the check.) */
static size_t push_key(char *field, const char *key)
{
	size_t len = strlen(field), at = len;
	if (len && at < FIELD_MAX - 1)
		field[at++] = '.';
	size_t n = strlen(key);
	if (n > FIELD_MAX - 1 - at)
		n = FIELD_MAX - 1 - at;
	memcpy(field + at, key, n);
	field[at + n] = '\0';
	for (char *c = field + at; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			*c = '?';
	return len;
}

static bool check_object(struct egs_req *r, const char *props, json_t *obj, char *field, int depth);
static bool check_value(struct egs_req *r, const char *t, json_t *v, bool optional, char *field, int depth);

/* The elements of list v, each of the TYPE at t.  A wrong element of a list of scalars names the
 * list (as the handlers' own checks do: "clusters", "clusters[1] must be a string"); in a list of
 * objects it names the element ("nodes[0]") or the member at fault ("addUsers[0].username"). */
static bool check_list(struct egs_req *r, const char *t, json_t *v, char *field, int depth)
{
	size_t len = strlen(field), i;
	json_t *e;
	bool scalar;
	json_array_foreach(v, i, e) {
		const char *want = scalar_want(t, (size_t)(type_end(t) - t), e, &scalar);
		if (want) { /* (null is no scalar) */
			egs_reply_invalid(r, field, "%s[%zu] must be %s", field, i, want);
			return false;
		}
		snprintf(field + len, FIELD_MAX - len, "[%zu]", i);
		bool ok = scalar || check_value(r, t, e, false, field, depth + 1);
		field[len] = '\0';
		if (!ok)
			return false;
	}
	return true;
}

/* Whether v is fine for the TYPE at t without a look inside: a scalar of that type, or null where
 * null means "not given".  false may still be fine (lists, objects): check_value decides. */
static bool scalar_fits(const char *t, json_t *v, bool optional)
{
	const char *end = type_end(t);
	bool scalar;
	if (json_is_null(v))
		return optional || *end == '?';
	return !scalar_want(t, (size_t)(end - t), v, &scalar) && scalar;
}

/* Checks v against the TYPE at t; field (FIELD_MAX bytes) names v and is as it was on return. */
static bool check_value(struct egs_req *r, const char *t, json_t *v, bool optional, char *field, int depth)
{
	const char *end = type_end(t);
	size_t n = (size_t)(end - t);
	bool scalar;
	EGS_ASSERT(depth < 16);
	if (json_is_null(v)) {
		if (optional || *end == '?')
			return true;
		egs_reply_invalid(r, field, "%s is required", field);
		return false;
	}
	const char *want = scalar_want(t, n, v, &scalar);
	if (scalar || (n == 3 && !strncmp(t, "any", 3))) {
		if (want)
			egs_reply_invalid(r, field, "%s must be %s", field, want);
		return !want;
	}
	if (*t == '[') {
		if (json_is_array(v))
			return check_list(r, t + 1, v, field, depth);
		egs_reply_invalid(r, field, "%s must be a list", field);
		return false;
	}
	if (!json_is_object(v)) {
		egs_reply_invalid(r, field, "%s must be an object", field);
		return false;
	}
	if (!strncmp(t, "m(", 2)) {
		const char *k;
		json_t *e;
		json_object_foreach(v, k, e) {
			size_t len = push_key(field, k);
			bool ok = check_value(r, t + 2, e, false, field, depth + 1);
			field[len] = '\0';
			if (!ok)
				return false;
		}
		return true;
	}
	if (n == 3 && !strncmp(t, "obj", 3))
		return true;
	return check_object(r, egs_openapi_schema(t, n), v, field, depth + 1);
}

/* Every key of obj is a property of props, of its type. */
static bool check_object(struct egs_req *r, const char *props, json_t *obj, char *field, int depth)
{
	const char *k;
	json_t *v;
	json_object_foreach(obj, k, v) {
		bool optional = false;
		const char *t = find_prop(props, k, &optional);
		if (t && scalar_fits(t, v, optional))
			continue; /* the common case, without naming the field (push_key) for a message */
		size_t len = push_key(field, k);
		if (!t) {
			egs_reply_invalid(r, field, "%s: unknown field", field);
			return false;
		}
		if (!check_value(r, t, v, optional, field, depth))
			return false;
		field[len] = '\0';
	}
	return true;
}

/* egs_openapi_body's answer for a method and route, remembered by their addresses: both are static
 * strings (method_name's and the route table's), and the lookup walks every operation.  The table
 * is direct-mapped; a collision only costs a lookup. */
static const char *body_props(const char *method, const char *route)
{
	static struct {
		const char *method, *route, *props;
	} memo[64];
	uintptr_t h = ((uintptr_t)route >> 3) ^ ((uintptr_t)method >> 1);
	h ^= h >> 7;
	size_t i = h % EGS_ARRAY_LEN(memo);
	if (memo[i].method != method || memo[i].route != route) {
		memo[i].method = method;
		memo[i].route = route;
		memo[i].props = egs_openapi_body(method, route);
	}
	return memo[i].props;
}

bool egs_body_check(struct egs_req *r, const char *method, const char *route)
{
	if (!r->body) /* no body, nothing to check: reads skip the schema lookup */
		return true;
	const char *props = body_props(method, route);
	if (!props)
		return true;
	char field[FIELD_MAX] = "";
	return check_object(r, props, r->body, field, 0);
}
