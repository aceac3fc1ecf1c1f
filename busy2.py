import sys, os; sys.path.insert(0,'/tmp/h5')
from at import run_page
for page, db in (("pages/run.py","/tmp/h5/a.duckdb"), ("pages/overview.py", "/tmp/h5/empty_new.duckdb")):
    at = run_page(page, db=db)
    for w in at.warning: print(page, "[warning]", repr(w.value[:300]))
