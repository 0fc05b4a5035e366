/* cli-util.h -- strict argument parsing and small helpers shared by the subcommands. */
#ifndef LOOM_TOOLS_CLI_UTIL_H
#define LOOM_TOOLS_CLI_UTIL_H

#include "loom.h"

#include <stdbool.h>
#include <stddef.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

/* Parse the whole string as a number in [lo, hi] ([0, hi] for cli_parse_u64); on failure print one
 * line "loom CMD: invalid value 'ARG' for OPTION" to stderr and return false. */
bool cli_parse_int(const char * cmd, const char * opt, const char * arg, long long lo, long long hi, long long * out);
bool cli_parse_u64(const char * cmd, const char * opt, const char * arg, uint64_t hi, uint64_t * out);
bool cli_parse_float(const char * cmd, const char * opt, const char * arg, double lo, double hi, double * out);
/* Calls item(ctx, i, s) for the items s of the comma list 'arg' in order (i = 0, 1, ...; at most
 * 'max' items, none empty or of 64 bytes or more). Returns the count, or -1 after one line on
 * stderr: "loom CMD: OPT takes at most MAX values, got more in 'ARG'", "loom CMD: invalid list
 * 'ARG' for OPT", or the message of an item that item() refused (it prints one, returns false). */
typedef bool (*cli_list_item)(void * ctx, int i, const char * s);
int cli_parse_list(const char * cmd, const char * opt, const char * arg, int max, cli_list_item item, void * ctx);
/* Parses a comma list of integers (e.g. "128,512") into 'out' (at most 'max'); returns the count or -1 (reported). */
int cli_parse_int_list(const char * cmd, const char * opt, const char * arg, long long lo, long long hi, long long * out, int max);
/* "s" for a count 'n' other than 1, else "": the plural of the noun after it ("%d token%s"). */
static inline const char * cli_plural(long long n) { return n == 1 ? "" : "s"; }
/* -ngl values besides a layer count. */
#define CLI_NGL_UNSET (-2) /* no -ngl given */
#define CLI_NGL_AUTO (-1)  /* -ngl auto: as many layers as the device's free memory holds */
/* Parses -ngl's value: a layer count in [0, 100000] or "auto" (CLI_NGL_AUTO); cli_parse_ngl_list a
 * comma list of them (bench). On failure prints "loom CMD: invalid value ..." and returns false / -1. */
bool cli_parse_ngl(const char * cmd, const char * arg, long long * out);
int cli_parse_ngl_list(const char * cmd, const char * arg, long long * out, int max);
/* The line a subcommand's help ends with: how cli_getopt takes a long option's value. */
#define CLI_LONG_OPTION_HELP "Long options are spelled out in full and take their value as '--opt value' or '--opt=value'.\n"
/* getopt_long_only with three differences: long options must be spelled out in full (an
 * abbreviation returns '?', like an unknown option); an element of more than one letter after a
 * single dash ("-ngl", "-fa") is a long option named exactly so or an unknown option (returns
 * '?'), never a cluster of one-letter options ("-fa" is not "-f a"); and parsing stops at the first
 * argument that is not an option (the caller reports it as unexpected). The field's multi-letter
 * short spellings are thus added to a command by adding them to its 'longopts'. An option with an
 * optional_argument takes its value as "--opt=value" or as the next element, "-fa on", unless that
 * element is an option (begins with '-' and is not a negative number): "-fa -p hi" and a last "-fa"
 * leave 'optarg' NULL. */
int cli_getopt(int argc, char ** argv, const char * shortopts, const struct option * longopts);
/* The command-line element of the option cli_getopt returned last (for error messages). */
const char * cli_option_text(void);
/* Prints the one-line error for the option cli_getopt refused last: its result 'c' is ':' (a value
 * missing) or '?' (a value given to an option that takes none -- "--no-mmap=1" -- or an unknown or
 * abbreviated option). */
void cli_option_error(const char * cmd, int c);
/* Flushes stdout, remembering why the first failed flush failed (for cli_stdout_ok's message). */
void cli_flush(void);
/* Flushes stdout; when a write to it failed, now or at an earlier cli_flush (a full disk, a closed
 * pipe), prints "loom CMD: cannot write the output: REASON" and returns false. */
bool cli_stdout_ok(const char * cmd);
/* 'n' threads (n <= 0, no -t: the default, LOOM_N_THREADS where set, else every CPU), or the
 * number of CPUs this process may run on when that is larger (with a warning naming 'cmd' and
 * -t or LOOM_N_THREADS): more threads than CPUs only wait for each other at every node. */
long long cli_cap_threads(const char * cmd, long long n);
/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 when it is not valid UTF-8
 * (overlong forms, surrogates and code points above U+10FFFF are invalid): loom_utf8_check. */
size_t cli_utf8_len(const unsigned char * s, size_t n);
/* A token's piece ('n' bytes) on one line of 'f': control characters (C0, DEL and the C1 range
 * U+0080..U+009F) and the backslash as C escapes (\n, \t, \r, \x01, \\), bytes that are not valid
 * UTF-8 as \xNN, so that a newline or a terminal control piece cannot break a line-per-token
 * layout; other UTF-8 as it is (tokenize, run --verbose-prompt). */
void cli_print_piece(FILE * f, const char * p, int32_t n);
/* The registry's device names, comma-separated (for error messages). */
const char * cli_device_list(void);
/* After option parsing: true when no argument is left; else prints "unexpected argument". */
bool cli_no_more_args(const char * cmd, int argc, char ** argv);
/* Reads a whole file into a NUL-terminated heap buffer; NULL (reported) on failure. */
char * cli_read_file(const char * cmd, const char * path, size_t * len);
/* cli_read_file, or standard input (to its end) when 'path' is "-". NULL (reported) on failure. */
char * cli_read_input(const char * cmd, const char * path, size_t * len);
/* Reads a prompt or text file as the field's -f does: "-" is standard input, and one trailing
 * newline is dropped. NULL (reported) on failure. */
char * cli_read_prompt_file(const char * cmd, const char * path, size_t * len);
/* The warning, on stderr, when a context of 'n_ctx' tokens (per sequence) exceeds the model's
 * training context 'n_ctx_train' (nothing otherwise): positions past it may lose coherence. */
void cli_warn_ctx_train(int32_t n_ctx, int32_t n_ctx_train);
/* The same, the line prefixed "loom CMD: " (for the commands that prefix every line, as serve does). */
void cli_warn_ctx_train_as(const char * cmd, int32_t n_ctx, int32_t n_ctx_train);
/* The last error the library logged (kept so a command can print it as its one error line),
 * or 'fallback' when none was logged. */
const char * cli_last_error(const char * fallback);
/* Makes the last error (or 'fallback', when none was logged) begin with "PATH: " unless it names
 * 'path' already: a model the library refused is then named in the command's one error line. */
void cli_name_last_error(const char * path, const char * fallback);
/* Adds " (HINT)" to the last error when 'st' is LOOM_ERR_OOM (a KV cache too large: the library
 * names no flag, the command names its own, e.g. "use a smaller -c"). */
void cli_hint_last_error(enum loom_status st, const char * hint);
/* Routes library logs to stderr from 'min_level' up (LOOM_LOG_WARN for quiet commands). Errors
 * are never printed by the library: they are kept for cli_last_error, and the command prints its
 * one error line. */
void cli_log_setup(enum loom_log_level min_level);
/* Holds the library's info lines (loading details) from now on instead of printing them, so that
 * an error before the command is under way stays its one line; cli_log_release(true) prints them
 * (in order) and stops holding, cli_log_release(false) drops them. Nothing is held when debug lines
 * are printed too (-v). Warnings are printed as they come. */
void cli_log_hold(void);
void cli_log_release(bool print);

#endif
