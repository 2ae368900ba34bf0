#!/usr/bin/env python3
"""Checks what libcohort.so exports: exactly the C ABI that cohort.h declares,
the C++ API of namespace cohort (classes and functions marked COHORT_API,
capi/cohort.map), and nothing else.

Usage: check_symbols.py LIBCOHORT_SO COHORT_H

Fails, naming each symbol, when
  - a cohort_* function is exported but not declared in cohort.h,
  - a function declared in cohort.h is not exported,
  - anything else is exported: C++ outside the public namespace (std::
    template instantiations, Boost, fmt, yaml-cpp, cohort::detail::, ...)
    leaking past -fvisibility=hidden and the version script, apart from the
    linker's own markers.
"""

import re
import shutil
import subprocess
import sys

# Symbols the toolchain itself may put in a shared library's dynamic table.
RUNTIME_SYMBOLS = {
    "_init",
    "_fini",
    "_edata",
    "_end",
    "__bss_start",
    "__bss_start__",
    "__bss_end__",
    "_bss_end__",
    "__end__",
    "_DYNAMIC",
    "_GLOBAL_OFFSET_TABLE_",
    "__dso_handle",
    "__data_start",
    "data_start",
    "_IO_stdin_used",
}


# The public C++ API: functions, members, vtables and typeinfo of namespace
# cohort, but not its internal namespaces. Matched on the mangled name, so
# no demangler is needed: _ZN6cohort..., _ZNK6cohort... (const members),
# _ZTIN6cohort / _ZTSN6cohort / _ZTVN6cohort (typeinfo, its name, vtable).
CXX_API = re.compile(r"^_Z(?:T[ISV])?NK?6cohort(?!6detail|4capi)\d")


def fail_usage(message):
    print(f"check_symbols.py: {message}", file=sys.stderr)
    print("usage: check_symbols.py LIBCOHORT_SO COHORT_H", file=sys.stderr)
    sys.exit(2)


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def strip_version(name):
    # "foo@@VERS_1" or "foo@VERS_1" -> "foo"
    return name.split("@", 1)[0]


def exported_with_nm(library):
    """Defined dynamic symbols as {name: type letter}, via nm."""
    symbols = {}
    for line in run(["nm", "-D", "--defined-only", library]).splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        # "ADDRESS TYPE NAME", or "TYPE NAME" for symbols without a value.
        kind, name = (fields[-2], fields[-1])
        if kind in ("U", "w", "v"):  # undefined or weak-undefined
            continue
        symbols[strip_version(name)] = kind
    return symbols


def exported_with_readelf(library):
    """Defined, visible dynamic symbols as {name: type}, via readelf."""
    symbols = {}
    for line in run(["readelf", "--dyn-syms", "--wide", library]).splitlines():
        # Num: Value Size Type Bind Vis Ndx Name
        fields = line.split()
        if len(fields) < 8 or not fields[0].rstrip(":").isdigit():
            continue
        kind, bind, ndx, name = fields[3], fields[4], fields[6], fields[7]
        if ndx == "UND" or bind == "LOCAL" or kind in ("SECTION", "FILE"):
            continue
        symbols[strip_version(name)] = kind
    return symbols


def exported_symbols(library):
    errors = []
    for tool, reader in (("nm", exported_with_nm), ("readelf", exported_with_readelf)):
        if shutil.which(tool) is None:
            errors.append(f"{tool} not found")
            continue
        try:
            return tool, reader(library)
        except (RuntimeError, OSError) as error:
            errors.append(str(error))
    raise RuntimeError("cannot list the library's symbols: " + "; ".join(errors))


def declared_functions(header):
    """Names of the functions cohort.h declares with COHORT_API."""
    with open(header, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)  # comments
    text = re.sub(r"//[^\n]*", " ", text)
    # Preprocessor lines, with their continuations (the COHORT_API definition).
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    names = []
    for declaration in re.finditer(r"\bCOHORT_API\b([^;{]*)[;{]", text):
        match = re.search(r"\b(\w+)\s*\(", declaration.group(1))
        if match is None:
            raise RuntimeError(f"{header}: cannot read the declaration "
                               f"'{' '.join(declaration.group(0).split())}'")
        names.append(match.group(1))
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise RuntimeError(f"{header}: declared twice: {', '.join(duplicates)}")
    return set(names)


def demangle(names):
    if not names or shutil.which("c++filt") is None:
        return {n: n for n in names}
    result = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    lines = result.stdout.splitlines()
    if result.returncode != 0 or len(lines) != len(names):
        return {n: n for n in names}
    return dict(zip(names, lines))


def main(argv):
    if len(argv) != 3:
        fail_usage("expected 2 arguments")
    library, header = argv[1], argv[2]
    try:
        tool, symbols = exported_symbols(library)
        declared = declared_functions(header)
    except (RuntimeError, OSError) as error:
        print(f"check_symbols.py: {error}", file=sys.stderr)
        return 2
    if not declared:
        print(f"check_symbols.py: no COHORT_API declarations found in {header}", file=sys.stderr)
        return 2

    exported = {name for name in symbols if name.startswith("cohort_")}
    undeclared = sorted(exported - declared)
    missing = sorted(declared - exported)
    cxx_api = sorted(name for name in symbols if CXX_API.match(name))
    leaked = sorted(name for name in symbols
                    if not name.startswith("cohort_") and name not in RUNTIME_SYMBOLS
                    and not CXX_API.match(name))
    not_functions = sorted(name for name in exported & declared
                           if symbols[name] not in ("T", "FUNC", "IFUNC", "i"))

    print(f"{library}: {len(symbols)} exported symbols ({tool}), "
          f"{len(exported)} named cohort_*, {len(cxx_api)} of the C++ API in namespace cohort; "
          f"{header}: {len(declared)} functions declared")
    ok = True
    if undeclared:
        ok = False
        print(f"\nFAIL: {len(undeclared)} exported but not declared in cohort.h:")
        for name in undeclared:
            print(f"  {name}")
    if missing:
        ok = False
        print(f"\nFAIL: {len(missing)} declared in cohort.h but not exported "
              "(missing COHORT_API on the definition, or not defined):")
        for name in missing:
            print(f"  {name}")
    if not_functions:
        ok = False
        print(f"\nFAIL: {len(not_functions)} declared functions exported as something else:")
        for name in not_functions:
            print(f"  {name} (type {symbols[name]})")
    if leaked:
        ok = False
        readable = demangle(leaked)
        print(f"\nFAIL: {len(leaked)} exported symbols outside the C ABI and namespace cohort "
              "(C++ or dependency symbols escaping -fvisibility=hidden and capi/cohort.map):")
        for name in leaked[:50]:
            shown = readable[name]
            print(f"  {name}" + (f"  [{shown}]" if shown != name else "") + f" (type {symbols[name]})")
        if len(leaked) > 50:
            print(f"  ... and {len(leaked) - 50} more")
    if ok:
        print("OK: the exports are exactly the functions of cohort.h and the C++ API of "
              "namespace cohort")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
