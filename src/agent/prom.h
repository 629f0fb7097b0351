/*
 * prom.h: a strict parser of the Prometheus text exposition format (version 0.0.4), the format
 * dcgm-exporter serves on /metrics.  Pure: text in, samples out through a callback, no I/O.
 *
 * What it accepts, line by line ('\n' ends a line; a '\r' before it is dropped):
 *   - empty lines and lines of only blanks;
 *   - "# HELP <name> <text>" (the text's escapes \\ and \n) and "# TYPE <name> <type>" with type one of
 *     counter, gauge, histogram, summary, untyped; a second TYPE for one name, or a TYPE after that
 *     name's samples, is an error; any other line starting with '#' is a comment;
 *   - samples: <name>[{<label>="<value>"[,...][,]}] <value> [<timestamp>], blanks (space or tab) between
 *     the parts; names [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*, one label name at
 *     most once per sample; label values with the escapes \\, \" and \n only; values a decimal float
 *     (no hex), NaN, +Inf, -Inf or Inf (any case); the timestamp an integer of milliseconds.
 * Anything else is an error naming the line, and the whole text is refused, as Prometheus refuses a
 * scrape: callers must not keep what the callback saw before an error.
 */
#ifndef EGS_AGENT_PROM_H
#define EGS_AGENT_PROM_H

#include "core/common.h"

#define EGS_PROM_LABELS_MAX 64      /* labels of one sample */
#define EGS_PROM_LINE_MAX 65536     /* bytes of one line */

struct egs_prom_label {
	const char *name;  /* borrowed: valid during the callback only */
	const char *value; /* unescaped */
};

/* One sample, valid during the callback only. */
struct egs_prom_sample {
	const char *name;
	const struct egs_prom_label *labels;
	size_t n_labels;
	double value;
	bool has_timestamp;
	int64_t timestamp_ms;
};

/* Called for each sample in order; return false to stop (egs_prom_parse() then returns EGS_OK). */
typedef bool (*egs_prom_fn)(void *arg, const struct egs_prom_sample *s);

/*
 * Parses the len bytes of text (need not be NUL-terminated; a NUL byte is an error) and calls fn(arg, s)
 * with every sample.  Returns EGS_OK, or EGS_ERR_INVALID with "line N: what is wrong" in err (errsz
 * bytes) at the first malformed line.
 */
enum egs_err egs_prom_parse(const char *text, size_t len, egs_prom_fn fn, void *arg, char *err, size_t errsz);

/* The value of label name in s, or NULL (borrowed). */
const char *egs_prom_label(const struct egs_prom_sample *s, const char *name);

#endif
