/*
 * fuzz_prom.c: libFuzzer target for the Prometheus text format parser that reads dcgm-exporter
 * (src/agent/prom.c).  Checks, beyond memory safety: an accepted sample has a valid metric name and
 * label names; a refusal is EGS_ERR_INVALID and names its line ("line N: ..."); a success leaves no
 * error text.
 */
#include "agent/prom.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct seen {
	size_t samples;
	bool refused;
};

static bool name_ok(const char *s, bool metric)
{
	if (!*s)
		return false;
	for (const char *p = s; *p; p++) {
		bool alpha = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' || (metric && *p == ':');
		if (!alpha && (p == s || *p < '0' || *p > '9'))
			return false;
	}
	return true;
}

static bool on_sample(void *arg, const struct egs_prom_sample *s)
{
	struct seen *z = arg;
	if (!name_ok(s->name, true) || s->n_labels > EGS_PROM_LABELS_MAX)
		abort();
	for (size_t i = 0; i < s->n_labels; i++)
		if (!name_ok(s->labels[i].name, false) || strlen(s->labels[i].value) > EGS_PROM_LINE_MAX)
			abort();
	z->samples++;
	return true;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct seen z = { 0 };
	char err[200];

	if (size > 1 << 20)
		return 0;
	enum egs_err rc = egs_prom_parse((const char *)data, size, on_sample, &z, err, sizeof(err));
	if (rc != EGS_OK && (rc != EGS_ERR_INVALID || strncmp(err, "line ", 5) != 0))
		abort();
	if (rc == EGS_OK && err[0])
		abort();
	return 0;
}
