#!/usr/bin/env python3
"""Prints the function declarations of C headers, one per line, comments and preprocessor lines
removed. Used by scripts/check_abi.sh to make a translation unit in which our declarations meet
upstream's: the compiler rejects any two declarations of one function that disagree."""
import re
import sys


def declarations(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = text.replace("\\\n", " ")  # macro continuation lines
    kept, skipping = [], False
    for line in text.splitlines():
        stripped = line.strip()
        # the `extern "C" {` ... `}` guards live in #ifdef __cplusplus blocks: drop them whole
        if stripped.startswith("#ifdef __cplusplus"):
            skipping = True
            continue
        if skipping:
            skipping = not stripped.startswith("#endif")
            continue
        if not stripped.startswith("#"):
            kept.append(line)
    text = "\n".join(kept)
    out, cur, depth = [], [], 0
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                cur = []
                continue
        if depth > 0:
            continue
        if ch == ";":
            stmt = " ".join("".join(cur).split())
            cur = []
            if "(" in stmt and not stmt.startswith("typedef"):
                out.append(stmt + ";")
        else:
            cur.append(ch)
    return out


def name(decl):
    return re.search(r"(\w+)\s*\(", decl).group(1)


if __name__ == "__main__":
    mode = sys.argv[1]
    decls = [d for path in sys.argv[2:] for d in declarations(open(path).read())]
    for d in decls:
        print(name(d) if mode == "names" else d.replace("GGML_API ", "").replace("GGML_BACKEND_API ", ""))
