/*
 * json_fast.h: a fast path for parsing request bodies into jansson trees.
 *
 * jansson's decoder reads a byte at a time through a stream with UTF-8 checks and a growable string
 * buffer: about 85 instructions per byte, 14,000 of a durable create's ~113,000 (issue 16).  Request
 * bodies are nearly always plain: ASCII strings without escapes, small integers, true/false/null.
 * egs_json_fast_object() parses exactly that subset straight into the same jansson tree and declines
 * everything else (escapes, non-ASCII bytes, control characters, reals, big or odd integers, duplicate
 * keys, deep nesting, any syntax error), so the caller can fall back to json_loadb() for the whole
 * body: every error message, and every tree of the harder inputs, still comes from jansson.
 *
 * The promise, checked by tests/unit/test_json_fast.c and differentially by fuzz/fuzz_json.c: when it
 * returns a tree, json_loadb(p, len, JSON_REJECT_DUPLICATES) accepts the same bytes and returns an
 * equal tree (json_equal) whose object keys iterate in the same order.
 */
#ifndef EGS_JSON_FAST_H
#define EGS_JSON_FAST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Parses p[0..len) when it is one JSON object of the fast subset, surrounded by JSON whitespace at
 * most.  Returns a new reference (caller json_decref()s it), or NULL when the text is outside the
 * subset or not valid JSON: the caller then parses it with jansson.  Never reads past p + len. */
json_t *egs_json_fast_object(const char *p, size_t len);

/* Whether the object keys of a and b (trees json_equal holds for) iterate in the same order at
 * every depth: the second half of the promise above, checked by the unit test and the fuzzer. */
bool egs_json_same_order(json_t *a, json_t *b);

#endif
