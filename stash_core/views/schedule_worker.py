"""The Schedule page's simulation in a process of its own (views/schedule.py's simulate_within_limit), so that
the page can stop it at its time limit: reads the request (simulate's keywords, uploads as files) as JSON on
stdin and writes one JSON line on stdout, {"doc": ...} or {"error": "<one line>"}."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from stash_core.errors import UsageError
from stash_core.proc import end_with_parent
from stash_core.views import schedule


def main() -> int:
    end_with_parent()  # a dashboard server that dies (or is killed) takes its simulation with it
    request = json.loads(sys.stdin.read())
    files = request.pop("files")
    uploads = None if files is None else [(name, Path(path).read_bytes()) for name, path in files]
    request["cluster"] = tuple(request["cluster"])
    try:
        doc = schedule.simulate(request.pop("db"), files=uploads, **request)
    except UsageError as exc:
        print(json.dumps({"error": str(exc)}))
        return 0
    print(json.dumps({"doc": doc}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
