/*
 * store_impl.h: what a store implementation provides behind store.h (for store_*.c only).
 *
 * Every implementation's handle begins with a struct egs_store whose ops point at its functions;
 * store.c dispatches the public calls through them.  The contracts are store.h's: an
 * implementation's commit_changes leaves nothing of the turn behind when it fails; it returns once
 * the turn is durable unless the implementation has the sync_* ops, which then make every write
 * durable apart from it (store.h, "durability").  commit_send may return before the turn committed
 * (PostgreSQL: once it is sent); its outcome then comes through the sync ops, a failure as their
 * error.
 */
#ifndef EGS_STORE_IMPL_H
#define EGS_STORE_IMPL_H

#include "store/store.h"

struct egs_store_ops {
	const char *name; /* "sqlite", "postgres": for logs and /healthz */
	void (*free)(struct egs_store *s);
	enum egs_err (*lead)(struct egs_store *s); /* NULL: nothing to do */
	/* Several egsd over one database (store.h); NULL: this process always leads. */
	enum egs_err (*try_lead)(struct egs_store *s, const char *addr, bool *led);
	enum egs_err (*leader)(struct egs_store *s, struct egs_store_leader *out);
	enum egs_err (*renew)(struct egs_store *s);
	enum egs_err (*follow)(struct egs_store *s, egs_store_row_fn row, egs_store_event_fn event, void *ctx);
	void (*adopt_load)(struct egs_store *s, const struct egs_store *from);
	bool (*deposed)(struct egs_store *s);
	enum egs_err (*load)(struct egs_store *s, struct egs_state *st);
	enum egs_err (*commit_changes)(struct egs_store *s, struct egs_state *st);
	/* egs_store_commit_send (store.h); NULL: commit_changes. */
	enum egs_err (*commit_send)(struct egs_store *s, struct egs_state *st);
	/* The highest write number known durable without waiting, read after every write (NULL: only
	 * sync_poll and sync_wait move it). */
	uint64_t (*acked)(struct egs_store *s);
	enum egs_err (*meta_get)(struct egs_store *s, const char *key, char **value);
	enum egs_err (*meta_set)(struct egs_store *s, const char *key, const char *value);
	enum egs_err (*prune_events_below)(struct egs_store *s, int64_t before, int64_t below_id, int64_t *deleted);
	enum egs_err (*audit_list)(struct egs_store *s, const struct egs_audit_filter *f, struct egs_vec *out);
	enum egs_err (*audit_prune)(struct egs_store *s, int64_t before, int64_t *deleted);
	enum egs_err (*audit_last_id)(struct egs_store *s, int64_t *out);
	enum egs_err (*gprs_find)(struct egs_store *s, const struct egs_gpr_find *f, egs_store_gpr_fn each, void *ctx);
	/* Durability apart from the commit (store.h); all NULL: every write is durable when it returns.
	 * Write numbers are store.c's count (struct egs_store's written). */
	void (*sync_request)(struct egs_store *s, uint64_t upto);
	int (*sync_fd)(struct egs_store *s);
	enum egs_err (*sync_poll)(struct egs_store *s, uint64_t *durable);
	enum egs_err (*sync_wait)(struct egs_store *s, uint64_t upto, uint64_t *durable);
	bool (*commit_held)(struct egs_store *s); /* egs_store_commit_held; NULL: never */
	void (*stats)(struct egs_store *s, struct egs_store_stats *out); /* NULL: none (store.h) */
};

/* The first member of every implementation's handle (so a handle converts to and from it). */
struct egs_store {
	const struct egs_store_ops *ops;
	/* Kept by store.c on the loop thread (implementations leave them zero): write transactions
	 * committed so far, the highest asked to become durable, the highest known durable. */
	uint64_t written, requested, durable;
};

#endif
