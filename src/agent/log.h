/*
 * log.h: egs-agent's log: one line per event on stderr, "<RFC 3339 UTC time with ms> <level> <text>".
 *
 * Lines from different threads never interleave (each is written with one stdio call under the
 * stream's lock).  The level is process-wide and may be changed at any time.  Callers never pass
 * secrets (the agent token) to it.
 */
#ifndef EGS_AGENT_LOG_H
#define EGS_AGENT_LOG_H

#include "core/common.h"

enum egs_agent_log_level {
	EGS_ALOG_ERROR = 0,
	EGS_ALOG_WARN,
	EGS_ALOG_INFO,
	EGS_ALOG_DEBUG,
};

/* Sets the most verbose level that is written (default EGS_ALOG_INFO). */
void egs_agent_log_set_level(enum egs_agent_log_level level);

/* Parses "error", "warn", "info" or "debug" into *out; returns false for anything else. */
bool egs_agent_log_parse_level(const char *s, enum egs_agent_log_level *out);

/* Writes one line when level is enabled.  A trailing newline in fmt is not needed; text longer than
 * about 2 KiB is cut. */
void egs_agent_log(enum egs_agent_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define EGS_LOG_ERROR(...) egs_agent_log(EGS_ALOG_ERROR, __VA_ARGS__)
#define EGS_LOG_WARN(...) egs_agent_log(EGS_ALOG_WARN, __VA_ARGS__)
#define EGS_LOG_INFO(...) egs_agent_log(EGS_ALOG_INFO, __VA_ARGS__)
#define EGS_LOG_DEBUG(...) egs_agent_log(EGS_ALOG_DEBUG, __VA_ARGS__)

#endif
