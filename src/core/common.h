/*
 * common.h: the few things every module of EGS shares: the error enum, the always-on assertion,
 * the allocation wrappers that abort on out-of-memory, and a growable pointer vector.
 *
 * Invariant: functions that can fail return enum egs_err (EGS_OK == 0) and hand results back
 * through out-parameters.  A broken invariant is a bug, not an error: EGS_ASSERT aborts with
 * file:line in every build type.
 */
#ifndef EGS_COMMON_H
#define EGS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "egs/err.h" /* enum egs_err and egs_err_str: shared with libegs users */


void egs__assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define EGS_ASSERT(e) ((e) ? (void)0 : egs__assert_fail(#e, __FILE__, __LINE__))

/* Allocation wrappers: they never return NULL; out of memory aborts the process. */
void *egs_malloc(size_t n);
void *egs_calloc(size_t n, size_t size);
void *egs_realloc(void *p, size_t n);
char *egs_strdup(const char *s);        /* egs_strdup(NULL) returns NULL */
char *egs_strndup(const char *s, size_t n);
#define egs_free free
/* n zeroed bytes in pages of their own (mmap), whose pages fault in as they are first touched,
 * where calloc may zero all of a large block at once (glibc does, from the heap, once a large free
 * raised its mmap threshold); freed with egs_pages_free(p, n), the same n. */
void *egs_pages_zeroed(size_t n);
void egs_pages_free(void *p, size_t n); /* NULL is a no-op */

/* Copies src into dst of size dstsz, always NUL-terminating and never cutting a UTF-8 sequence in
 * half.  Returns false when src was cut. */
bool egs_strlcpy(char *dst, const char *src, size_t dstsz);

/* Replaces every byte of s that is not part of a valid UTF-8 sequence with '?', in place (text
 * built with snprintf from user input may end in half a character; JSON needs valid UTF-8). */
void egs_utf8_sanitize(char *s);
/* True when s is valid UTF-8 without control characters (0x00-0x1f, 0x7f). */
bool egs_text_clean(const char *s);

/* A growable vector of borrowed pointers.  Zero-initialised storage is an empty vector. */
struct egs_vec {
	void **items;
	size_t len;
	size_t cap;
};
void egs_vec_push(struct egs_vec *v, void *item);
/* Removes the first occurrence of item by swapping the last element in; returns true if found. */
bool egs_vec_remove(struct egs_vec *v, void *item);
void egs_vec_cleanup(struct egs_vec *v);

#define EGS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
