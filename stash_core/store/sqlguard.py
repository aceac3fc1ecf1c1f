"""The SQL console's guard: which statements it runs at all.

The console (stash_core/store/console.py) cannot write, reach outside the database or run forever, by three
layers, so that a gap in one is caught by the next:

1. `check_sql` (here) parses the text with DuckDB's own parser (one statement; only SELECT-like statements,
   EXPLAIN and a few informational PRAGMAs) and scans DuckDB's tokens for writing keywords, functions that
   read files, URLs or run SQL from a string, and file paths used as tables (`FROM 'data.csv'`).
2. The statement runs in a process of its own (console_worker.py), which opens the database read-only, turns
   off external access (no file system, no network, no extensions), spilling to disk, and locks its
   configuration: settings of that process only, never of the dashboard's other connections.
3. That process is killed when the query passes its time limit or its memory limit.
"""

from __future__ import annotations

import duckdb

from stash_core.errors import UsageError, first_line

# Statement types that only read. EXPLAIN is checked further: its inner statement must read too.
_READING_TYPES = {"SELECT", "EXPLAIN"}
# PRAGMAs that only report (a PRAGMA with "=" parses as SET and is refused with the other SETs).
_READING_PRAGMAS = {
    "table_info", "show", "show_tables", "show_tables_expanded", "database_size", "database_list",
    "storage_info", "version", "functions", "collations", "platform", "metadata_info", "user_agent",
}  # fmt: skip
# Keywords that only ever start a writing or configuring statement; refused wherever they appear as keywords
# (quote an identifier with the same name: "copy"). SET and LOAD are not here because they are also used as
# plain names; statement types catch them as statements.
_WRITING_KEYWORDS = {
    "insert", "update", "delete", "drop", "create", "alter", "attach", "detach", "copy", "install", "export",
    "import", "pragma", "call", "checkpoint", "vacuum", "truncate", "merge", "grant", "revoke",
}  # fmt: skip
# Functions that read local files or URLs, run SQL given as text, or reveal the environment.
_REFUSED_FUNCTIONS = {
    "read_csv", "read_csv_auto", "read_parquet", "parquet_scan", "parquet_metadata", "parquet_schema",
    "parquet_file_metadata", "parquet_kv_metadata", "parquet_bloom_probe", "read_json", "read_json_auto",
    "read_json_objects", "read_json_objects_auto", "read_ndjson", "read_ndjson_auto", "read_ndjson_objects",
    "read_text", "read_blob", "read_xlsx", "glob", "sniff_csv", "st_read", "st_read_meta", "iceberg_scan",
    "iceberg_metadata", "iceberg_snapshots", "delta_scan", "sqlite_scan", "sqlite_attach", "postgres_scan",
    "postgres_attach", "mysql_scan", "query", "query_table", "getenv", "load_extension", "duckdb_secrets",
    "which_secret", "from_csv_auto",
}  # fmt: skip
_REFUSED_PREFIXES = ("read_", "parquet_", "iceberg_", "delta_", "sqlite_", "postgres_", "mysql_")
# Keywords of a PIVOT statement or subquery.
_PIVOT_KEYWORDS = {"pivot", "pivot_wider"}
# Keywords after which a table reference follows.
_TABLE_KEYWORDS = {"from", "join"}
# Keywords that end a FROM clause (after them a comma no longer separates tables).
_CLAUSE_KEYWORDS = {
    "select", "where", "group", "having", "order", "limit", "offset", "qualify", "window", "union", "except",
    "intersect", "on", "using", "returning", "values", "set", "sample",
}  # fmt: skip


def check_sql(sql: str) -> str:
    """The single read-only statement in `sql`, stripped; UsageError (one line, saying why) otherwise."""
    text = (sql or "").strip()
    if not text:
        raise UsageError("type a query first, e.g. SELECT * FROM stall_breakdown LIMIT 10")
    try:
        statements = duckdb.extract_statements(text)
    except duckdb.Error as exc:
        raise UsageError(f"syntax error: {first_line(exc)}") from None
    if not statements:
        raise UsageError("type a query first (the text holds only comments)")
    if len(statements) > 1:
        raise UsageError(f"run one statement at a time (found {len(statements)} separated by ';')")
    statement = statements[0]
    kind = statement.type.name
    tokens = _tokens(text)
    words = [word for word, kind_ in tokens if kind_ == "keyword"]
    if kind == "PRAGMA" and words[:1] == ["pragma"]:  # IMPORT DATABASE parses as a PRAGMA too
        name = _pragma_name(tokens)
        if name not in _READING_PRAGMAS:
            raise UsageError(
                f"PRAGMA {name or ''} is refused: the console only runs informational PRAGMAs "
                f"({', '.join(sorted(_READING_PRAGMAS))})"
            )
    elif kind == "MULTI" and _PIVOT_KEYWORDS & set(words):
        # A PIVOT without its values first creates an ENUM type of them (DuckDB's MULTI statement): a write.
        raise UsageError(
            "a PIVOT needs an explicit IN (...) list in the console, e.g. PIVOT runs ON status "
            "IN ('completed', 'failed') USING count(*): without one DuckDB first creates a type of the values"
        )
    elif kind == "CALL" and words[:1] == ["call"]:  # it may write (CALL checkpoint()): read through SELECT
        raise UsageError("CALL statements are refused: the console runs queries; a table function that reads "
                         "is read with SELECT * FROM it, e.g. SELECT * FROM pragma_version()")  # fmt: skip
    elif kind not in _READING_TYPES:
        raise UsageError(f"{_statement_label(kind, words)} statements are refused: the console is read-only")
    for word in words:
        if word in _WRITING_KEYWORDS and not (kind == "PRAGMA" and word == "pragma"):
            raise UsageError(f"{word.upper()} is refused: the console is read-only (quote a column named so)")
    _check_functions(tokens)
    _check_table_references(tokens)
    return text.rstrip(";").strip()


def _tokens(text: str) -> list[tuple[str, str]]:
    """(text, kind) per DuckDB token, comments dropped; keywords lower-cased."""
    spans = duckdb.tokenize(text)
    tokens = []
    for index, (start, kind) in enumerate(spans):
        end = spans[index + 1][0] if index + 1 < len(spans) else len(text)
        word = text[start:end].strip()
        name = kind.name if hasattr(kind, "name") else str(kind).rsplit(".", 1)[-1]
        if name == "comment":
            continue
        if name == "operator" and len(word) > 1 and word[0] in "(),;":
            # The tokenizer may return several punctuation characters as one operator token.
            tokens.extend((char, "operator") for char in word if not char.isspace())
            continue
        tokens.append((word.lower() if name == "keyword" else word, name))
    return tokens


def _identifier(word: str) -> str:
    if len(word) >= 2 and word[0] == word[-1] == '"':
        return word[1:-1].replace('""', '"').lower()
    return word.lower()


def _check_functions(tokens: list[tuple[str, str]]) -> None:
    for index, (word, kind) in enumerate(tokens[:-1]):
        if kind not in ("identifier", "keyword") or tokens[index + 1][0] != "(":
            continue
        name = _identifier(word).rsplit(".", 1)[-1]
        if name in _REFUSED_FUNCTIONS or name.startswith(_REFUSED_PREFIXES):
            raise UsageError(
                f"{name}() is refused: the console reads only the database (no files, URLs or environment)"
            )


def _check_table_references(tokens: list[tuple[str, str]]) -> None:
    """Refuse a string or a path-like quoted name used as a table: DuckDB would read that file."""
    in_from = [False]  # per parenthesis depth
    expect_table = False
    for word, kind in tokens:
        if word == "(":
            in_from.append(False)
            expect_table = False
            continue
        if word == ")":
            if len(in_from) > 1:
                in_from.pop()
            expect_table = False
            continue
        if kind == "keyword" and word in _TABLE_KEYWORDS:
            in_from[-1] = True
            expect_table = True
            continue
        if kind == "keyword" and word in _CLAUSE_KEYWORDS:
            in_from[-1] = False
            expect_table = False
            continue
        if word == "," and in_from[-1]:
            expect_table = True
            continue
        if expect_table:
            looks_like_file = kind == "string_const" or (
                kind == "identifier" and word.startswith('"') and any(c in word for c in "./\\:")
            )
            if looks_like_file:
                raise UsageError(
                    f"reading the file {word} is refused: the console reads only the database's tables"
                )
        expect_table = False


def _pragma_name(tokens: list[tuple[str, str]]) -> str | None:
    for index, (word, kind) in enumerate(tokens):
        if kind == "keyword" and word == "pragma" and index + 1 < len(tokens):
            return _identifier(tokens[index + 1][0])
    return None


def _statement_label(kind: str, words: list[str]) -> str:
    # The statement's first keyword says best what the user typed (CHECKPOINT parses as CALL, USE as SET);
    # after a WITH's common table expressions, the statement's own kind does (WITH x AS (...) INSERT ...)
    if words[:1] == ["with"] and kind != "SELECT":
        return kind.replace("_", " ")
    label = words[0].upper() if words else kind.replace("_", " ")
    return f"{label} (changing a setting)" if kind == "SET" else label
