/*
 * test_map_threads.c: the map's hash key when the process's first maps are used on several threads at
 * once, as the agent's reflectors fill their caches each on a thread of its own.  The key was drawn at
 * the first hash without a lock: two threads could each draw one, and a key put under the first was
 * not found under the second (the agent's node cache "lacked" a node it held: test_gpr_cr's "node
 * gpu-1 left the cluster").  Each round is a fresh process (fork) whose threads make their first map
 * use together; before the fix 3-25% of rounds lost a key on a 2-core VM.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/map.h"

#define THREADS 4
#define ROUNDS 200

static pthread_barrier_t start;
static int lost;

static void *first_use(void *arg)
{
	static const char *const keys[THREADS] = {"gpu-1", "ws-dev", "kube-system/dcgm-0", "plain"};
	const char *key = keys[(uintptr_t)arg % THREADS];
	struct egs_map m;

	egs_map_init(&m);
	pthread_barrier_wait(&start);
	egs_map_put(&m, key, arg);
	for (volatile int i = 0; i < 100000; i++) /* let the other threads draw (or read) the key */
		;
	if (egs_map_get(&m, key) != arg)
		__atomic_add_fetch(&lost, 1, __ATOMIC_RELAXED);
	egs_map_cleanup(&m);
	return NULL;
}

/* One round in a fresh process: exits 0 when every thread found its key again. */
static int round_in_child(void)
{
	pthread_t t[THREADS];

	pthread_barrier_init(&start, NULL, THREADS);
	for (uintptr_t i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, first_use, (void *)(i + 1)) != 0)
			return 2;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	return lost ? 1 : 0;
}

static void test_first_use_on_several_threads_keeps_every_key(void **state)
{
	int failed = 0;
	(void)state;
	for (int r = 0; r < ROUNDS; r++) {
		pid_t pid = fork();
		int st = 0;
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(round_in_child());
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st));
		assert_int_not_equal(WEXITSTATUS(st), 2);
		failed += WEXITSTATUS(st) != 0;
	}
	if (failed)
		fprintf(stderr, "a key was lost in %d of %d rounds\n", failed, ROUNDS);
	assert_int_equal(failed, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_use_on_several_threads_keeps_every_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
