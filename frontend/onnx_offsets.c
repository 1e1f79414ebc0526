/* onnx_offsets.c — where each initializer's payload lies in an ONNX file, found by walking the
 * protobuf wire format (no protobuf-c: it copies the bytes and forgets where they were).
 *
 * The trainer's --export-onnx writes the source model back with its initializers replaced by the
 * trained values: it copies the file and overwrites each state tensor's payload in place. A float32
 * payload of the same element count has the same length, so nothing else in the file moves and
 * every other byte (graph, attributes, metadata, other initializers) stays identical. This file
 * finds those byte ranges at compile time:
 *
 *   ModelProto.graph (field 7) -> GraphProto.initializer (field 5) -> TensorProto:
 *     name (8), data_type (2), raw_data (9), float_data (4, packed), double_data (10, packed)
 *
 * Protobuf's rules are followed: a repeated message field's occurrences are concatenated (a graph
 * given twice has both lists of initializers), a scalar field's last occurrence wins (raw_data,
 * name, data_type). A packed float_data split over several occurrences, or written unpacked (one
 * tag per element), is not one byte range: such a tensor gets file -1 and the trainer refuses to
 * export it (no exporter writes that). External data (data_location 14) is resolved by the loader
 * from the parsed message; here it is only noted (file -2).
 */
#include "ck_frontend.h"

#include <string.h>

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };
enum { ONNX_FLOAT = 1, ONNX_DOUBLE = 11, ONNX_EXTERNAL = 1 };

typedef struct wire {
    const uint8_t *p, *end;
} wire;

static bool varint(wire *w, uint64_t *v) {
    *v = 0;
    for (int shift = 0; w->p < w->end && shift < 64; shift += 7) {
        uint8_t b = *w->p++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

/* One field: its number, wire type and, for WIRE_LEN, its bytes [*at, *at + *len) (an offset from
 * base); varints' values in *len. Skips what it does not return. false: malformed. */
static bool field(wire *w, const uint8_t *base, uint64_t *num, int *type, uint64_t *at, uint64_t *len) {
    uint64_t tag;
    if (!varint(w, &tag)) return false;
    *num = tag >> 3, *type = (int)(tag & 7), *len = 0;
    switch (*type) {
    case WIRE_VARINT: return varint(w, len);
    case WIRE_I64: if (w->end - w->p < 8) return false; w->p += 8; return true;
    case WIRE_I32: if (w->end - w->p < 4) return false; w->p += 4; return true;
    case WIRE_LEN:
        if (!varint(w, len) || *len > (uint64_t)(w->end - w->p)) return false;
        *at = (uint64_t)(w->p - base);
        w->p += *len;
        return true;
    default: return false; /* groups: ONNX has none */
    }
}

/* The packed repeated field of one element type: its one occurrence, or how it went wrong. */
typedef struct packed {
    uint64_t at, len;
    int chunks;
    bool unpacked;
} packed;

static void add_packed(packed *k, int type, uint64_t at, uint64_t len) {
    if (type != WIRE_LEN) {
        k->unpacked = true;
        return;
    }
    k->at = at, k->len = len;
    k->chunks++;
}

/* One TensorProto at [at, at + len) of base. */
static bool tensor(const uint8_t *base, uint64_t at, uint64_t len, ck_arena *a, ck_payload *out) {
    wire w = {base + at, base + at + len};
    uint64_t num, fat, flen, dtype = 0, location = 0;
    int type;
    const char *name = "";
    uint64_t name_len = 0, raw_at = 0, raw_len = 0;
    bool has_raw = false;
    packed floats = {0}, doubles = {0};
    while (w.p < w.end) {
        if (!field(&w, base, &num, &type, &fat, &flen)) return false;
        if (num == 8 && type == WIRE_LEN) name = (const char *)base + fat, name_len = flen;
        else if (num == 2 && type == WIRE_VARINT) dtype = flen;
        else if (num == 14 && type == WIRE_VARINT) location = flen;
        else if (num == 9 && type == WIRE_LEN) raw_at = fat, raw_len = flen, has_raw = true;
        else if (num == 4) add_packed(&floats, type, fat, flen);
        else if (num == 10) add_packed(&doubles, type, fat, flen);
    }
    out->name = ck_arena_strndup(a, name, (size_t)name_len);
    const packed *k = dtype == ONNX_DOUBLE ? &doubles : &floats;
    if (location == ONNX_EXTERNAL) {
        out->file = -2;
    } else if (has_raw) {
        out->file = 0, out->offset = raw_at, out->length = raw_len;
    } else if ((dtype == ONNX_FLOAT || dtype == ONNX_DOUBLE) && k->chunks <= 1 && !k->unpacked) {
        out->file = 0, out->offset = k->at, out->length = k->len; /* no chunk: an empty tensor */
    } else {
        out->file = -1;
    }
    return out->name != NULL;
}

/* The initializers of the GraphProto at [at, at + len), appended to *out (*n of *cap). */
static bool graph(const uint8_t *base, uint64_t at, uint64_t len, ck_arena *a, ck_payload **out, int *n, int *cap) {
    wire w = {base + at, base + at + len};
    uint64_t num, fat, flen;
    int type;
    while (w.p < w.end) {
        if (!field(&w, base, &num, &type, &fat, &flen)) return false;
        if (num != 5 || type != WIRE_LEN) continue;
        if (*n == *cap) {
            int c2 = *cap * 2 + 16;
            ck_payload *b = ck_arena_alloc(a, sizeof *b * (size_t)c2);
            if (!b) return false;
            if (*n) memcpy(b, *out, sizeof *b * (size_t)*n);
            *out = b, *cap = c2;
        }
        memset(&(*out)[*n], 0, sizeof **out);
        if (!tensor(base, fat, flen, a, &(*out)[*n])) return false;
        (*n)++;
    }
    return true;
}

ck_status ck_onnx_payload_ranges(const void *buf, size_t len, ck_arena *a, ck_payload **out, int *n) {
    const uint8_t *base = buf;
    wire w = {base, base + len};
    uint64_t num, fat, flen;
    int type, cap = 0;
    *out = NULL, *n = 0;
    while (w.p < w.end) {
        if (!field(&w, base, &num, &type, &fat, &flen)) return CK_ERR_PARSE;
        if (num == 7 && type == WIRE_LEN && !graph(base, fat, flen, a, out, n, &cap)) return CK_ERR_PARSE;
    }
    return CK_OK;
}
