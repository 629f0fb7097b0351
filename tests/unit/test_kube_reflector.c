/*
 * test_kube_reflector.c: the reflector's cache as a writer's answers fill it (egs_kube_reflector_put,
 * no API server: the reflector is never started): an answer older than the cached object (smaller
 * resourceVersion, compared as numbers, so "9" is older than "10") is dropped, a newer or equal one
 * replaces it, and a resourceVersion that is not a number never counts as older.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "agent/kube_reflector.h"

static json_t *ns(const char *rv, const char *label)
{
	json_t *o = json_pack("{s:{s:s, s:{s:s}}}", "metadata", "name", "ws-dev", "labels", "v", label);
	if (rv)
		json_object_set_new(json_object_get(o, "metadata"), "resourceVersion", json_string(rv));
	return o;
}

static void put(struct egs_kube_reflector *r, const char *rv, const char *label)
{
	json_t *o = ns(rv, label);
	egs_kube_reflector_put(r, o);
	json_decref(o);
}

/* The label v of the cached ws-dev ("" when absent). */
static const char *cached(struct egs_kube_reflector *r, char *buf, size_t n)
{
	json_t *o = egs_kube_reflector_get(r, "ws-dev");
	const char *v = json_string_value(json_object_get(json_object_get(json_object_get(o, "metadata"), "labels"), "v"));
	snprintf(buf, n, "%s", v ? v : "");
	json_decref(o);
	return buf;
}

static void test_put_keeps_the_newer_resource_version(void **unused)
{
	(void)unused;
	char b[32];
	struct egs_kube_reflector *r = egs_kube_reflector_new(NULL, "/api/v1/namespaces", NULL, NULL, NULL, NULL);
	put(r, "10", "a");
	assert_string_equal(cached(r, b, sizeof(b)), "a");
	put(r, "9", "stale"); /* shorter, smaller: a string comparison would call it newer */
	assert_string_equal(cached(r, b, sizeof(b)), "a");
	put(r, "10", "same"); /* the same version again replaces (it is the same write) */
	assert_string_equal(cached(r, b, sizeof(b)), "same");
	put(r, "11", "b");
	assert_string_equal(cached(r, b, sizeof(b)), "b");
	put(r, "2", "stale");
	assert_string_equal(cached(r, b, sizeof(b)), "b");
	egs_kube_reflector_free(r);
}

static void test_put_without_a_numeric_version_replaces(void **unused)
{
	(void)unused;
	char b[32];
	struct egs_kube_reflector *r = egs_kube_reflector_new(NULL, "/api/v1/namespaces", NULL, NULL, NULL, NULL);
	put(r, "10", "a");
	put(r, "opaque-1", "b"); /* not a number: cannot be judged older */
	assert_string_equal(cached(r, b, sizeof(b)), "b");
	put(r, NULL, "c");
	assert_string_equal(cached(r, b, sizeof(b)), "c");
	put(r, "3", "d"); /* the cached one has no number now */
	assert_string_equal(cached(r, b, sizeof(b)), "d");
	put(r, "-5", "e");
	assert_string_equal(cached(r, b, sizeof(b)), "e");
	egs_kube_reflector_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_keeps_the_newer_resource_version),
		cmocka_unit_test(test_put_without_a_numeric_version_replaces),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
