/*
 * common.c: allocation wrappers, assertions and the pointer vector.  Out of memory is treated as
 * a fatal bug-class condition (as in Redis): a control plane that cannot allocate cannot keep its
 * promises, so it stops loudly and the store brings it back.
 */
#include "core/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static const char *const err_names[] = {
	[EGS_OK] = "ok",
	[EGS_ERR_INVALID] = "invalid",
	[EGS_ERR_BAD_REQUEST] = "bad request",
	[EGS_ERR_NOT_FOUND] = "not found",
	[EGS_ERR_EXISTS] = "already exists",
	[EGS_ERR_CONFLICT] = "conflict",
	[EGS_ERR_UNSATISFIABLE] = "unsatisfiable",
	[EGS_ERR_UNAUTHENTICATED] = "unauthenticated",
	[EGS_ERR_EXPIRED] = "expired",
	[EGS_ERR_FORBIDDEN] = "forbidden",
	[EGS_ERR_TOO_LARGE] = "too large",
	[EGS_ERR_STORE] = "store failure",
	[EGS_ERR_IO] = "i/o error",
	[EGS_ERR_GPR_PROVISIONED] = "gpr already provisioned",
	[EGS_ERR_GPR_RELEASED] = "gpr already released",
	[EGS_ERR_GPR_NOT_PROVISIONED] = "gpr not provisioned",
	[EGS_ERR_GPR_FINISHED] = "gpr finished",
	[EGS_ERR_BUSY] = "in use",
	[EGS_ERR_METHOD] = "method not allowed",
	[EGS_ERR_KEY_EXPIRED] = "api key expired",
	[EGS_ERR_NOT_IMPLEMENTED] = "not implemented",
	[EGS_ERR_UNAVAILABLE] = "unavailable",
	[EGS_ERR_STORAGE_FULL] = "storage full",
};

const char *egs_err_str(enum egs_err err)
{
	if ((size_t)err < EGS_ARRAY_LEN(err_names) && err_names[err])
		return err_names[err];
	return "unknown error";
}

void egs__assert_fail(const char *expr, const char *file, int line)
{
	fprintf(stderr, "egs: assertion failed: %s (%s:%d)\n", expr, file, line);
	fflush(stderr);
	abort();
}

static void *oom(size_t n)
{
	fprintf(stderr, "egs: out of memory allocating %zu bytes\n", n);
	abort();
}

void *egs_malloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	return p ? p : oom(n);
}

void *egs_calloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	return p ? p : oom(n * size);
}

void *egs_realloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	return q ? q : oom(n);
}

void *egs_pages_zeroed(size_t n)
{
	void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p != MAP_FAILED ? p : oom(n);
}

void egs_pages_free(void *p, size_t n)
{
	if (p)
		munmap(p, n ? n : 1);
}

char *egs_strdup(const char *s)
{
	if (!s)
		return NULL;
	return egs_strndup(s, strlen(s));
}

char *egs_strndup(const char *s, size_t n)
{
	char *d = egs_malloc(n + 1);
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

bool egs_strlcpy(char *dst, const char *src, size_t dstsz)
{
	size_t n = strlen(src);
	bool fits = n < dstsz;
	if (!fits) { /* cut on a character boundary: never leave half a UTF-8 sequence */
		n = dstsz - 1;
		while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80)
			n--;
	}
	memcpy(dst, src, n);
	dst[n] = '\0';
	return fits;
}

void egs_vec_push(struct egs_vec *v, void *item)
{
	if (v->len == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 8;
		v->items = egs_realloc(v->items, v->cap * sizeof(void *));
	}
	v->items[v->len++] = item;
}

bool egs_vec_remove(struct egs_vec *v, void *item)
{
	for (size_t i = 0; i < v->len; i++) {
		if (v->items[i] == item) {
			v->items[i] = v->items[--v->len];
			return true;
		}
	}
	return false;
}

void egs_vec_cleanup(struct egs_vec *v)
{
	free(v->items);
	v->items = NULL;
	v->len = v->cap = 0;
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s)
{
	size_t len;
	unsigned min;
	unsigned cp;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xE0) == 0xC0)
		len = 2, min = 0x80, cp = s[0] & 0x1F;
	else if ((s[0] & 0xF0) == 0xE0)
		len = 3, min = 0x800, cp = s[0] & 0x0F;
	else if ((s[0] & 0xF8) == 0xF0)
		len = 4, min = 0x10000, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return len;
}

void egs_utf8_sanitize(char *s)
{
	for (unsigned char *p = (unsigned char *)s; *p;) {
		if (*p < 0x80) { /* ASCII, the common case (every create's event and audit entry), without the call */
			p++;
			continue;
		}
		size_t n = utf8_seq(p);
		if (n)
			p += n;
		else
			*p++ = '?';
	}
}

bool egs_text_clean(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		if (*p >= 0x20 && *p < 0x7f) { /* printable ASCII, the common case, without utf8_seq's call */
			p++;
			continue;
		}
		size_t n = utf8_seq(p);
		if (!n || *p < 0x20 || *p == 0x7f)
			return false;
		p += n;
	}
	return true;
}
