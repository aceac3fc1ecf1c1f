"""A worker's job on its command line: the JSON that says what one run measures, inline or compressed."""

from __future__ import annotations

import argparse
import base64
import json
import zlib


def encode_worker_job(job: dict) -> list[str]:
    """Worker arguments carrying `job`: inline JSON, compressed when long (an argument holds <= 128 KiB)."""
    text = json.dumps(job, separators=(",", ":"))
    if len(text) <= 32_000:
        return ["--job-json", text]
    packed = base64.b64encode(zlib.compress(text.encode(), 9)).decode("ascii")
    return ["--job-zb64", packed]


def read_worker_job(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="stash_core.measure")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--job", help="JSON file describing the run")
    source.add_argument("--job-json", help="the job as JSON text")
    source.add_argument("--job-zb64", help="the job as zlib-compressed, base64-encoded JSON")
    args = parser.parse_args(argv)
    if args.job:
        with open(args.job) as handle:
            return json.load(handle)
    if args.job_json:
        return json.loads(args.job_json)
    return json.loads(zlib.decompress(base64.b64decode(args.job_zb64)))
