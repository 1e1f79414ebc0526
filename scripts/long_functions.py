#!/usr/bin/python3
"""long_functions.py — lists C function definitions longer than a limit (default 100 lines).

    scripts/long_functions.py [--max N] FILE.c ...      e.g. scripts/long_functions.py cli/*.c passes/*.c

A definition is a top-level brace block whose header (the text since the last top-level `;` or
`}`) holds a parameter list and no `=` before it (so no initializers); its length runs from the
line of its opening brace to the line of its closing one. Comments, strings and character
literals are blanked first so that their braces do not count. Prints FILE:LINE: NAME N lines for
each, then the count on stderr; exits 1 when there is any.
"""
import re
import sys

SKIP = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def blank(m):
    return re.sub(r"[^\n]", " ", m.group(0))  # keep the line count


def long_functions(path, limit):
    src = SKIP.sub(blank, open(path, encoding="utf-8", errors="replace").read())
    depth, header, line, start, name = 0, "", 1, -1, "?"
    for ch in src:
        if ch == "\n":
            line += 1
        if depth == 0:
            if ch == "{":
                head = header.split("(")[0]
                is_fn = "(" in header and ")" in header and "=" not in head and not re.match(r"\s*(struct|enum|union)\b", head.strip())
                names = re.findall(r"([A-Za-z_]\w*)\s*\(", header)
                start, name = (line if is_fn else -1), (names[0] if names else "?")
                depth, header = 1, ""
            elif ch in ";}":
                header = ""
            else:
                header += ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0 and start > 0 and line - start + 1 > limit:
                yield start, name, line - start + 1


def main(argv):
    limit = 100
    if len(argv) > 1 and argv[0] == "--max":
        limit, argv = int(argv[1]), argv[2:]
    found = 0
    for path in argv:
        for start, name, n in long_functions(path, limit):
            print(f"{path}:{start}: {name} {n} lines")
            found += 1
    print(f"{found} functions over {limit} lines", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
