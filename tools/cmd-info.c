/* cmd-info.c -- `loom info`: prints a GGUF file's header, metadata and tensor table (text or JSON). */
#include "cli-util.h"
#include "commands.h"
#include "loom-gguf.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ABBREV_N 6       /* array elements shown without --all */
#define ABBREV_BYTES 256 /* bytes of a string value shown without --all (a chat template may be 200 KB) */

struct info_opts {
    bool json;
    bool all;
    const char * path;
};

static void usage(FILE * f) {
    fprintf(f,
            "usage: loom info [--json] [--all] FILE.gguf   (or -m FILE.gguf)\n"
            "\n"
            "Prints a GGUF file's version, counts, alignment, data offset, metadata and tensor table.\n"
            "\n"
            "options:\n"
            "  --json    machine-readable output (one JSON object)\n"
            "  --all     print every element of array values and whole strings (default: the first %d elements\n"
            "            and the count, the first %d bytes of a string and how many were left out)\n"
            "  -m FILE   the file (as in the other commands; the same as giving FILE)\n"
            "  -h        this help\n"
            CLI_LONG_OPTION_HELP,
            ABBREV_N, ABBREV_BYTES);
}

/* ---------------------------------------------------------------- string escaping */

/* Prints (s, n) between double quotes. JSON mode follows RFC 8259 (control characters as \uXXXX,
 * bytes that are not valid UTF-8 as U+FFFD); text mode shows such bytes as \xNN. Valid UTF-8
 * passes through in both. */
static void put_quoted(FILE * f, const char * s, size_t n, bool json) {
    const unsigned char * p = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        const char * esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default: break;
        }
        if (esc) {
            fputs(esc, f);
            i++;
            continue;
        }
        if (c < 0x20 || c == 0x7f) {
            fprintf(f, json ? "\\u%04x" : "\\x%02x", c);
            i++;
            continue;
        }
        size_t len = cli_utf8_len(p + i, n - i);
        if (len == 0) {
            if (json) fputs("\\ufffd", f);
            else fprintf(f, "\\x%02x", c);
            i++;
            continue;
        }
        fwrite(p + i, 1, len, f);
        i += len;
    }
    fputc('"', f);
}

/* Prints a key or tensor name left-aligned in 'width' columns: bare when it is plain printable
 * ASCII, quoted and escaped otherwise (names come from the file and may hold anything). */
static void put_name(FILE * f, const char * s, int width) {
    size_t n = strlen(s);
    bool plain = n > 0;
    for (size_t i = 0; i < n && plain; i++) {
        unsigned char c = (unsigned char)s[i];
        plain = c > 0x20 && c < 0x7f && c != '"' && c != '\\';
    }
    if (plain) {
        fprintf(f, "%-*s", width, s);
        return;
    }
    char * buf = NULL;
    size_t len = 0;
    FILE * m = open_memstream(&buf, &len);
    if (!m) {
        put_quoted(f, s, n, false);
        return;
    }
    put_quoted(m, s, n, false);
    fclose(m);
    fprintf(f, "%s%*s", buf, len < (size_t)width ? width - (int)len : 0, "");
    free(buf);
}

/* ---------------------------------------------------------------- values */

static void put_f64(FILE * f, double v, bool json, int digits) {
    if (json && !isfinite(v)) {
        fputs("null", f); /* JSON has no NaN or infinity */
    } else {
        fprintf(f, "%.*g", digits, v);
    }
}

/* Prints element 'j' of a fixed-size value array 'data' of 'type'. */
static void put_scalar(FILE * f, enum loom_gguf_type type, const void * data, uint64_t j, bool json) {
    const unsigned char * p = (const unsigned char *)data + j * loom_gguf_type_size(type);
    union {
        uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
        uint64_t u64; int64_t i64; float f32; double f64;
    } v;
    memcpy(&v, p, loom_gguf_type_size(type));
    switch (type) {
    case LOOM_GGUF_TYPE_UINT8: fprintf(f, "%u", v.u8); break;
    case LOOM_GGUF_TYPE_INT8: fprintf(f, "%d", v.i8); break;
    case LOOM_GGUF_TYPE_UINT16: fprintf(f, "%u", v.u16); break;
    case LOOM_GGUF_TYPE_INT16: fprintf(f, "%d", v.i16); break;
    case LOOM_GGUF_TYPE_UINT32: fprintf(f, "%u", v.u32); break;
    case LOOM_GGUF_TYPE_INT32: fprintf(f, "%d", v.i32); break;
    case LOOM_GGUF_TYPE_UINT64: fprintf(f, "%llu", (unsigned long long)v.u64); break;
    case LOOM_GGUF_TYPE_INT64: fprintf(f, "%lld", (long long)v.i64); break;
    case LOOM_GGUF_TYPE_FLOAT32: put_f64(f, v.f32, json, 9); break;
    case LOOM_GGUF_TYPE_FLOAT64: put_f64(f, v.f64, json, 17); break;
    case LOOM_GGUF_TYPE_BOOL: fputs(v.u8 ? "true" : "false", f); break;
    default: fputs("?", f); break;
    }
}

/* The bytes of a string value of 'len' bytes shown: all with --all or when short, else the first
 * ABBREV_BYTES less any bytes of a character cut at the end. */
static size_t string_shown(const char * s, size_t len, const struct info_opts * o) {
    if (o->all || len <= ABBREV_BYTES) return len;
    size_t n = ABBREV_BYTES;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* s[n] continues a character: cut before it */
    return n;
}

/* Prints key i's value: a scalar, a string, or an array (abbreviated unless 'all'). */
static void put_value(FILE * f, const struct loom_gguf * g, int64_t i, const struct info_opts * o) {
    enum loom_gguf_type type = loom_gguf_kv_type(g, i);
    if (type == LOOM_GGUF_TYPE_STRING) {
        size_t len;
        const char * s = loom_gguf_kv_str(g, i, &len);
        const size_t shown = string_shown(s, len, o);
        put_quoted(f, s, shown, o->json);
        if (shown < len && !o->json) fprintf(f, " ... (%zu more bytes, %zu in all)", len - shown, len);
        return;
    }
    if (type != LOOM_GGUF_TYPE_ARRAY) {
        put_scalar(f, type, loom_gguf_kv_data(g, i), 0, o->json);
        return;
    }
    enum loom_gguf_type et = loom_gguf_kv_arr_type(g, i);
    uint64_t n = loom_gguf_kv_arr_n(g, i);
    uint64_t shown = o->all || n <= ABBREV_N ? n : ABBREV_N;
    fputc('[', f);
    for (uint64_t j = 0; j < shown; j++) {
        if (j) fputs(", ", f);
        if (et == LOOM_GGUF_TYPE_STRING) {
            size_t len;
            const char * s = loom_gguf_kv_arr_str(g, i, j, &len);
            put_quoted(f, s, len, o->json);
        } else {
            put_scalar(f, et, loom_gguf_kv_arr_data(g, i), j, o->json);
        }
    }
    if (shown < n && !o->json) fprintf(f, ", ... (%llu total)", (unsigned long long)n);
    fputc(']', f);
}

static void put_type(FILE * f, const struct loom_gguf * g, int64_t i) {
    enum loom_gguf_type type = loom_gguf_kv_type(g, i);
    if (type == LOOM_GGUF_TYPE_ARRAY) {
        char buf[48];
        snprintf(buf, sizeof buf, "%s[%llu]", loom_gguf_type_name(loom_gguf_kv_arr_type(g, i)),
                 (unsigned long long)loom_gguf_kv_arr_n(g, i));
        fprintf(f, "%-12s", buf);
    } else {
        fprintf(f, "%-12s", loom_gguf_type_name(type));
    }
}

/* ---------------------------------------------------------------- text and JSON reports */

/* "[ne0,ne1,...]" of tensor i into 'buf', the dimensions separated by 'sep'. */
static const char * format_shape(char * buf, size_t size, const struct loom_gguf * g, int64_t i, const char * sep) {
    const int64_t * ne = loom_gguf_tensor_ne(g, i);
    int n = snprintf(buf, size, "[");
    for (int d = 0; d < loom_gguf_tensor_n_dims(g, i) && n >= 0 && (size_t)n < size; d++) {
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", d ? sep : "", (long long)ne[d]);
    }
    if (n >= 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
    return buf;
}

static void print_text(FILE * f, const struct loom_gguf * g, const struct info_opts * o) {
    fputs("file         ", f);
    put_quoted(f, o->path, strlen(o->path), false);
    fprintf(f, "\nversion      %u\nfile size    %llu bytes\nalignment    %u bytes\ndata offset  %llu\n"
               "metadata     %lld keys\ntensors      %lld\n",
            loom_gguf_version(g), (unsigned long long)loom_gguf_file_size(g), loom_gguf_alignment(g),
            (unsigned long long)loom_gguf_data_offset(g), (long long)loom_gguf_n_kv(g), (long long)loom_gguf_n_tensors(g));
    fprintf(f, "\nmetadata:\n");
    for (int64_t i = 0; i < loom_gguf_n_kv(g); i++) {
        const char * key = loom_gguf_kv_key(g, i);
        fputs("  ", f);
        put_name(f, key, 44);
        fputc(' ', f);
        put_type(f, g, i);
        fputs(" = ", f);
        put_value(f, g, i, o);
        fputc('\n', f);
    }
    fprintf(f, "\ntensors:\n  %5s  %-32s %-8s %-22s %12s %12s\n", "#", "name", "type", "shape", "offset", "bytes");
    for (int64_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        const char * name = loom_gguf_tensor_name(g, i);
        char shape[128];
        format_shape(shape, sizeof shape, g, i, ",");
        fprintf(f, "  %5lld  ", (long long)i);
        put_name(f, name, 32);
        fprintf(f, " %-8s %-22s %12llu %12llu\n", loom_type_name(loom_gguf_tensor_type(g, i)),
                shape, (unsigned long long)loom_gguf_tensor_offset(g, i), (unsigned long long)loom_gguf_tensor_size(g, i));
    }
}

static void print_json(FILE * f, const struct loom_gguf * g, const struct info_opts * o) {
    fputs("{\n  \"file\": ", f);
    put_quoted(f, o->path, strlen(o->path), true);
    fprintf(f, ",\n  \"version\": %u,\n  \"file_size\": %llu,\n  \"alignment\": %u,\n  \"data_offset\": %llu,\n"
               "  \"n_kv\": %lld,\n  \"n_tensors\": %lld,\n  \"metadata\": [",
            loom_gguf_version(g), (unsigned long long)loom_gguf_file_size(g), loom_gguf_alignment(g),
            (unsigned long long)loom_gguf_data_offset(g), (long long)loom_gguf_n_kv(g), (long long)loom_gguf_n_tensors(g));
    for (int64_t i = 0; i < loom_gguf_n_kv(g); i++) {
        const char * key = loom_gguf_kv_key(g, i);
        enum loom_gguf_type type = loom_gguf_kv_type(g, i);
        fputs(i ? ",\n    {\"key\": " : "\n    {\"key\": ", f);
        put_quoted(f, key, strlen(key), true);
        fprintf(f, ", \"type\": \"%s\"", loom_gguf_type_name(type));
        if (type == LOOM_GGUF_TYPE_ARRAY) {
            uint64_t n = loom_gguf_kv_arr_n(g, i);
            fprintf(f, ", \"elem_type\": \"%s\", \"n\": %llu, \"truncated\": %s",
                    loom_gguf_type_name(loom_gguf_kv_arr_type(g, i)), (unsigned long long)n,
                    !o->all && n > ABBREV_N ? "true" : "false");
        } else if (type == LOOM_GGUF_TYPE_STRING) {
            size_t len;
            const char * s = loom_gguf_kv_str(g, i, &len);
            fprintf(f, ", \"n_bytes\": %zu, \"truncated\": %s", len, string_shown(s, len, o) < len ? "true" : "false");
        }
        fputs(", \"value\": ", f);
        put_value(f, g, i, o);
        fputc('}', f);
    }
    fputs(loom_gguf_n_kv(g) ? "\n  ],\n  \"tensors\": [" : "],\n  \"tensors\": [", f);
    for (int64_t i = 0; i < loom_gguf_n_tensors(g); i++) {
        const char * name = loom_gguf_tensor_name(g, i);
        fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", f);
        put_quoted(f, name, strlen(name), true);
        fprintf(f, ", \"type\": \"%s\", \"shape\": ", loom_type_name(loom_gguf_tensor_type(g, i)));
        char shape[128];
        fputs(format_shape(shape, sizeof shape, g, i, ", "), f);
        fprintf(f, ", \"offset\": %llu, \"bytes\": %llu}", (unsigned long long)loom_gguf_tensor_offset(g, i),
                (unsigned long long)loom_gguf_tensor_size(g, i));
    }
    fputs(loom_gguf_n_tensors(g) ? "\n  ]\n}\n" : "]\n}\n", f);
}

/* ---------------------------------------------------------------- the command */

static int parse_args(int argc, char ** argv, struct info_opts * o, bool * help) {
    static const struct option opts[] = {
        {"json", no_argument, 0, 'J'}, {"all", no_argument, 0, 'A'}, {"model", required_argument, 0, 'm'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    opterr = 0;
    optind = 1;
    for (;;) {
        const int c = cli_getopt(argc, argv, ":m:h", opts);
        const char * path = NULL;
        if (c == -1 && optind >= argc) break;
        if (c == -1) path = argv[optind++]; /* FILE, before or between options */
        switch (c) {
        case -1: break;
        case 'm': path = optarg; break;
        case 'J': o->json = true; break;
        case 'A': o->all = true; break;
        case 'h': *help = true; break;
        default: cli_option_error("info", c); return 1; /* ':' or '?' */
        }
        if (path && o->path) {
            fprintf(stderr, "loom info: more than one FILE given (see loom info -h)\n");
            return 1;
        }
        if (path) o->path = path;
    }
    if (!*help && !o->path) {
        fprintf(stderr, "loom info: missing FILE.gguf (see loom info -h)\n");
        return 1;
    }
    return 0;
}

int loom_cmd_info(int argc, char ** argv) {
    struct info_opts o = {0};
    bool help = false;
    if (parse_args(argc, argv, &o, &help) != 0) return 1;
    if (help) {
        usage(stdout);
        return cli_stdout_ok("info") ? 0 : 1;
    }
    struct loom_gguf * g = NULL;
    char err[1024];
    enum loom_status st = loom_gguf_open(o.path, &g, err, sizeof err);
    if (st != LOOM_OK) {
        fprintf(stderr, "loom info: %s\n", err);
        return 1;
    }
    if (o.json) {
        print_json(stdout, g, &o);
    } else {
        print_text(stdout, g, &o);
    }
    loom_gguf_free(g);
    return cli_stdout_ok("info") ? 0 : 1;
}
