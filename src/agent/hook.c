/*
 * hook.c: runs hook commands with posix_spawn (see hook.h).  posix_spawn rather than fork: the agent
 * is multi-threaded, and a forked child of a threaded process may only call async-signal-safe
 * functions, which posix_spawn guarantees by construction.
 */
#include "agent/hook.h"

#include "agent/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define LINE_MAX_BYTES 512
#define KILL_GRACE_MS 500

/* The last non-empty line of a stream, fed in chunks. */
struct lines {
	char cur[LINE_MAX_BYTES];
	size_t cur_len;
	char last[LINE_MAX_BYTES];
};

static void lines_commit(struct lines *l)
{
	size_t n = l->cur_len, start = 0;

	while (n > 0 && (l->cur[n - 1] == ' ' || l->cur[n - 1] == '\t' || l->cur[n - 1] == '\r'))
		n--;
	while (start < n && (l->cur[start] == ' ' || l->cur[start] == '\t'))
		start++;
	if (start < n) {
		for (size_t i = start; i < n; i++)
			if ((unsigned char)l->cur[i] < ' ' || l->cur[i] == 0x7f)
				l->cur[i] = ' ';
		memcpy(l->last, l->cur + start, n - start);
		l->last[n - start] = '\0';
	}
	l->cur_len = 0;
}

static void lines_feed(struct lines *l, const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (buf[i] == '\n')
			lines_commit(l);
		else if (l->cur_len < sizeof(l->cur) - 1)
			l->cur[l->cur_len++] = buf[i];
	}
}

static void nap_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Does the "NAME=value" entry e set one of the variables of env? */
static bool overridden(const char *e, char *const *env)
{
	const char *eq = strchr(e, '=');
	size_t n = eq ? (size_t)(eq - e) + 1 : strlen(e);

	for (; env && *env; env++)
		if (strncmp(e, *env, n) == 0)
			return true;
	return false;
}

/* Returns a new NULL-terminated environment (the array is owned, its strings borrowed). */
static char **make_envp(char *const *env)
{
	size_t n = 0, m = 0, k = 0;
	char **envp;

	for (char **e = environ; e && *e; e++)
		n++;
	for (char *const *e = env; e && *e; e++)
		m++;
	envp = egs_calloc(n + m + 1, sizeof(*envp));
	for (char **e = environ; e && *e; e++)
		if (!overridden(*e, env))
			envp[k++] = *e;
	for (size_t i = 0; i < m; i++)
		envp[k++] = env[i];
	envp[k] = NULL;
	return envp;
}

/* Ends the hook: SIGTERM to its whole process group, SIGKILL after a grace period.  Returns the
 * wait status. */
static int kill_and_reap(pid_t pid)
{
	int status = 0;

	kill(-pid, SIGTERM);
	for (int waited = 0; waited < KILL_GRACE_MS; waited += 20) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			goto out;
		nap_ms(20);
	}
	kill(-pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
out:
	kill(-pid, SIGKILL); /* leftovers of the group, if any; harmless when none */
	return status;
}

/* Reads what is there; returns false at end of file or on a read error. */
static bool read_some(int fd, struct lines *l)
{
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n > 0)
		lines_feed(l, buf, (size_t)n);
	return n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN));
}

/* After the exit: takes the output still buffered in the pipe, without waiting for writers left
 * behind (a backgrounded grandchild may hold the pipe open). */
static void drain(int fd, struct lines *l)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	for (int i = 0; i < 64; i++) {
		char buf[4096];
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		lines_feed(l, buf, (size_t)n);
	}
}

static enum egs_err spawn(const char *cmd, char **envp, int out_fd, int close_fd, pid_t *pid, char *msg,
			  size_t msgsz)
{
	char *argv[] = {"sh", "-c", (char *)cmd, NULL};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dfl;
	int rc;

	sigemptyset(&none);
	sigemptyset(&dfl);
	for (int s = 1; s < 32; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaddset(&dfl, s);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#else
	posix_spawn_file_actions_addclose(&fa, close_fd);
#endif
	(void)close_fd;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	rc = posix_spawn(pid, "/bin/sh", &fa, &attr, argv, envp);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		snprintf(msg, msgsz, "cannot start /bin/sh: %s", strerror(rc));
		return EGS_ERR_IO;
	}
	return EGS_OK;
}

enum outcome { EXITED, TIMED_OUT, STOPPED };

/*
 * Reads the hook's output from fd while waiting for its exit, because a hook that backgrounds work
 * may exit before its output pipe closes, or close the pipe long before it exits.  Kills it on the
 * deadline or on stop.  Stores the wait status in *status.
 */
static enum outcome supervise(pid_t pid, int fd, int64_t deadline, egs_hook_stop_fn stop, void *stop_arg,
			      struct lines *out, int *status)
{
	bool eof = false;

	for (;;) {
		if (egs_clock_ms() >= deadline) {
			*status = kill_and_reap(pid);
			return TIMED_OUT;
		}
		if (stop && stop(stop_arg)) {
			*status = kill_and_reap(pid);
			return STOPPED;
		}
		if (!eof) {
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			if (poll(&pfd, 1, 100) > 0)
				eof = !read_some(fd, out);
		}
		if (waitpid(pid, status, WNOHANG) == pid)
			break;
		if (eof)
			nap_ms(20);
	}
	if (!eof)
		drain(fd, out);
	lines_commit(out);
	return EXITED;
}

enum egs_err egs_hook_run(const char *cmd, char *const *env, int timeout_s, egs_hook_stop_fn stop,
			  void *stop_arg, char *msg, size_t msgsz)
{
	enum egs_err err = EGS_ERR_IO;
	struct lines out = {0};
	char **envp = make_envp(env);
	int64_t deadline = timeout_s > 0 ? egs_clock_ms() + (int64_t)timeout_s * 1000 : INT64_MAX;
	int fds[2] = {-1, -1}, status = 0;
	pid_t pid = -1;

	msg[0] = '\0';
	if (pipe2(fds, O_CLOEXEC) != 0) {
		snprintf(msg, msgsz, "cannot start /bin/sh: pipe: %s", strerror(errno));
		goto out;
	}
	if (spawn(cmd, envp, fds[1], fds[0], &pid, msg, msgsz) != EGS_OK)
		goto out;
	close(fds[1]);
	fds[1] = -1;

	switch (supervise(pid, fds[0], deadline, stop, stop_arg, &out, &status)) {
	case TIMED_OUT:
		snprintf(msg, msgsz, "timed out after %d s", timeout_s);
		break;
	case STOPPED:
		snprintf(msg, msgsz, "interrupted");
		break;
	case EXITED:
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			err = EGS_OK;
		if (out.last[0])
			egs_strlcpy(msg, out.last, msgsz);
		else if (err != EGS_OK && WIFEXITED(status))
			snprintf(msg, msgsz, "exited with status %d", WEXITSTATUS(status));
		else if (err != EGS_OK)
			snprintf(msg, msgsz, "killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		break;
	}
out:
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	egs_free(envp);
	return err;
}

char *egs_hook_env(const char *name, const char *value)
{
	size_t n = strlen(name) + strlen(value) + 2;
	char *s = egs_malloc(n);
	snprintf(s, n, "%s=%s", name, value);
	return s;
}
