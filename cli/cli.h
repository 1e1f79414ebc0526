/* cli.h — what the command line's files share: the compiler pipeline (compile.c) and the
 * inspect printers (inspect.c); ckptc.c parses the flags and calls them. */
#ifndef CK_CLI_H
#define CK_CLI_H

#include "ck_codegen.h"
#include "ck_frontend.h"

#include <stdio.h>

/* The whole compiler: load MODEL.onnx, run the passes (the plan search among them), then print
 * the plan (co->plan_only, co->explain) or write the program into co->out_dir. Prints what the
 * search chose and a summary on stdout; user errors go into d. */
ck_status ck_compile(const char *path, const ck_load_options *lo, const ck_options *o, const ck_codegen_options *co, ck_diag *d);

/* `ckptc inspect`: the loaded model as text, or as JSON when json is set. */
void ck_inspect_print(FILE *f, const ck_graph *g, const char *path, bool json);

#endif
