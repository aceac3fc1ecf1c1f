"""A name (a column, a table, a database) written into SQL text as a quoted identifier."""


def quoted_name(name: str) -> str:
    """`name` between double quotes, each double quote in it doubled: any text stays one name."""
    return '"' + name.replace('"', '""') + '"'
