/*
 * test_webhook.c: the admission review: GPU pods of slice namespaces get the toleration and the node
 * affinity (ANDed into existing node selector terms, never duplicated), CPU-only pods and pods outside
 * slices are left alone, pods outside slices that tolerate the EGS taint are refused with 403, and the
 * webhook configurations point at the agent with the CA bundle.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/webhook.h"

#include <sodium.h>
#include <string.h>

static bool slice(void *arg, const char *ns, char *ws, size_t wssz)
{
	(void)arg;
	if (strcmp(ns, "team-a") != 0)
		return false;
	snprintf(ws, wssz, "%s", "ws-a");
	return true;
}

static json_t *review(const char *ns, const char *op, const char *spec)
{
	char text[4096];
	snprintf(text, sizeof(text),
		 "{\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": \"AdmissionReview\", \"request\": {\"uid\": \"u-1\","
		 " \"kind\": {\"group\": \"\", \"version\": \"v1\", \"kind\": \"Pod\"}, \"resource\": {\"group\": \"\","
		 " \"version\": \"v1\", \"resource\": \"pods\"}, \"namespace\": \"%s\", \"operation\": \"%s\","
		 " \"object\": {\"metadata\": {\"name\": \"p\"}, \"spec\": %s}}}",
		 ns, op, spec);
	json_t *j = json_loads(text, 0, NULL);
	assert_non_null(j);
	return j;
}

/* The response of path for review r; *ops gets the decoded JSON Patch (NULL when none). */
static json_t *answer(const char *path, json_t *r, json_t **ops)
{
	json_t *a = egs_webhook_review(path, r, slice, NULL), *resp = json_object_get(a, "response");
	const char *b64 = json_string_value(json_object_get(resp, "patch"));

	assert_non_null(a);
	assert_string_equal(json_string_value(json_object_get(resp, "uid")), "u-1");
	*ops = NULL;
	if (b64) {
		unsigned char buf[4096];
		size_t len = 0;
		assert_int_equal(sodium_base642bin(buf, sizeof(buf), b64, strlen(b64), NULL, &len, NULL,
						   sodium_base64_VARIANT_ORIGINAL), 0);
		*ops = json_loadb((const char *)buf, len, 0, NULL);
		assert_string_equal(json_string_value(json_object_get(resp, "patchType")), "JSONPatch");
	}
	json_decref(r);
	return a;
}

#define GPU_CONTAINER "\"containers\": [{\"name\": \"c\", \"resources\": {\"limits\": {\"nvidia.com/gpu\": \"1\"}}}]"

static void test_mutate_gpu_pod(void **state)
{
	json_t *ops, *a = answer("/mutate", review("team-a", "CREATE", "{" GPU_CONTAINER "}"), &ops);
	(void)state;

	assert_non_null(ops);
	assert_int_equal(json_array_size(ops), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(ops, 0), "path")), "/spec/tolerations");
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(json_array_get(ops, 0), "value"), 0),
							      "key")), "kubeslice.io/egs");
	json_t *aff = json_object_get(json_array_get(ops, 1), "value");
	json_t *expr = json_array_get(json_object_get(json_array_get(json_object_get(json_object_get(json_object_get(aff,
		"nodeAffinity"), "requiredDuringSchedulingIgnoredDuringExecution"), "nodeSelectorTerms"), 0), "matchExpressions"), 0);
	assert_string_equal(json_string_value(json_object_get(expr, "key")), "kubeslice.io/slice");
	assert_string_equal(json_string_value(json_array_get(json_object_get(expr, "values"), 0)), "ws-a");
	json_decref(ops);
	json_decref(a);
}

static void test_mutate_leaves_others(void **state)
{
	json_t *ops, *a;
	(void)state;

	a = answer("/mutate", review("team-a", "CREATE", "{\"containers\": [{\"name\": \"c\"}]}"), &ops);
	assert_null(ops); /* CPU-only */
	json_decref(a);
	a = answer("/mutate", review("elsewhere", "CREATE", "{" GPU_CONTAINER "}"), &ops);
	assert_null(ops); /* not a slice namespace */
	assert_true(json_is_true(json_object_get(json_object_get(a, "response"), "allowed")));
	json_decref(a);
}

/* Existing terms each get the expression (terms are ORed); a term that has it is left alone. */
static void test_mutate_existing_terms(void **state)
{
	json_t *ops, *a = answer("/mutate", review("team-a", "CREATE",
		"{" GPU_CONTAINER ", \"tolerations\": [{\"key\": \"x\", \"operator\": \"Exists\"}], \"affinity\":"
		" {\"nodeAffinity\": {\"requiredDuringSchedulingIgnoredDuringExecution\": {\"nodeSelectorTerms\": ["
		"{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"In\", \"values\": [\"a\"]}]},"
		"{\"matchFields\": [{\"key\": \"metadata.name\", \"operator\": \"In\", \"values\": [\"n\"]}]},"
		"{\"matchExpressions\": [{\"key\": \"kubeslice.io/slice\", \"operator\": \"In\", \"values\": [\"ws-a\"]}]}"
		"]}}}}"), &ops);
	(void)state;

	assert_int_equal(json_array_size(ops), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(ops, 0), "path")), "/spec/tolerations/-");
	assert_non_null(strstr(json_string_value(json_object_get(json_array_get(ops, 1), "path")),
			       "nodeSelectorTerms/0/matchExpressions/-"));
	assert_non_null(strstr(json_string_value(json_object_get(json_array_get(ops, 2), "path")),
			       "nodeSelectorTerms/1/matchExpressions"));
	json_decref(ops);
	json_decref(a);
}

static void test_validate(void **state)
{
	const char *tolerating = "{\"containers\": [], \"tolerations\": [{\"key\": \"kubeslice.io/egs\", \"operator\": \"Exists\"}]}";
	json_t *ops, *a, *resp;
	(void)state;

	a = answer("/validate", review("elsewhere", "CREATE", tolerating), &ops);
	resp = json_object_get(a, "response");
	assert_true(json_is_false(json_object_get(resp, "allowed")));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(resp, "status"), "code")), 403);
	json_decref(a);
	a = answer("/validate", review("elsewhere", "UPDATE", tolerating), &ops);
	assert_true(json_is_false(json_object_get(json_object_get(a, "response"), "allowed")));
	json_decref(a);
	a = answer("/validate", review("team-a", "CREATE", tolerating), &ops);
	assert_true(json_is_true(json_object_get(json_object_get(a, "response"), "allowed")));
	json_decref(a);
	a = answer("/validate", review("elsewhere", "CREATE", "{\"containers\": []}"), &ops);
	assert_true(json_is_true(json_object_get(json_object_get(a, "response"), "allowed")));
	json_decref(a);
	json_t *bad = json_loads("{\"request\": {}}", 0, NULL);
	assert_null(egs_webhook_review("/validate", bad, slice, NULL));
	json_decref(bad);
}

static void test_configuration(void **state)
{
	json_t *c = egs_webhook_configuration(true, "https://10.0.0.5:9443", "PEM");
	json_t *w = json_array_get(json_object_get(c, "webhooks"), 0);
	(void)state;

	assert_string_equal(json_string_value(json_object_get(c, "kind")), "MutatingWebhookConfiguration");
	assert_string_equal(json_string_value(json_object_get(json_object_get(w, "clientConfig"), "url")),
			    "https://10.0.0.5:9443/mutate");
	assert_string_equal(json_string_value(json_object_get(json_object_get(w, "clientConfig"), "caBundle")), "UEVN");
	assert_string_equal(json_string_value(json_object_get(w, "failurePolicy")), "Fail");
	json_decref(c);
	c = egs_webhook_configuration(false, "https://h:1", "PEM");
	w = json_array_get(json_object_get(c, "webhooks"), 0);
	assert_string_equal(json_string_value(json_object_get(c, "kind")), "ValidatingWebhookConfiguration");
	assert_string_equal(json_string_value(json_object_get(w, "failurePolicy")), "Ignore");
	json_decref(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mutate_gpu_pod),     cmocka_unit_test(test_mutate_leaves_others),
		cmocka_unit_test(test_mutate_existing_terms), cmocka_unit_test(test_validate),
		cmocka_unit_test(test_configuration),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
