/*
 * test_state_lookup.c: egs_state_workspace's cache of the last workspace found (core/state.h
 * ws_last): a name finds its own workspace whatever was looked up before, a deleted workspace is
 * never returned again (not even before the turn frees it), and one added anew under the same name
 * is found in its place.  Run under ASan (make test), a cache left pointing at a freed workspace
 * fails here as a use after free.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/state.h"

static struct egs_workspace *add_ws(struct egs_state *st, const char *name)
{
	struct egs_workspace *w = egs_calloc(1, sizeof(*w));
	snprintf(w->name, sizeof(w->name), "%s", name);
	snprintf(w->project, sizeof(w->project), "default");
	assert_int_equal(egs_state_add_workspace(st, w), EGS_OK);
	return w;
}

static void test_last_found_is_checked_and_cleared(void **state)
{
	(void)state;
	struct egs_state st;
	egs_state_init(&st, NULL);
	struct egs_workspace *a = add_ws(&st, "alpha"), *b = add_ws(&st, "beta");
	assert_ptr_equal(egs_state_workspace(&st, "alpha"), a);
	assert_ptr_equal(egs_state_workspace(&st, "alpha"), a);
	assert_ptr_equal(egs_state_workspace(&st, "beta"), b);
	assert_ptr_equal(egs_state_workspace(&st, "alpha"), a);
	assert_null(egs_state_workspace(&st, "alph"));   /* a prefix of the cached name */
	assert_null(egs_state_workspace(&st, "alphaa")); /* and a longer one */
	assert_ptr_equal(egs_state_workspace(&st, "alpha"), a);
	/* Deleted while it is the cached one: gone at once, and after the turn frees it. */
	egs_state_del(&st, EGS_KIND_WORKSPACE, a);
	assert_null(egs_state_workspace(&st, "alpha"));
	egs_state_clear_changes(&st);
	assert_null(egs_state_workspace(&st, "alpha"));
	assert_ptr_equal(egs_state_workspace(&st, "beta"), b);
	/* Added anew under the same name: the new one. */
	struct egs_workspace *a2 = add_ws(&st, "alpha");
	assert_ptr_equal(egs_state_workspace(&st, "alpha"), a2);
	/* Deleting another workspace leaves the cached one found. */
	egs_state_del(&st, EGS_KIND_WORKSPACE, b);
	egs_state_clear_changes(&st);
	assert_ptr_equal(egs_state_workspace(&st, "alpha"), a2);
	assert_null(egs_state_workspace(&st, "beta"));
	egs_state_cleanup(&st);
	assert_null(st.ws_last);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_last_found_is_checked_and_cleared),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
