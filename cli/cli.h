/* cli.h — what the command line's files share: the compiler pipeline (compile.c), `ckptc
 * inspect` (inspect.c) and the error helpers of ckptc.c, which parses the flags and dispatches. */
#ifndef CK_CLI_H
#define CK_CLI_H

#include "ck_codegen.h"
#include "ck_frontend.h"

#include <stdio.h>

/* The whole compiler: load MODEL.onnx, run the passes (the plan search among them), then print
 * the plan (co->plan_only, co->explain) or write the program into co->out_dir. Prints what the
 * search chose and a summary on stdout; user errors go into d. */
ck_status ck_compile(const char *path, const ck_load_options *lo, const ck_options *o, const ck_codegen_options *co, ck_diag *d);

/* Where the generated Makefile finds libckrt: its header directory (inc) and library directory
 * (lib), n bytes each. */
void ckrt_paths(char *inc, char *lib, size_t n);

/* `ckptc pareto MODEL.onnx [compile flags] [--svg FILE]` (pareto.c): the budget search's trade-off
 * between planned peak and recompute FLOPs, the named policies beside it; returns a status. */
int ck_pareto(const char *path, const ck_load_options *lo, const ck_options *o, const char *svg_file, ck_diag *d);

/* `ckptc inspect MODEL.onnx [--dim NAME=N]... [--json]` (inspect.c); returns the exit status. */
int cmd_inspect(int argc, char **argv);

/* ckptc.c's helpers for every command: "ckptc: error: ..." on stderr, returning exit status 2;
 * one such line per diagnostic, naming the file; --dim NAME=N (the name is freed at exit). */
#define EXIT_USER 2
int user_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void print_diag(const ck_diag *d, const char *path);
bool parse_dim(const char *arg, ck_dim_binding *b);

#endif
