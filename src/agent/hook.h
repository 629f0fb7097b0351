/*
 * hook.h: runs an operator's hook command (--on-attach / --on-detach) the way backends need it:
 * `/bin/sh -c CMD` with extra environment variables, its output captured so that the last line can
 * be reported as the action's message, bounded in time and interruptible.
 *
 * The child runs in its own process group with default signal dispositions, an empty signal mask,
 * stdin from /dev/null and no file descriptors of the agent besides stdout and stderr (the pipe), so
 * that a hook never inherits the agent's sockets or state lock.  Safe to call from any thread.
 */
#ifndef EGS_AGENT_HOOK_H
#define EGS_AGENT_HOOK_H

#include "core/common.h"

/* Polled about ten times a second while a hook runs; true interrupts it. */
typedef bool (*egs_hook_stop_fn)(void *arg);

/*
 * Runs cmd with /bin/sh -c.  env (borrowed, may be NULL) is a NULL-terminated array of "NAME=value"
 * strings added to the agent's environment, replacing variables of the same name.  Waits until the
 * command exits, timeout_s seconds pass (0: no limit) or stop(stop_arg) returns true (stop may be
 * NULL); in the last two cases the whole process group gets SIGTERM, then SIGKILL 500 ms later.
 *
 * Returns EGS_OK when the command exited with status 0; msg (msgsz bytes) then holds its last
 * non-empty output line, or "".  Otherwise returns EGS_ERR_IO and msg says why: the last non-empty
 * output line when there was one and the command exited by itself, else "exited with status N",
 * "killed by signal N", "timed out after N s", "interrupted" or "cannot start /bin/sh: ...".
 * Output lines are cut at 511 bytes; control characters in them become spaces.
 */
enum egs_err egs_hook_run(const char *cmd, char *const *env, int timeout_s, egs_hook_stop_fn stop,
			  void *stop_arg, char *msg, size_t msgsz);

/* "NAME=value", one entry of egs_hook_run's env (caller frees). */
char *egs_hook_env(const char *name, const char *value);

#endif
