/* util.c — the pieces libckrt shares with the compiler (ckrt_util.h): the checksum, sizes such
 * as "512MiB", shapes, a file's checksum. Plain C, no state; compiled into libckrt and into ckrt_util, which the
 * compiler links (CMakeLists.txt).
 */
#include "ckrt_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t ckrt_checksum_update(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

uint64_t ckrt_checksum(const void *data, size_t n) { return ckrt_checksum_update(CKRT_CHECKSUM_INIT, data, n); }

bool ckrt_checksum_file(const char *path, uint64_t *size, uint64_t *sum) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    unsigned char buf[1 << 16]; /* a multiple of 8: every piece but the last whole words */
    uint64_t h = CKRT_CHECKSUM_INIT, n = 0;
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
        h = ckrt_checksum_update(h, buf, k);
        n += k;
    }
    bool ok = !ferror(f);
    fclose(f);
    *size = n, *sum = h;
    return ok;
}

bool ckrt_parse_size(const char *s, int64_t *out) {
    static const struct { const char *unit; double mult; } units[] = {
        {"", 1},          {"B", 1},          {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
        {"TiB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},        {"TB", 1e12}};
    if (s[0] < '0' || s[0] > '9') return false; /* no space, sign or dot first */
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || strspn(s, "0123456789.eE+-") < (size_t)(end - s)) return false; /* hex, inf, nan */
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
        if (!strcmp(end, units[k].unit)) {
            double b = v * units[k].mult;
            if (!(b >= 1) || b >= 9e18) return false;
            *out = (int64_t)b;
            return true;
        }
    return false;
}

int64_t ckrt_numel(int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    return n;
}

char *ckrt_shape_str(char *buf, size_t n, int rank, const int64_t *dims) {
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)dims[i]);
    if (k < n) snprintf(buf + k, n - k, ")");
    return buf;
}
