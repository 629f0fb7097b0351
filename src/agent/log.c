/*
 * log.c: the agent's line logger (see log.h).  The timestamp is taken per line from the real clock:
 * the agent is I/O code, so it may read the clock (the core may not).
 */
#include "agent/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static atomic_int log_level = EGS_ALOG_INFO;

static const char *const level_names[] = {
	[EGS_ALOG_ERROR] = "error",
	[EGS_ALOG_WARN] = "warn",
	[EGS_ALOG_INFO] = "info",
	[EGS_ALOG_DEBUG] = "debug",
};

void egs_agent_log_set_level(enum egs_agent_log_level level)
{
	atomic_store(&log_level, (int)level);
}

bool egs_agent_log_parse_level(const char *s, enum egs_agent_log_level *out)
{
	for (size_t i = 0; i < EGS_ARRAY_LEN(level_names); i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum egs_agent_log_level)i;
			return true;
		}
	}
	return false;
}

void egs_agent_log(enum egs_agent_log_level level, const char *fmt, ...)
{
	char line[2048], stamp[32];
	struct timespec ts;
	struct tm tm;
	va_list ap;

	if ((int)level > atomic_load(&log_level))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s.%03ldZ %-5s %s\n", stamp, ts.tv_nsec / 1000000L, level_names[level], line);
}
