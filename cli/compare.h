/* compare.h — `ckptc compare`: trainer reports side by side (compare.c). */
#ifndef CK_COMPARE_H
#define CK_COMPARE_H

/* Prints the table; writes the timelines to timeline_svg when not NULL. Returns the exit status. */
int ck_compare(int n, char **paths, const char *timeline_svg);

#endif
