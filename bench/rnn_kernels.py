"""Recurrent layers counted as cuDNN runs them (stash_core/decide/predict/rnn.py) against DeepBench's measured
cuDNN training layers on V100 (FP32 and FP16 with tensor-core math) and P100 (FP32): per GPU and precision,
and per layer kind, the mean absolute error of the forward, of the backward (data and weights) and of the
whole layer, the median signed error and the share within 25%. The step model's parameters are those fitted on
the published end-to-end figures; DeepBench's layers were used in no fit (rnn_validation.py).

    PYTHONPATH=. .venv/bin/python bench/rnn_kernels.py [--rows]
    PYTHONPATH=. .venv/bin/python bench/rnn_kernels.py --rebuild GIT_DIR   # rewrite the data from a snapshot

--rebuild reads the workbooks of a fetched baidu-research/DeepBench snapshot (a git directory) and rewrites
stash_core/decide/predict/kernel_data/deepbench_rnn.csv.
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile

from bench_args import bench_parser

from stash_core.decide.predict.rnn_validation import DATA_FILE, check_all, recurrent_error, summary
from stash_core.decide.predict.stated_error import fitted_params
from stash_core.userfiles import write_atomic

# workbook, sheet, Stash's precision, the catalog's accelerator, DeepBench's GPU and software
SHEETS = (
    ("results/train/DeepBench_NV_V100.xlsx", "Results FP32", "fp32", "V100 SXM2 16 GB", "V100 (cuDNN 7.6.2)"),
    ("results/train/DeepBench_NV_V100.xlsx", "Results - FP16 ip, Mixed math", "amp", "V100 SXM2 16 GB",
     "V100 (cuDNN 7.6.2)"),
    ("results/train/DeepBench_NV_P100.xlsx", "Results FP32", "fp32", "P100 PCIe 16 GB",
     "P100 (cuDNN 6.0.21)"),
)  # fmt: skip
KINDS = {"Vanilla": "rnn_relu", "LSTM": "lstm", "GRU": "gru"}
COLUMNS = ("gpu", "accelerator", "precision", "kind", "hidden", "batch", "steps", "forward_ms",
           "backward_data_ms", "backward_weights_ms", "source")  # fmt: skip
_NS = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"


def _sheet_rows(book: bytes, sheet: str) -> list[list[str | None]]:
    """The cells of one worksheet of an .xlsx, row by row (values as text, shared strings resolved)."""
    archive = zipfile.ZipFile(io.BytesIO(book))
    shared = []
    if "xl/sharedStrings.xml" in archive.namelist():
        for item in ET.fromstring(archive.read("xl/sharedStrings.xml")).iter(f"{_NS}si"):
            shared.append("".join(text.text or "" for text in item.iter(f"{_NS}t")))
    names = [
        entry.get("name") for entry in ET.fromstring(archive.read("xl/workbook.xml")).iter(f"{_NS}sheet")
    ]
    root = ET.fromstring(archive.read(f"xl/worksheets/sheet{names.index(sheet) + 1}.xml"))
    rows = []
    for row in root.iter(f"{_NS}row"):
        cells = []
        for cell in row.iter(f"{_NS}c"):
            value = cell.find(f"{_NS}v")
            text = None if value is None else value.text
            if cell.get("t") == "s" and text is not None:
                text = shared[int(text)]
            cells.append(text)
        rows.append(cells)
    return rows


def _layer_rows(rows: list[list[str | None]]) -> list[tuple[str, list[float]]]:
    """(kind, [hidden, N, timesteps, forward, backward data, backward weights]) of every measured layer."""
    out, kind = [], None
    for cells in rows:
        first = next((cell for cell in cells if cell), "")
        title = re.match(r"Recurrent Layers - (\w+)", first or "")
        if title:
            kind = KINDS[title.group(1)]
            continue
        if first and first.startswith("All-Reduce"):
            kind = None
        numbers = []
        for cell in cells:
            try:
                numbers.append(float(cell))
            except (TypeError, ValueError):
                continue
        if kind and len(numbers) >= 6 and all(value > 0 for value in numbers[:6]):
            out.append((kind, numbers[:6]))
    return out


def rebuild(git_dir: str) -> int:
    """Rewrite the data from the workbooks of a DeepBench snapshot; one line and exit status 1 when a workbook
    cannot be read (the data file is then left as it was)."""
    written = []
    for path, sheet, precision, accelerator, gpu in SHEETS:
        book = subprocess.run(["git", "-C", git_dir, "show", f"HEAD:{path}"], capture_output=True)
        if book.returncode != 0:
            reason = (book.stderr.decode(errors="replace").strip().splitlines() or ["git failed"])[-1]
            print(f"rnn_kernels.py: cannot read {path} in {git_dir}: {reason}")
            return 1
        try:
            layers = _layer_rows(_sheet_rows(book.stdout, sheet))
        except (KeyError, ValueError, zipfile.BadZipFile, ET.ParseError) as error:  # not the workbook it was
            print(f"rnn_kernels.py: cannot read sheet {sheet!r} of {path}: {type(error).__name__}: {error}")
            return 1
        if not layers:
            print(f"rnn_kernels.py: sheet {sheet!r} of {path} holds no recurrent layer; nothing written")
            return 1
        for kind, numbers in layers:
            hidden, batch, steps, forward, backward_data, backward_weights = numbers
            written.append((gpu, accelerator, precision, kind, int(hidden), int(batch), int(steps), forward,
                            backward_data, backward_weights, f"{path} ({sheet})"))  # fmt: skip
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    writer.writerows(written)
    write_atomic(DATA_FILE, text.getvalue(), "DeepBench's layers")
    print(f"{len(written)} layers written to {DATA_FILE}")
    return 0


def report(show_rows: bool = False) -> None:
    params = fitted_params()
    checked = check_all(params)
    print(f"step model: {params.fitted_on}; {len(checked)} DeepBench cuDNN layers, used in no fit")
    for title, key in (
        ("GPU, precision", lambda c: f"{c.row.gpu} {c.row.precision}"),
        ("GPU, precision, kind", lambda c: f"{c.row.gpu} {c.row.precision} {c.row.kind}"),
        ("all", lambda c: "all layers"),
    ):
        print(f"\nby {title}:")
        head = f"{'rows':>4} {'fwd MAE':>8} {'bwd MAE':>8} {'layer MAE':>9} {'median':>7} {'<=25%':>6}"
        print(f"  {'group':38} {head}")
        for group in summary(checked, key):
            print(
                f"  {group['group']:38} {group['rows']:4d} {group['forward_mae']:8.1%}"
                f" {group['backward_mae']:8.1%} {group['layer_mae']:9.1%} {group['layer_median']:+7.1%}"
                f" {group['within_25']:6.0%}"
            )
    print(f"\na recurrent step states at least {recurrent_error():.1%} (80% of these layers within it)")
    if show_rows:
        print(f"\n  {'GPU':22} {'prec':5} {'layer':22} {'fwd ms':>8} {'pred':>8} {'bwd ms':>8} {'pred':>8}")
        for item in checked:
            row = item.row
            print(
                f"  {row.gpu:22} {row.precision:5} {row.label:22} {row.forward_ms:8.2f}"
                f" {item.predicted['forward']:8.2f} {row.backward_ms:8.2f} {item.predicted['backward']:8.2f}"
            )


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--rows", action="store_true", help="print every layer")
    parser.add_argument("--rebuild", metavar="GIT_DIR", help="rewrite the data from a DeepBench snapshot")
    args = parser.parse_args()
    if args.rebuild:
        return rebuild(args.rebuild)
    report(args.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
