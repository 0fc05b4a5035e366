/* cmd-tokenize.c -- `loom tokenize`: print the token ids and pieces of a text. */
#include "cli-util.h"
#include "commands.h"
#include "gen-controls.h"
#include "loom-llama.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE * f) {
    fprintf(f,
            "usage: loom tokenize -m MODEL.gguf (-p TEXT | -f FILE | --stdin) [--no-bos] [--parse-special | --no-parse-special]\n"
            "                     [--no-escape] [--ids]\n"
            "  prints one line per token: id and piece (or only the ids as a list with --ids); control\n"
            "  characters and backslashes in a piece are written as C escapes (\\n, \\t, \\x01, \\\\)\n"
            "  -f FILE: the whole file, its last newline included (-f - or --stdin: standard input)\n"
            "  escapes in the text (\\n, \\t, \\xHH, ...) are the bytes they stand for, as in loom run;\n"
            "  --no-escape takes them as written\n"
            "  --parse-special: control tokens written in the text (<|eot_id|>, </s>) become their ids;\n"
            "  --no-parse-special (the default): they are text (user-defined pieces are matched either way)\n"
            "  --no-bos: neither BOS nor, where the vocabulary adds one, EOS\n");
}

int loom_cmd_tokenize(int argc, char ** argv) {
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"prompt", required_argument, 0, 'p'},
        {"file", required_argument, 0, 'f'}, {"no-bos", no_argument, 0, 'B'},
        {"parse-special", no_argument, 0, 'S'}, {"no-parse-special", no_argument, 0, 'N'},
        {"ids", no_argument, 0, 'I'}, {"no-escape", no_argument, 0, 'E'}, {"stdin", no_argument, 0, 'i'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    const char *model = NULL, *text = NULL, *file = NULL;
    bool no_bos = false, special = false, ids_only = false, escape = true, use_stdin = false;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = cli_getopt(argc, argv, ":m:p:f:h", opts)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'p': text = optarg; break;
        case 'f': file = optarg; break;
        case 'B': no_bos = true; break;
        case 'S': special = true; break;
        case 'N': special = false; break;
        case 'I': ids_only = true; break;
        case 'E': escape = false; break;
        case 'i': use_stdin = true; break;
        case 'h': usage(stdout); return cli_stdout_ok("tokenize") ? 0 : 1;
        default: cli_option_error("tokenize", c); return 1; /* ':' or '?' */
        }
    }
    if (!cli_no_more_args("tokenize", argc, argv)) return 1;
    const int n_sources = (text != NULL) + (file != NULL) + use_stdin;
    if (use_stdin) file = "-";
    if (!model || n_sources != 1) {
        fprintf(stderr, "loom tokenize: need -m MODEL and one of -p TEXT, -f FILE or --stdin (see -h)\n");
        return 1;
    }
    cli_log_setup(LOOM_LOG_WARN);
    char * buf = NULL;
    size_t len = text ? strlen(text) : 0;
    if (file) buf = cli_read_input("tokenize", file, &len);
    else buf = strdup(text);
    if (!buf) {
        if (!file) fprintf(stderr, "loom tokenize: out of memory\n");
        return 1;
    }
    if (escape) len = process_escapes(buf, len); /* as run's -e: \n, \t, \xHH, ... */
    text = buf;
    struct loom_vocab * vocab = NULL;
    if (loom_vocab_load_gguf(model, &vocab) != LOOM_OK) {
        fprintf(stderr, "loom tokenize: %s\n", cli_last_error("cannot read the vocabulary"));
        free(buf);
        return 1;
    }
    bool add_bos = !no_bos && loom_vocab_get_add_bos(vocab);
    int32_t n = loom_tokenize(vocab, text, len, add_bos, special, NULL, 0);
    if (n < 0) n = -n;
    int32_t * toks = malloc(((size_t)n + 1) * sizeof *toks);
    int rc = 0;
    if (!toks || (n = loom_tokenize(vocab, text, len, add_bos, special, toks, n + 1)) < 0) {
        const char * why = cli_last_error("cannot tokenize the text");
        if (!strncmp(why, "tokenize: ", 10)) why += 10; /* the library's own prefix: said once, by this line */
        fprintf(stderr, "loom tokenize: %s\n", why);
        rc = 1;
    } else if (ids_only) {
        putchar('[');
        for (int32_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", toks[i]);
        puts("]");
    } else {
        for (int32_t i = 0; i < n; i++) {
            char piece[512];
            int32_t pn = loom_token_to_piece(vocab, toks[i], piece, sizeof piece, true);
            printf("%6d -> '", toks[i]);
            cli_print_piece(stdout, piece, pn > 0 ? pn : 0);
            puts("'");
        }
    }
    if (rc == 0 && !cli_stdout_ok("tokenize")) rc = 1;
    free(toks);
    free(buf);
    loom_vocab_free(vocab);
    return rc;
}
