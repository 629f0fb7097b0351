/*
 * err.h: the result codes every EGS module and libegs return (enum egs_err, 0 = ok).  This is the one
 * definition: src/core/common.h includes it.
 */
#ifndef EGS_ERR_H
#define EGS_ERR_H

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
	EGS_ERR_KEY_EXPIRED,    /* the API key itself has expired (401, message "Api Key has expired") */
	EGS_ERR_NOT_IMPLEMENTED,/* a public API route this server does not serve yet (501) */
	EGS_ERR_UNAVAILABLE,    /* the server cannot take the request now (503) */
	EGS_ERR_STORAGE_FULL,   /* the store's disk is full: nothing was saved (507) */
};

/* Returns a static, human readable name for an error code (never NULL). */
const char *egs_err_str(enum egs_err err);

#endif
