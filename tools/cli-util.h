/* cli-util.h -- strict argument parsing and small helpers shared by the subcommands. */
#ifndef LOOM_TOOLS_CLI_UTIL_H
#define LOOM_TOOLS_CLI_UTIL_H

#include "loom.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parse the whole string as a number in [lo, hi]; on failure print one line
 * "loom CMD: invalid value 'ARG' for OPTION" to stderr and return false. */
bool cli_parse_int(const char * cmd, const char * opt, const char * arg, long long lo, long long hi, long long * out);
bool cli_parse_u64(const char * cmd, const char * opt, const char * arg, uint64_t * out);
bool cli_parse_float(const char * cmd, const char * opt, const char * arg, double lo, double hi, double * out);
/* Parses a comma list of integers (e.g. "128,512") into 'out' (at most 'max'); returns the count or -1 (reported). */
int cli_parse_int_list(const char * cmd, const char * opt, const char * arg, long long lo, long long hi, long long * out, int max);
/* Reads a whole file into a NUL-terminated heap buffer; NULL (reported) on failure. */
char * cli_read_file(const char * cmd, const char * path, size_t * len);
/* The last error the library logged (kept so a command can print it as its one error line),
 * or 'fallback' when none was logged. */
const char * cli_last_error(const char * fallback);
/* Routes library logs to stderr from 'min_level' up (LOOM_LOG_WARN for quiet commands). Errors
 * are never printed by the library: they are kept for cli_last_error, and the command prints its
 * one error line. */
void cli_log_setup(enum loom_log_level min_level);

#endif
