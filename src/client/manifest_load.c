/*
 * manifest_load.c: where manifests come from (a file, a directory, standard input) and the checks
 * that span documents (an object defined twice), then the apply order.  The YAML itself is
 * manifest.c's business.
 */
#include "core/common.h"

#include "client/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define MANIFEST_MAX_INPUT (16L * 1024 * 1024)

/* Reads all of f (at most MANIFEST_MAX_INPUT bytes) into a new buffer (caller frees); NULL with errno set. */
static char *read_all(FILE *f, size_t *len)
{
	size_t cap = 8192, n = 0, got;
	char *buf = egs_malloc(cap);

	for (;;) {
		if (n == cap) {
			if (cap >= (size_t)MANIFEST_MAX_INPUT) {
				egs_free(buf);
				errno = EFBIG;
				return NULL;
			}
			cap *= 2;
			buf = egs_realloc(buf, cap);
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		egs_free(buf);
		errno = EIO;
		return NULL;
	}
	*len = n;
	return buf;
}

static enum egs_err load_stream(struct egs_manifest *m, FILE *f, const char *name, char *err, size_t errsz)
{
	size_t len = 0;
	char *text = read_all(f, &len);
	enum egs_err rc;

	if (!text) {
		snprintf(err, errsz, "%s: %s", name, errno == EFBIG ? "larger than 16 MiB" : strerror(errno));
		return EGS_ERR_IO;
	}
	rc = egs_manifest_parse(m, text, len, name, err, errsz);
	egs_free(text);
	return rc;
}

static enum egs_err load_file(struct egs_manifest *m, const char *path, char *err, size_t errsz)
{
	FILE *f = fopen(path, "rb");
	enum egs_err rc;

	if (!f) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		return EGS_ERR_IO;
	}
	rc = load_stream(m, f, path, err, errsz);
	fclose(f);
	return rc;
}

static bool manifest_name(const char *name)
{
	size_t n = strlen(name);
	if (name[0] == '.')
		return false;
	return (n > 5 && !strcmp(name + n - 5, ".yaml")) || (n > 4 && !strcmp(name + n - 4, ".yml")) ||
	       (n > 5 && !strcmp(name + n - 5, ".json"));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every manifest file of dir, sorted; each one's errors are reported, the first failure returned. */
static enum egs_err load_dir(struct egs_manifest *m, const char *dir, char *err, size_t errsz)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct egs_vec names = {0};
	enum egs_err rc = EGS_OK;
	size_t used = 0;

	if (!d) {
		snprintf(err, errsz, "%s: %s", dir, strerror(errno));
		return EGS_ERR_IO;
	}
	while ((e = readdir(d)) != NULL)
		if (manifest_name(e->d_name))
			egs_vec_push(&names, egs_strdup(e->d_name));
	closedir(d);
	qsort(names.items, names.len, sizeof(void *), cmp_str);
	for (size_t i = 0; i < names.len; i++) {
		char path[4096];
		enum egs_err r;
		snprintf(path, sizeof(path), "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", (char *)names.items[i]);
		if (used + 2 >= errsz)
			used = errsz - 2; /* no room left for more messages: keep checking, report the first */
		r = load_file(m, path, err + used, errsz - used);
		if (r != EGS_OK) {
			rc = rc ? rc : r;
			used += strlen(err + used);
			if (used + 1 < errsz)
				err[used++] = '\n';
			err[used] = '\0';
		}
		egs_free(names.items[i]);
	}
	egs_vec_cleanup(&names);
	if (used > 0 && err[used - 1] == '\n')
		err[used - 1] = '\0';
	return rc;
}

enum egs_err egs_manifest_load(struct egs_manifest *m, const char *path, char *err, size_t errsz)
{
	struct stat st;

	EGS_ASSERT(errsz > 2);
	err[0] = '\0';
	if (strcmp(path, "-") == 0)
		return load_stream(m, stdin, "<stdin>", err, errsz);
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return load_dir(m, path, err, errsz);
	return load_file(m, path, err, errsz);
}

/* The object's identity for duplicate checks: GPRs are named within their workspace. */
static void obj_key(const struct egs_manifest_obj *o, char *buf, size_t n)
{
	const char *ws = json_string_value(json_object_get(o->body, "sliceName"));
	snprintf(buf, n, "%d/%s/%s", (int)o->kind, o->kind == EGS_MANIFEST_GPR && ws ? ws : "", o->name);
}

/* Appends one "source:line: message" line to err (cut when err is full). */
static void add_line(char *err, size_t errsz, const struct egs_manifest_obj *o, const struct egs_manifest_obj *first)
{
	size_t used = strlen(err);
	snprintf(err + used, errsz - used, "%s%s:%d: %s %s is defined twice (first at %s:%d)", used ? "\n" : "",
		 o->source, o->line, egs_manifest_kind_name(o->kind), o->name, first->source, first->line);
}

enum egs_err egs_manifest_finish(struct egs_manifest *m, char *err, size_t errsz)
{
	char a[300], b[300];
	struct egs_manifest_obj tmp;
	bool dup = false;

	err[0] = '\0';
	for (size_t i = 0; i < m->n; i++) {
		obj_key(&m->objs[i], a, sizeof(a));
		for (size_t j = 0; j < i; j++) {
			obj_key(&m->objs[j], b, sizeof(b));
			if (strcmp(a, b) == 0) {
				add_line(err, errsz, &m->objs[i], &m->objs[j]);
				dup = true;
				break;
			}
		}
	}
	if (dup)
		return EGS_ERR_INVALID;
	for (size_t i = 1; i < m->n; i++) /* insertion sort: stable, and manifests are short */
		for (size_t j = i; j > 0 && m->objs[j - 1].kind > m->objs[j].kind; j--) {
			tmp = m->objs[j - 1];
			m->objs[j - 1] = m->objs[j];
			m->objs[j] = tmp;
		}
	return EGS_OK;
}
