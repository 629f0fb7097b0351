/*
 * input.c: egsd's request input helpers: query parameters, the JSON body's fields read with their
 * checks (type, range, name and text rules), each refusal a 400 in the envelope naming the field
 * and the reason (egs_reply_invalid).  Split out of http.c, which keeps dispatch and replies.
 */
#include "server/server.h"

#include "core/util.h"

#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>

const char *egs_query(struct egs_req *r, const char *name)
{
	return evhttp_find_header(&r->query, name);
}

bool egs_query_time(struct egs_req *r, const char *name, int64_t now, int64_t *out)
{
	const char *v = egs_query(r, name), *why;
	int64_t secs;
	*out = 0;
	if (!v)
		return true;
	if (egs_time_parse(v, out))
		return true;
	if (egs_duration_parse(v, &secs, &why)) {
		*out = now - secs;
		return true;
	}
	egs_reply_invalid(r, name, "%s must be an RFC 3339 time (2026-11-23T10:00:00Z) or a duration such as 1h", name);
	return false;
}

bool egs_body_required(struct egs_req *r)
{
	if (r->body)
		return true;
	egs_reply_err(r, EGS_ERR_BAD_REQUEST, NULL, NULL, "a JSON object body is required");
	return false;
}

bool egs_body_only(struct egs_req *r, const char *const *allowed)
{
	if (!egs_body_required(r))
		return false;
	const char *k;
	json_t *v;
	json_object_foreach(r->body, k, v) {
		bool ok = false;
		for (const char *const *a = allowed; *a && !ok; a++)
			ok = strcmp(*a, k) == 0;
		if (!ok) {
			char shown[80];
			egs_strlcpy(shown, k, sizeof(shown));
			for (char *c = shown; *c; c++)
				if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
					*c = '?';
			egs_reply_invalid(r, shown, "%s: unknown field", shown);
			return false;
		}
	}
	return true;
}

bool egs_get_str(struct egs_req *r, json_t *obj, const char *field, bool required, char *out, size_t outsz)
{
	out[0] = '\0';
	json_t *v = obj ? json_object_get(obj, field) : NULL;
	if (!v || json_is_null(v)) {
		if (required) {
			egs_reply_invalid(r, field, "%s is not allowed to be empty", field);
			return false;
		}
		return true;
	}
	if (!json_is_string(v)) {
		egs_reply_invalid(r, field, "%s must be a string", field);
		return false;
	}
	size_t len = json_string_length(v);
	const char *s = json_string_value(v);
	if (strlen(s) != len) {
		egs_reply_invalid(r, field, "%s must not contain NUL characters", field);
		return false;
	}
	if (len >= outsz) {
		egs_reply_invalid(r, field, "%s must be at most %zu characters", field, outsz - 1);
		return false;
	}
	if (required && len == 0) {
		egs_reply_invalid(r, field, "%s is not allowed to be empty", field);
		return false;
	}
	memcpy(out, s, len + 1);
	return true;
}

bool egs_get_int(struct egs_req *r, json_t *obj, const char *field, bool required, int64_t min, int64_t max,
		 int64_t *out, bool *present)
{
	json_t *v = obj ? json_object_get(obj, field) : NULL;
	if (present)
		*present = false;
	if (!v || json_is_null(v)) {
		if (required) {
			egs_reply_invalid(r, field, "%s is required", field);
			return false;
		}
		return true;
	}
	if (!json_is_integer(v)) {
		egs_reply_invalid(r, field, "%s must be an integer", field);
		return false;
	}
	json_int_t i = json_integer_value(v);
	if (i < min || i > max) {
		egs_reply_invalid(r, field, "%s must be between %lld and %lld", field, (long long)min, (long long)max);
		return false;
	}
	*out = i;
	if (present)
		*present = true;
	return true;
}

bool egs_get_bool(struct egs_req *r, json_t *obj, const char *field, bool *out, bool *present)
{
	json_t *v = obj ? json_object_get(obj, field) : NULL;
	if (present)
		*present = false;
	*out = false;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_boolean(v)) {
		egs_reply_invalid(r, field, "%s must be true or false", field);
		return false;
	}
	*out = json_is_true(v);
	if (present)
		*present = true;
	return true;
}

bool egs_check_name(struct egs_req *r, const char *field, const char *value, bool dns_label)
{
	const char *why = NULL;
	bool ok = dns_label ? egs_dns_label_valid(value, &why) : egs_label_valid(value, &why);
	if (!ok)
		egs_reply_invalid(r, field, "%s %s", field, why);
	return ok;
}

bool egs_check_text(struct egs_req *r, const char *field, const char *value)
{
	for (const unsigned char *c = (const unsigned char *)value; *c; c++) {
		if (*c < 0x20 || *c == 0x7f) {
			egs_reply_invalid(r, field, "%s must not contain control characters", field);
			return false;
		}
	}
	return true;
}

bool egs_get_names(struct egs_req *r, json_t *obj, const char *field, size_t max, struct egs_strlist *out)
{
	json_t *v = obj ? json_object_get(obj, field) : NULL;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_array(v)) {
		egs_reply_invalid(r, field, "%s must be a list of names", field);
		return false;
	}
	if (json_array_size(v) > max) {
		egs_reply_invalid(r, field, "%s may list at most %zu names", field, max);
		return false;
	}
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e)) {
			egs_reply_invalid(r, field, "%s[%zu] must be a string", field, i);
			return false;
		}
		const char *why;
		if (!egs_dns_label_valid(json_string_value(e), &why)) {
			egs_reply_invalid(r, field, "%s[%zu] %s", field, i, why);
			return false;
		}
		if (!egs_strlist_has(out, json_string_value(e)))
			egs_strlist_add(out, json_string_value(e));
	}
	return true;
}
