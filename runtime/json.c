/* json.c — the one JSON writer of ckptc and libckrt (ckrt_util.h): strings escaped in one place,
 * integer arrays. Callers print the layout (members, newlines, indentation) with fprintf; what
 * could go wrong by hand, a name with a quote or a control character in it, is done here.
 */
#include "ckrt_util.h"

void ckrt_json_str(FILE *f, const char *s) {
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

void ckrt_json_key(FILE *f, const char *sep, const char *key) {
    fputs(sep, f);
    ckrt_json_str(f, key);
    fputs(": ", f);
}

void ckrt_json_i64s(FILE *f, int n, const int64_t *v, const char *sep) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%lld", i ? sep : "", (long long)v[i]);
    fputc(']', f);
}
