#!/usr/bin/env python3
"""Every number the plugin and sdt-host print or parse goes through a locale-independent call.

A host in a comma-decimal locale (de_DE.UTF-8) makes printf's "%g" write "0,005" and strtod read
"0.005" as 0 (the review's silent learning rate 0). This check reads the sources (plugin/, models/,
kernels/, host-sim/; build-time tools, which never set a locale, aside) and fails on:
  - strtod/strtof/strtold/atof, and the v*printf family, outside the one helper
    (kernels/c_numeric.c; host-sim's cli_common.c formats only what the next rule checks);
  - a float conversion (%f %e %g %a) in the format of a locale-dependent call (printf, snprintf,
    g_string_append_printf, sscanf, ...): such numbers go through sdt_c_snprintf, the error and
    log helpers (which format with sdt_c_vsnprintf) or host-sim's c_number;
  - a cJSON print or parse outside its C-locale wrapper (models/formats/c_json.c, and
    host-sim/host_json.c for sdt-host): cJSON swaps only the first byte of a multi-byte
    decimal point (ps_AF.UTF-8's "٫"), so its files would not even be UTF-8 (tools included);
  - case mapping that follows the locale (g_utf8_strdown/strup, tolower/toupper, strcasecmp,
    cJSON's case-insensitive key lookups): in tr_TR 'I' lowers to 'ı' (tolower('I') stays 'I');
    use g_ascii_* or cJSON's *CaseSensitive calls for keys, sdt_py_lower for CLIP's text.
Usage: check_locale_numbers.py SOURCE_ROOT"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
DIRS = ["plugin", "models", "kernels", "host-sim"]
SKIP_DIRS = {"models/tools", "host-sim/demo"}  # build-time tools: their own processes, C locale
HELPERS = {"kernels/c_numeric.c"}
JSON_HELPERS = {"models/formats/c_json.c", "host-sim/host_json.c"}
VARIADIC_OK = {"host-sim/cli_common.c"}  # cli_errorf/cli_usage_errorf: their callers are checked below
PARSE = re.compile(r"(?<![\w.])(strtod|strtof|strtold|atof)\s*\(")
VPRINTF = re.compile(r"(?<![\w.])(vsnprintf|vsprintf|vfprintf|vprintf|g_strdup_vprintf|g_string_append_vprintf|g_vsnprintf)\s*\(")
LOCALE_PRINTF = re.compile(
    r"(?<![\w.])(printf|fprintf|sprintf|snprintf|g_snprintf|g_string_append_printf|g_string_printf|g_strdup_printf|"
    r"g_print|g_printerr|g_message|g_warning|cli_errorf|cli_usage_errorf|sscanf|fscanf)\s*\(")
RAW_JSON = re.compile(r"(?<![\w.])(cJSON_Print\w*|cJSON_Parse\w*)\s*\(")
LOCALE_CASE = re.compile(r"(?<![\w.])(g_utf8_strdown|g_utf8_strup|g_strdown|g_strup|tolower|toupper|towlower|towupper|"
                         r"strcasecmp|strncasecmp|g_strcasecmp|g_strncasecmp|"
                         r"cJSON_GetObjectItem|cJSON_HasObjectItem|cJSON_DeleteItemFromObject|cJSON_DetachItemFromObject|"
                         r"cJSON_ReplaceItemInObject)\s*\(")
FLOAT_CONV = re.compile(r"%[-+ #0'*.\d]*(?:l|L|ll)?[aAeEfFgG]")


def strip_comments(text):
    """Comments out, string literals kept (a '/*' inside a literal stays)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def format_of(text, start):
    """The adjacent string literals of the first literal argument after the call's '('."""
    depth, i, n = 0, start, len(text)
    lits = []
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            lits.append(text[i + 1:j])
            i = j + 1
            continue
        if lits and c == "," and depth == 0:
            break
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                break
            depth -= 1
        i += 1
    return "".join(lits).replace("%%", "")


problems = []
for d in DIRS:
    for path in sorted((root / d).rglob("*")):
        if path.suffix not in (".c", ".cu", ".h", ".cuh"):
            continue
        rel = path.relative_to(root).as_posix()
        text = strip_comments(path.read_text(errors="replace"))
        line_of = lambda pos: text.count("\n", 0, pos) + 1
        if rel not in JSON_HELPERS:
            for m in RAW_JSON.finditer(text):
                problems.append(f"{rel}:{line_of(m.start())}: {m.group(1)} reads the locale's decimal point; "
                                "use sdt_json_* (models/formats/c_json.h; sdt-host: host_json_*, host-sim/host_json.h)")
        for m in LOCALE_CASE.finditer(text):
            problems.append(f"{rel}:{line_of(m.start())}: {m.group(1)} follows the locale (tr_TR: 'I' -> 'ı'); "
                            "use g_ascii_*, cJSON's *CaseSensitive or sdt_py_lower")
        if any(rel.startswith(s + "/") for s in SKIP_DIRS) or rel in HELPERS:
            continue
        for m in PARSE.finditer(text):
            problems.append(f"{rel}:{line_of(m.start())}: {m.group(1)} reads the locale's decimal point; use sdt_c_strtod (or g_ascii_strtod)")
        if rel not in VARIADIC_OK:
            for m in VPRINTF.finditer(text):
                problems.append(f"{rel}:{line_of(m.start())}: {m.group(1)} formats numbers in the locale; use sdt_c_vsnprintf")
        for m in LOCALE_PRINTF.finditer(text):
            fmt = format_of(text, m.end())
            conv = FLOAT_CONV.search(fmt)
            if conv:
                problems.append(f"{rel}:{line_of(m.start())}: {m.group(1)} with '{conv.group(0)}' depends on the locale; "
                                "use sdt_c_snprintf / sdt_c_strtod (host-sim: c_number)")

for p in problems:
    print(p)
if problems:
    print(f"{len(problems)} locale-dependent call(s); see tests/source/check_locale_numbers.py")
    sys.exit(1)
print("every number, JSON text and case mapping is locale-independent")
