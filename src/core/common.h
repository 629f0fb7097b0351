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

enum egs_err {
	EGS_OK = 0,
	EGS_ERR_INVALID,        /* a field of the input is malformed or out of range (422) */
	EGS_ERR_BAD_REQUEST,    /* the request as a whole is unreadable (400) */
	EGS_ERR_NOT_FOUND,      /* the named object does not exist (404) */
	EGS_ERR_EXISTS,         /* an object with that name already exists (409) */
	EGS_ERR_CONFLICT,       /* the object's state forbids the operation (409) */
	EGS_ERR_UNSATISFIABLE,  /* no node in the inventory could ever satisfy the request (422) */
	EGS_ERR_UNAUTHENTICATED,/* no or unknown credentials (401) */
	EGS_ERR_EXPIRED,        /* the credential has expired (401) */
	EGS_ERR_FORBIDDEN,      /* authenticated but not allowed (403) */
	EGS_ERR_TOO_LARGE,      /* body or header over its bound (413) */
	EGS_ERR_STORE,          /* the store failed; the state is not committed (500) */
	EGS_ERR_IO,             /* a file or network operation failed */
	EGS_ERR_GPR_PROVISIONED,/* the GPR is provisioning or provisioned already (409) */
	EGS_ERR_GPR_RELEASED,   /* the GPR is releasing or released already (409) */
	EGS_ERR_GPR_NOT_PROVISIONED, /* the GPR is still waiting; cancel it instead (409) */
	EGS_ERR_GPR_FINISHED,   /* the GPR was cancelled, rejected or failed (409) */
	EGS_ERR_BUSY,           /* the object is in use (e.g. a workspace with active GPRs) (409) */
	EGS_ERR_METHOD,         /* the path exists but not with this method (405) */
};

/* Returns a static, human readable name for an error code (never NULL). */
const char *egs_err_str(enum egs_err err);

void egs__assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define EGS_ASSERT(e) ((e) ? (void)0 : egs__assert_fail(#e, __FILE__, __LINE__))

/* Allocation wrappers: they never return NULL; out of memory aborts the process. */
void *egs_malloc(size_t n);
void *egs_calloc(size_t n, size_t size);
void *egs_realloc(void *p, size_t n);
char *egs_strdup(const char *s);        /* egs_strdup(NULL) returns NULL */
char *egs_strndup(const char *s, size_t n);
#define egs_free free

/* Copies src into dst of size dstsz, always NUL-terminating.  Returns false when src was cut. */
bool egs_strlcpy(char *dst, const char *src, size_t dstsz);

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
