/*
 * kube_reflector.h: one reflector per Kubernetes resource kind, after client-go's: list, then watch
 * from the list's resourceVersion with bookmarks, list again on 410 Gone, back off while the API server
 * is down, all in its own thread, feeding a local cache that the rest of the agent reads.
 *
 * The cache is a map from "name" (cluster-scoped kinds) or "namespace/name" to the object's JSON.
 * Readers get deep copies (or run a callback under the cache's lock), so the JSON they hold never
 * changes under them.  A change callback fires after every change the watch brings (and after each
 * list), outside the lock; consumers must compare the cache with what they want (reconcile), never
 * act on the event alone, since events may be missed (a re-list) or repeated.
 */
#ifndef EGS_AGENT_KUBE_REFLECTOR_H
#define EGS_AGENT_KUBE_REFLECTOR_H

#include "agent/kube.h"

struct egs_kube_reflector;

/* Called after the cache changed (from the reflector's thread; arg borrowed). */
typedef void (*egs_kube_changed_fn)(void *arg);

/* Returns what of obj (borrowed) to cache: a new reference (obj itself, increfed, or a smaller copy).
 * Like client-go's transform functions: a node's image list and managed fields are most of its size. */
typedef json_t *(*egs_kube_transform_fn)(json_t *obj);

/*
 * A reflector for the collection at path (e.g. "/api/v1/nodes", "/api/v1/pods"), optionally narrowed
 * by a label selector (NULL: all; copied); transform (NULL: none) trims each object before it is cached.  k is borrowed and must outlive the reflector.  Nothing
 * runs until egs_kube_reflector_start().  Caller frees with egs_kube_reflector_free().
 */
struct egs_kube_reflector *egs_kube_reflector_new(struct egs_kube *k, const char *path, const char *selector,
						  egs_kube_transform_fn transform, egs_kube_changed_fn fn, void *arg);

/* Starts the thread.  EGS_ERR_IO when it cannot be created. */
enum egs_err egs_kube_reflector_start(struct egs_kube_reflector *r);

/* Waits up to timeout_ms for the first complete list; true once the cache holds one. */
bool egs_kube_reflector_wait_synced(struct egs_kube_reflector *r, int timeout_ms);

/* True while the watch is connected (false while the API server cannot be reached). */
bool egs_kube_reflector_connected(struct egs_kube_reflector *r);

/* A deep copy of the object under key, or NULL (caller decrefs). */
json_t *egs_kube_reflector_get(struct egs_kube_reflector *r, const char *key);

/* Calls fn(arg, obj) with the object under key (borrowed, under the cache's lock: fn must not keep it or
 * call back into the reflector) and returns true; false (fn not called) when there is none.  The cheap
 * read: no copy. */
bool egs_kube_reflector_read(struct egs_kube_reflector *r, const char *key, void (*fn)(void *arg, json_t *obj),
			     void *arg);

/* Calls fn(arg, key, obj) for every object under the cache's lock (obj borrowed: fn must not keep it
 * or call back into the reflector). */
void egs_kube_reflector_foreach(struct egs_kube_reflector *r, void (*fn)(void *arg, const char *key, json_t *obj),
				void *arg);

/* Puts obj (a copy is taken) into the cache now, as a write's answer: the watch event that follows
 * changes nothing.  Lets a reader see its own write without waiting for the watch.  An answer older
 * than what the cache holds (its numeric resourceVersion is smaller: the watch already brought a
 * later write) is dropped, so a stale answer never hides a newer object until the next list. */
void egs_kube_reflector_put(struct egs_kube_reflector *r, json_t *obj);

/* How many lists (the first included) the reflector made: re-lists after 410 or an outage count. */
unsigned egs_kube_reflector_lists(struct egs_kube_reflector *r);

/* Asks the thread to stop and returns at once (it ends within a second; no more logs of failures). */
void egs_kube_reflector_stop(struct egs_kube_reflector *r);

/* Stops the thread, waits for it and frees the cache.  egs_kube_reflector_free(NULL) is a no-op. */
void egs_kube_reflector_free(struct egs_kube_reflector *r);

/* The cache key of a Kubernetes object: "namespace/name", or "name" without a namespace.  Writes into
 * key (keysz bytes); false when the object has no name or the key does not fit. */
bool egs_kube_object_key(json_t *obj, char *key, size_t keysz);

#endif
