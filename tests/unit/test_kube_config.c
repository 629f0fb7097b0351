/*
 * test_kube_config.c: kubeconfig parsing (the current context's cluster and user: server, CA data or
 * file, insecure flag, token, token file, client certificate and key; relative paths; refusals of
 * missing contexts, non-base64 data, unsupported auth methods, half a client certificate), the
 * in-cluster configuration, and URL escaping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "-----BEGIN CERTIFICATE-----\nX\n" in base64 */
#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tClgK"

static const char *const good =
	"apiVersion: v1\n"
	"kind: Config\n"
	"current-context: work\n"
	"clusters:\n"
	"- name: other\n"
	"  cluster: {server: 'https://wrong:1'}\n"
	"- name: c1\n"
	"  cluster:\n"
	"    server: https://10.0.0.1:6443/\n"
	"    certificate-authority-data: " CA_B64 "\n"
	"contexts:\n"
	"- name: play\n"
	"  context: {cluster: other, user: u1}\n"
	"- name: work\n"
	"  context: {cluster: c1, user: u1, namespace: default}\n"
	"users:\n"
	"- name: u1\n"
	"  user:\n"
	"    token: abc.def\n";

static enum egs_err parse(const char *text, const char *base, struct egs_kube_config *c, char *err)
{
	return egs_kube_config_parse(text, strlen(text), "kc", base, c, err, 256);
}

static void test_current_context(void **state)
{
	struct egs_kube_config c;
	char err[256];
	(void)state;

	assert_int_equal(parse(good, NULL, &c, err), EGS_OK);
	assert_string_equal(c.server, "https://10.0.0.1:6443"); /* trailing slash dropped */
	assert_string_equal(c.ca_pem, "-----BEGIN CERTIFICATE-----\nX\n");
	assert_string_equal(c.token, "abc.def");
	assert_null(c.ca_file);
	assert_null(c.cert_pem);
	assert_false(c.insecure);
	egs_kube_config_cleanup(&c);
}

static void test_files_relative(void **state)
{
	struct egs_kube_config c;
	char err[256];
	(void)state;

	assert_int_equal(parse("current-context: x\n"
			       "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
			       "clusters: [{name: c, cluster: {server: 'https://h:1', certificate-authority: ca.crt,"
			       " insecure-skip-tls-verify: true}}]\n"
			       "users: [{name: u, user: {tokenFile: /abs/token, client-certificate: sub/c.crt,"
			       " client-key: sub/c.key}}]\n",
			       "/etc/kube", &c, err),
			 EGS_OK);
	assert_string_equal(c.ca_file, "/etc/kube/ca.crt");
	assert_string_equal(c.token_file, "/abs/token");
	assert_string_equal(c.cert_file, "/etc/kube/sub/c.crt");
	assert_string_equal(c.key_file, "/etc/kube/sub/c.key");
	assert_true(c.insecure);
	assert_null(c.token);
	egs_kube_config_cleanup(&c);
}

static void test_client_cert_data(void **state)
{
	struct egs_kube_config c;
	char err[256];
	(void)state;

	assert_int_equal(parse("current-context: x\n"
			       "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
			       "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
			       "users: [{name: u, user: {client-certificate-data: " CA_B64 ", client-key-data: " CA_B64 "}}]\n",
			       NULL, &c, err),
			 EGS_OK);
	assert_non_null(c.cert_pem);
	assert_non_null(c.key_pem);
	egs_kube_config_cleanup(&c);
}

/* Each refusal names what is wrong. */
static void test_refusals(void **state)
{
	static const struct {
		const char *text, *why;
	} cases[] = {
		{"[1, 2]\n", "not a kubeconfig"},
		{"clusters: []\n", "no current-context"},
		{"current-context: x\ncontexts: []\n", "context 'x' is not in contexts"},
		{"current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\nclusters: []\n",
		 "cluster 'c' is not in clusters"},
		{"current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
		 "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n",
		 "user 'u' is not in users"},
		{"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
		 "clusters: [{name: c, cluster: {server: 'ftp://h'}}]\n",
		 "https:// URL"},
		{"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
		 "clusters: [{name: c, cluster: {server: 'https://h', certificate-authority-data: '@@@'}}]\n",
		 "not base64"},
		{"current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
		 "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
		 "users: [{name: u, user: {exec: {command: aws}}}]\n",
		 "'exec' authentication is not supported"},
		{"current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
		 "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
		 "users: [{name: u, user: {client-certificate: a.crt}}]\n",
		 "needs its key"},
		{"current-context: [unclosed\n", "kc:"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct egs_kube_config c;
		char err[256] = "";
		assert_int_equal(parse(cases[i].text, NULL, &c, err), EGS_ERR_INVALID);
		if (!strstr(err, cases[i].why))
			fail_msg("case %zu: '%s' lacks '%s'", i, err, cases[i].why);
		assert_null(c.server); /* cleaned up */
	}
}

static void test_incluster(void **state)
{
	char dir[] = "/tmp/egs-test-sa-XXXXXX", path[64], err[256];
	struct egs_kube_config c;
	FILE *f;
	(void)state;

	assert_non_null(mkdtemp(dir));
	unsetenv("KUBERNETES_SERVICE_HOST");
	assert_int_equal(egs_kube_config_incluster(dir, &c, err, sizeof(err)), EGS_ERR_NOT_FOUND);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	assert_int_equal(egs_kube_config_incluster(dir, &c, err, sizeof(err)), EGS_ERR_IO); /* no token yet */
	snprintf(path, sizeof(path), "%s/token", dir);
	f = fopen(path, "w");
	fputs("tok\n", f);
	fclose(f);
	assert_int_equal(egs_kube_config_incluster(dir, &c, err, sizeof(err)), EGS_OK);
	assert_string_equal(c.server, "https://10.96.0.1:443");
	assert_string_equal(c.token_file, path);
	assert_non_null(strstr(c.ca_file, "/ca.crt"));
	egs_kube_config_cleanup(&c);
	unlink(path);
	rmdir(dir);
}

static void test_escape(void **state)
{
	char out[64];
	(void)state;
	assert_true(egs_kube_escape("spec.nodeName=gpu-1", out, sizeof(out)));
	assert_string_equal(out, "spec.nodeName%3Dgpu-1");
	assert_true(egs_kube_escape("a b/c", out, sizeof(out)));
	assert_string_equal(out, "a%20b%2Fc");
	assert_false(egs_kube_escape("abcdef", out, 4));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_current_context), cmocka_unit_test(test_files_relative),
		cmocka_unit_test(test_client_cert_data), cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_incluster),       cmocka_unit_test(test_escape),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
