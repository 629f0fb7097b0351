/*
 * loop_alloc.c: free lists for the loop thread's small blocks (see loop_alloc.h).
 *
 * Blocks are plain malloc blocks, so that free() stays right for what jansson and libevent hand out
 * (egsd frees json_dumps's text with free()).  A block's size class is read back from
 * malloc_usable_size(): a request of n bytes is served by class c = max(2, (n + 23) / 16), allocated
 * as malloc(c * 16 - 8), whose usable size is exactly c * 16 - 8 (glibc's chunks are 16-byte
 * multiples carrying 8 bytes of header; ASan reports the size asked for: the same number), so a freed
 * block goes back to the class it came from, and one of another origin to the class its usable size
 * fills.  A kept block's first bytes link it to the next kept block of its class; only the installing
 * thread keeps any.
 */
#include "server/loop_alloc.h"

#include "core/common.h"

#include <event2/event.h>
#include <jansson.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>

/* Under ASan a kept block is poisoned past its link until it is handed out again, so a use after free
 * of a block on the loop thread is still reported (as a use of poisoned memory) although the block
 * never reaches free().  The link stays readable: LeakSanitizer follows the lists through it (a fully
 * poisoned block is not scanned, and every kept block behind it would count as leaked). */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define KEPT_POISON(p, n) ASAN_POISON_MEMORY_REGION((char *)(p) + sizeof(struct kept), (n) - sizeof(struct kept))
#define KEPT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((char *)(p) + sizeof(struct kept), (n) - sizeof(struct kept))
#else
#define KEPT_POISON(p, n) ((void)(p), (void)(n))
#define KEPT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define MIN_CLASS 2  /* glibc's smallest block: 24 usable bytes */
#define MAX_CLASS 65 /* up to 65 * 16 - 8 = 1,032 bytes: libevent's 1 KiB chains */

struct kept {
	struct kept *next;
};

static _Thread_local bool owner; /* this thread installed: it keeps freed blocks */
static _Thread_local struct kept *lists[MAX_CLASS + 1];
static _Thread_local size_t counts[MAX_CLASS + 1];

/* The class that serves n bytes, 0 when none does (malloc alone). */
static size_t class_for(size_t n)
{
	size_t cls = (n + 23) / 16;
	return cls < MIN_CLASS ? MIN_CLASS : cls <= MAX_CLASS ? cls : 0;
}

static size_t class_bytes(size_t cls)
{
	return cls * 16 - 8;
}

/* How many free blocks class cls keeps at most. */
static size_t class_keep(size_t cls)
{
	size_t by_bytes = EGS_LOOP_ALLOC_CLASS_BYTES / class_bytes(cls);
	return by_bytes < EGS_LOOP_ALLOC_KEEP ? by_bytes : EGS_LOOP_ALLOC_KEEP;
}

/* A block of n bytes, NULL when out of memory (jansson and libevent report their own failures). */
static void *try_malloc(size_t n)
{
	size_t cls = class_for(n);
	if (!cls)
		return malloc(n);
	if (owner && lists[cls]) {
		struct kept *k = lists[cls];
		KEPT_UNPOISON(k, class_bytes(cls));
		lists[cls] = k->next;
		counts[cls]--;
		return k;
	}
	return malloc(class_bytes(cls));
}

void egs_loop_free(void *p)
{
	if (!p)
		return;
	if (owner) {
		size_t cls = (malloc_usable_size(p) + 8) / 16;
		if (cls >= MIN_CLASS && cls <= MAX_CLASS && counts[cls] < class_keep(cls)) {
			struct kept *k = p;
			k->next = lists[cls];
			lists[cls] = k;
			counts[cls]++;
			KEPT_POISON(k, class_bytes(cls));
			return;
		}
	}
	free(p);
}

void *egs_loop_malloc(size_t n)
{
	void *p = try_malloc(n ? n : 1);
	return p ? p : egs_malloc(n); /* egs_malloc aborts as every allocation of egsd does */
}

/* libevent's realloc: a plain realloc (the block stays a malloc block of another class, or none). */
static void *ev_realloc(void *p, size_t n)
{
	return realloc(p, n);
}

void egs_loop_alloc_install(void)
{
	owner = true;
	json_set_alloc_funcs(try_malloc, egs_loop_free);
	event_set_mem_functions(try_malloc, ev_realloc, egs_loop_free);
}

size_t egs_loop_alloc_kept(size_t n)
{
	size_t cls = class_for(n);
	return cls && owner ? counts[cls] : 0;
}
