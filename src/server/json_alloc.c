/*
 * json_alloc.c: free lists for jansson's blocks on the loop thread (see json_alloc.h).
 *
 * Blocks are plain malloc blocks, so that free() stays right for what jansson hands out (egsd frees
 * json_dumps's text with free()).  A block's size class is read back from malloc_usable_size(): a
 * request of n bytes is served by class c = max(2, (n + 23) / 16), allocated as malloc(c * 16 - 8),
 * whose usable size is exactly c * 16 - 8 (glibc's chunks are 16-byte multiples carrying 8 bytes of
 * header; ASan reports the size asked for: the same number), so a freed block goes back to the class
 * it came from, and one of another origin to the class its usable size fills.  A kept block's first
 * bytes link it to the next kept block of its class; only the installing thread keeps any.
 */
#include "server/json_alloc.h"

#include <jansson.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>

/* Under ASan a kept block is poisoned past its link until it is handed out again, so a use after free
 * of a jansson block on the loop thread is still reported (as a use of poisoned memory) although the
 * block never reaches free().  The link stays readable: LeakSanitizer follows the lists through it
 * (a fully poisoned block is not scanned, and every kept block behind it would count as leaked). */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define KEPT_POISON(p, n) ASAN_POISON_MEMORY_REGION((char *)(p) + sizeof(struct kept), (n) - sizeof(struct kept))
#define KEPT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((char *)(p) + sizeof(struct kept), (n) - sizeof(struct kept))
#else
#define KEPT_POISON(p, n) ((void)(p), (void)(n))
#define KEPT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define MIN_CLASS 2  /* glibc's smallest block: 24 usable bytes */
#define MAX_CLASS 17 /* up to 17 * 16 - 8 = 264 bytes */

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

static void *j_malloc(size_t n)
{
	size_t cls = class_for(n);
	if (!cls)
		return malloc(n);
	if (owner && lists[cls]) {
		struct kept *k = lists[cls];
		KEPT_UNPOISON(k, cls * 16 - 8);
		lists[cls] = k->next;
		counts[cls]--;
		return k;
	}
	return malloc(cls * 16 - 8); /* NULL: jansson reports its own allocation failures */
}

static void j_free(void *p)
{
	if (!p)
		return;
	if (owner) {
		size_t cls = (malloc_usable_size(p) + 8) / 16;
		if (cls >= MIN_CLASS && cls <= MAX_CLASS && counts[cls] < EGS_JSON_ALLOC_KEEP) {
			struct kept *k = p;
			k->next = lists[cls];
			lists[cls] = k;
			counts[cls]++;
			KEPT_POISON(k, cls * 16 - 8);
			return;
		}
	}
	free(p);
}

void egs_json_alloc_install(void)
{
	owner = true;
	json_set_alloc_funcs(j_malloc, j_free);
}

size_t egs_json_alloc_kept(size_t n)
{
	size_t cls = class_for(n);
	return cls && owner ? counts[cls] : 0;
}
