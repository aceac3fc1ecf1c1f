import sys, os; sys.path.insert(0,'/tmp/h5')
from at import run_page
for page in ("pages/run.py", "pages/overview.py"):
    at = run_page(page, db="/tmp/h5/a.duckdb")
    for w in at.warning: print(page, "[warning]", repr(w.value[:400]))
