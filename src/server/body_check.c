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

/* The TYPE text of property key in props (following "@Other" includes), with *optional set; NULL
 * when props has no such property. */
static const char *find_prop(const char *props, const char *key, bool *optional, int depth)
{
	EGS_ASSERT(props && depth < 4); /* the tables are code */
	/* One pass over the text, comparing the key as it goes (this runs for every key of every body: two
	 * strcspn and a strncmp per property were a twentieth of a create's instructions). */
	for (const char *p = props; *p;) {
		if (*p == '@') {
			size_t n = strcspn(p, " ");
			const char *t = find_prop(egs_openapi_schema(p + 1, n - 1), key, optional, depth + 1);
			if (t)
				return t;
		} else {
			bool opt = *p == '~';
			const char *name = p + opt;
			size_t i = 0;
			while (key[i] && name[i] == key[i] && name[i] != ':' && name[i] != ' ')
				i++;
			if (!key[i] && name[i] == ':') {
				*optional = opt;
				return name + i + 1;
			}
		}
		p = strchr(p, ' ');
		if (!p)
			break;
		p++;
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
		const char *t = find_prop(props, k, &optional, 0);
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
