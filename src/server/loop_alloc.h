/*
 * loop_alloc.h: small blocks of egsd's loop thread served from free lists (issue 16).
 *
 * A turn of the loop allocates and frees together what its ~60 requests need: a durable create's
 * body is a jansson tree (~20 allocations: the object, its members' pairs, each string twice), each
 * request one block (conn_reply.c), each answer an evbuffer and a 1 KiB chain for its head and its
 * body (libevent), all freed a turn later.  glibc's per-thread cache holds 7 blocks of a size, so
 * most of those went through malloc's and free's slow paths (~200 instructions a pair), and a block
 * of 1 KiB or more that misses it first consolidates every small free block of the heap
 * (malloc_consolidate: ~3% of the loop's CPU under bench/api/deep.sh's mixed load).  After
 * egs_loop_alloc_install(), the thread that installed it keeps freed blocks of each size class
 * (16-byte steps up to 1,032 bytes; larger blocks are malloc's alone), up to EGS_LOOP_ALLOC_KEEP
 * of a class and EGS_LOOP_ALLOC_CLASS_BYTES of a class's bytes, and hands them out again; any other
 * thread (the notifier, a follower's load, the old state's release) allocates and frees through
 * malloc.  Every block is a plain malloc block: free() takes what jansson or libevent returns
 * (json_dumps's text), and a block may be freed on another thread than the one that made it.
 *
 * Install before the process's first jansson or libevent call (json_set_alloc_funcs,
 * event_set_mem_functions).  A kept block is not freed as far as ASan can tell, so under ASan it is
 * poisoned while kept: a use after free of a block on the loop thread is still reported, as a use
 * of poisoned memory.
 */
#ifndef EGS_LOOP_ALLOC_H
#define EGS_LOOP_ALLOC_H

#include <stddef.h>

#define EGS_LOOP_ALLOC_KEEP 1024                /* free blocks kept per size class at most */
#define EGS_LOOP_ALLOC_CLASS_BYTES (256 << 10) /* and at most this many bytes of a class: ~8 MiB in all */

/* Routes jansson's and libevent's allocations through the free lists, kept for the calling thread. */
void egs_loop_alloc_install(void);

/* A block of n bytes (aborts when out of memory, as egs_malloc): from the calling thread's free
 * list of its class when it installed and one is kept, else malloc's.  Caller frees, with
 * egs_loop_free or free(). */
void *egs_loop_malloc(size_t n);

/* Frees p (NULL: nothing), a plain malloc block: kept for reuse when the calling thread installed,
 * its class has room and p is of a class; else free(). */
void egs_loop_free(void *p);

/* The calling thread's kept free blocks of the class that serves n bytes (0 when n is served by
 * malloc, or on a thread that did not install): for tests. */
size_t egs_loop_alloc_kept(size_t n);

#endif
