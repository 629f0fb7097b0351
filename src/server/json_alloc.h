/*
 * json_alloc.h: jansson's allocations on egsd's loop thread served from free lists (issue 16).
 *
 * A durable create builds its body as a jansson tree (~20 allocations: the object, its members'
 * pairs, each string twice) and frees it a turn later, together with the ~60 other requests of that
 * turn; glibc's per-thread cache holds 7 blocks of a size, so most of those went through malloc's
 * and free's slow paths (~200 instructions a pair).  After egs_json_alloc_install(), the thread that
 * installed it keeps up to EGS_JSON_ALLOC_KEEP freed blocks of each size class (16-byte steps up to
 * 264 bytes; larger blocks are malloc's alone) and hands them out again; any other thread (the
 * notifier, a follower's load, the old state's release) allocates and frees through malloc.  Every
 * block is a plain malloc block: free() takes what jansson returns (json_dumps's text), and a block
 * may be freed on another thread than the one that made it.
 *
 * Install before the process's first jansson call (jansson's json_set_alloc_funcs).  A kept block is
 * not freed as far as ASan can tell, so under ASan it is poisoned while kept: a use after free of a
 * jansson block on the loop thread is still reported, as a use of poisoned memory.
 */
#ifndef EGS_JSON_ALLOC_H
#define EGS_JSON_ALLOC_H

#include <stddef.h>

#define EGS_JSON_ALLOC_KEEP 1024 /* free blocks kept per size class: ~2 MiB at most, all classes full */

/* Routes jansson's allocations through the free lists, kept for the calling thread. */
void egs_json_alloc_install(void);

/* The calling thread's kept free blocks of the class that serves n bytes (0 when n is served by
 * malloc, or on a thread that did not install): for tests. */
size_t egs_json_alloc_kept(size_t n);

#endif
