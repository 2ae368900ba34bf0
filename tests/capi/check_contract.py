#!/usr/bin/env python3
"""Checks cohort.h against the written rules of its contract (the comment at
its top), so that a new function cannot quietly break them:

  1. names: a function on handle X (its first parameter) is cohort_X_...;
  2. constructors: a function that hands out a new cohort_Y** (its last
     parameter) is cohort_Y_<constructor verb>, and no other function uses
     those verbs; the one exception is cohort_comm_<op>_async's cohort_work;
  3. codes: COHORT_ERR_LAST is the largest COHORT_ERR_* code;
  5. ranks: a rank or world size is int32_t;
  6. units: a duration is a double of seconds, never *_ms;
  7. owned strings: every char** out-parameter is followed by a size_t*.

Usage: check_contract.py COHORT_H
"""

import re
import sys

CONSTRUCTOR = re.compile(r"_(create|load_file|load_string|from_env|from_[a-z_]+|open|compile|split|"
                         r"replan|submit)$")
# Functions that need no handle, by the thing they work on (contract 1).
MODULES = ("version", "last_error", "strerror", "free", "dtype", "reduce_op", "algorithm", "transport",
           "epoch", "gpu", "rules")
DURATION = re.compile(r"(timeout|deadline|interval|window|limit)")
RANK = re.compile(r"^(rank|world_size|local_rank|local_world_size|node_rank|root)$")


def strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)


def parameters(text):
    """[(type, name)] of a parameter list."""
    text = " ".join(text.split())
    if text in ("", "void"):
        return []
    out = []
    for part in text.split(","):
        match = re.match(r"^(.*?)(\w+)$", part.strip())
        out.append((match.group(1).replace(" *", "*").strip(), match.group(2)))
    return out


def main(argv):
    if len(argv) != 2:
        print("usage: check_contract.py COHORT_H", file=sys.stderr)
        return 2
    raw = open(argv[1], encoding="utf-8").read()
    text = strip(raw)
    handles = sorted(set(re.findall(r"typedef struct (cohort_\w+) cohort_\w+;", text)) -
                     {"cohort_rank_info", "cohort_gpu_summary"}, key=len, reverse=True)
    failures = []

    def fail(message):
        failures.append(message)

    functions = re.findall(r"\bCOHORT_API\b\s+([^;{(]*?)\b(cohort_\w+)\s*\(([^)]*)\)\s*;", text)
    if len(functions) < 100:
        print(f"check_contract.py: only {len(functions)} functions read from {argv[1]}",
              file=sys.stderr)
        return 2
    for _, name, params_text in functions:
        params = parameters(params_text)
        made = None
        if params and re.fullmatch(r"(cohort_\w+)\*\*", params[-1][0]) and params[-1][0] != "char**":
            made = params[-1][0][:-2]
        first = re.fullmatch(r"(?:const )?(cohort_\w+)\*", params[0][0]) if params else None
        if made is not None and made in handles and not name.endswith("_async"):
            if not name.startswith(made + "_") or not CONSTRUCTOR.search(name):
                fail(f"{name}: makes a {made}, so it must be {made}_<constructor verb> "
                     "(contract 2)")
        else:
            if CONSTRUCTOR.search(name) and not name.endswith("_async"):
                fail(f"{name}: uses a constructor's verb but makes no handle (contract 2)")
            if first and first.group(1) in handles:
                if not name.startswith(first.group(1) + "_"):
                    fail(f"{name}: works on a {first.group(1)}, so it must be named "
                         f"{first.group(1)}_<verb> (contract 1)")
            elif not any(name == "cohort_" + m or name.startswith("cohort_" + m + "_")
                         for m in MODULES):
                fail(f"{name}: takes no handle first and names no known module (contract 1)")
        for i, (type_, pname) in enumerate(params):
            if type_ == "char**" and (i + 1 >= len(params) or params[i + 1][0] != "size_t*"):
                fail(f"{name}: the owned string {pname} is not followed by a size_t* length "
                     "(contract 7)")
            if pname.endswith("_ms") or (DURATION.search(pname) and type_ not in ("double",)):
                fail(f"{name}: {pname} is a duration, so a double of seconds (contract 6)")
            if RANK.match(pname) and type_.replace("const ", "") not in ("int32_t", "int32_t*"):
                fail(f"{name}: {pname} is a rank, so int32_t (contract 5)")
    for struct in re.findall(r"typedef struct cohort_\w+ \{(.*?)\}", text, flags=re.S):
        for type_, field in re.findall(r"(\w+)\s+(\w+);", struct):
            if RANK.match(field) and type_ != "int32_t":
                fail(f"struct field {field} is a rank, so int32_t (contract 5)")
    codes = {name: int(value) for name, value in
             re.findall(r"#define (COHORT_ERR_\w+) (\d+)", raw)}
    last = re.search(r"#define COHORT_ERR_LAST (COHORT_ERR_\w+)", raw)
    if last is None or codes.get(last.group(1)) != max(codes.values()):
        fail("COHORT_ERR_LAST must name the largest COHORT_ERR_* code (contract 3)")

    for message in failures:
        print("FAIL: " + message)
    if failures:
        return 1
    print(f"OK: {len(functions)} functions of {argv[1]} follow the contract")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
