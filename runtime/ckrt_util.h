/* ckrt_util.h — the small pieces ckptc (the compiler) and libckrt (the runtime) share, written
 * once: the weights.bin format constants, the checksum, sizes such as "512MiB", shapes as text,
 * and the JSON writer.
 *
 * They live in libckrt (runtime/util.c, runtime/json.c) because generated programs link only
 * libckrt and stay dependency-free; the compiler links the same two files as the library
 * ckrt_util (CMakeLists.txt), so a report, plan.json and `ckptc inspect --json` escape strings
 * the same way, and the CLI and a trainer read `--mem-limit 2TiB` and `budget:2TiB` alike.
 * Nothing here allocates, exits or prints on its own.
 */
#ifndef CKRT_UTIL_H
#define CKRT_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* weights.bin: a 56-byte header (magic, version u32, tensor count u32, payload bytes u64,
 * payload checksum u64, payload offset u64, layout hash u64, reserved u64), the tensor table
 * (name, dtype, role, rank, dims, offset, bytes per tensor), then the payload: the image of the
 * arena's [0, weights_bytes). The program knows the layout hash it was compiled for, so a file
 * for another model is refused, while weights saved by --save-weights (same layout, new values)
 * load; the checksum catches corruption. codegen/codegen.c writes it, runtime/main.c reads it. */
#define CKRT_WEIGHTS_MAGIC "CKPTCWTS"
#define CKRT_WEIGHTS_VERSION 1
#define CKRT_WEIGHTS_HEADER 56

/* The checksum of weights.bin (and anything else that wants one): FNV-1a's step (xor, then
 * times the 64-bit FNV prime) over 8-byte words as they lie in memory, the tail's bytes one by
 * one. Fast enough for weights, catches corruption; not cryptographic. CKRT_CHECKSUM_INIT is
 * not FNV's offset basis (14695981039346656037) but that number with its last digit lost; it is
 * kept because every weights.bin and layout hash written so far was computed from it.
 * ckrt_checksum_update carries the state across the pieces of one stream (start from
 * CKRT_CHECKSUM_INIT): every piece but the last must be a multiple of 8 bytes for the result to
 * equal ckrt_checksum of the whole. */
#define CKRT_CHECKSUM_INIT 1469598103934665603ull
uint64_t ckrt_checksum_update(uint64_t h, const void *data, size_t n);
uint64_t ckrt_checksum(const void *data, size_t n);
/* The checksum and size of a whole file (read in pieces, so a file of any size); false when it
 * cannot be opened or read. ckptc records it for the source model, the trainer's --export-onnx
 * checks it. */
bool ckrt_checksum_file(const char *path, uint64_t *size, uint64_t *sum);

/* SIZE as ckptc's `budget:SIZE` / `--dp-bucket SIZE` and a trainer's `--mem-limit SIZE` read it:
 * a decimal number that starts with a digit ("512", "1.5", "1e9") directly followed by nothing
 * or B (bytes), a binary unit KiB MiB GiB TiB (powers of 1024) or a decimal unit KB MB GB TB
 * (powers of 1000). The result is rounded down to whole bytes and must be at least 1 and below
 * 9e18. Returns false (and leaves *out alone) for anything else: a sign, space or dot first, hex,
 * inf/nan, another unit or any other case of these. */
bool ckrt_parse_size(const char *s, int64_t *out);

/* The number of elements of a shape: the product of dims[0..rank) (1 for rank 0). */
int64_t ckrt_numel(int rank, const int64_t *dims);

/* A shape as messages print it: "(2,3,4)", "()" for a scalar; cut to fit buf (n > 0). Returns buf. */
char *ckrt_shape_str(char *buf, size_t n, int rank, const int64_t *dims);

/* ---------------------------------------------------------------- JSON writer (runtime/json.c)
 *
 * Every JSON file ckptc or a trainer writes (the trainer's report, plan.json, the plan's part of
 * the report embedded in trainer.c, `ckptc inspect --json`) is printed with fprintf for its
 * layout plus these for what needs care: strings are escaped here, and only here.
 *
 *     fputs("{\"name\": ", f);
 *     ckrt_json_str(f, name);                        // "a\"b" -> "a\"b" quoted and escaped
 *     fputs(", \"shape\": ", f);
 *     ckrt_json_i64s(f, rank, dims, ", ");           // [2, 3, 4]
 *     fputs("}\n", f);
 */

/* s as a JSON string: quoted, with '"' and '\' backslashed and the control characters below 0x20
 * as \u00XX. Other bytes (UTF-8 included) are copied as they are. NULL writes null. */
void ckrt_json_str(FILE *f, const char *s);
/* "key": (the key escaped like ckrt_json_str), after the separator sep ("" for the first member). */
void ckrt_json_key(FILE *f, const char *sep, const char *key);
/* [v0<sep>v1<sep>...] as decimal integers; sep is "," or ", " as the file's layout wants. */
void ckrt_json_i64s(FILE *f, int n, const int64_t *v, const char *sep);

#endif
