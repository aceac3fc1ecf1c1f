"""The data side of a profile: prepare the data set; set its page-cache state before each real-data run."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from stash_core.analysis.epochs import iterations_per_epoch as per_epoch
from stash_core.data import pagecache
from stash_core.data.dataset_dir import unreadable_files
from stash_core.data.diskcap import DiskReadCap
from stash_core.data.tree import files_under
from stash_core.engine.plan import PhasePlan
from stash_core.engine.progress import Reporter
from stash_core.errors import UsageError
from stash_core.spec import ProfileSpec
from stash_core.terminal import one_line

# A cached run needs (almost) all of the data set in memory to measure the CPU stall alone.
MIN_CACHED_RESIDENT_FRACTION = 0.95
# A cold run that starts with more than this share of the data set cached times memory, not the disk.
MAX_COLD_RESIDENT_FRACTION = 0.5


@dataclass
class DataSetup:
    root: Path | None = None
    files: list[Path] = field(default_factory=list)
    total_bytes: int = 0
    images: int | None = None
    bad_files: list[str] = field(default_factory=list)
    not_separable_reason: str | None = None
    classes: int = 0  # class folders of the data set (labels run 0..classes-1)
    warnings: list[str] = field(default_factory=list)  # what the data set's check found, for the result


def prepare_data(spec: ProfileSpec, model_kind: str, reporter: Reporter) -> DataSetup:
    """Find or make the data set, drop corrupt files, and check that it can be cached."""
    if spec.script:
        return script_data(spec)
    if not spec.real_data:
        if spec.dataset_images is not None and spec.dataset_images // spec.workers_total < spec.batch_size:
            # an epoch of it would hold no full step (the last partial batch is dropped)
            raise UsageError(
                f"--dataset-images {spec.dataset_images}: too few for {spec.workers_total} worker(s) x batch "
                f"size {spec.batch_size} (an epoch would hold no full step)"
            )
        return DataSetup(images=spec.dataset_images)

    if not spec.dataset and spec.synthetic_images // spec.workers_total < spec.batch_size:
        # refused before any is made: the data set would be written, then found too small
        raise UsageError(
            f"--synthetic-images {spec.synthetic_images}: too few for {spec.workers_total} worker(s) x batch "
            f"size {spec.batch_size}"
        )
    if spec.dataset:
        root = Path(spec.dataset).resolve()
    elif model_kind == "tokens":
        from stash_core.data.text_dataset import generate_synthetic_text

        reporter.message(f"preparing a synthetic text data set of {spec.synthetic_images} documents"
                         f"{_kept_in()}")  # fmt: skip
        root = generate_synthetic_text(spec.synthetic_images, seed=spec.seed)
    else:
        from stash_core.data.jpeg_dataset import generate_synthetic_jpegs

        reporter.message(f"preparing {spec.synthetic_images} synthetic JPEG images ({spec.image_px} px)"
                         f"{_kept_in()}")  # fmt: skip
        root = generate_synthetic_jpegs(spec.synthetic_images, image_px=spec.image_px, seed=spec.seed)
    setup = DataSetup(root=root)
    if model_kind == "tokens":
        from stash_core.data.text_dataset import TextFolderDataset

        dataset = TextFolderDataset(root, seq_len=8, vocab_size=100)
        refuse_unreadable(dataset.files, root)
    else:
        from stash_core.data.image_check import validate_images
        from stash_core.data.jpeg_dataset import ImageFolderDataset

        dataset = ImageFolderDataset(root, transform=None)
        check = validate_images(dataset)
        setup.bad_files = sorted(str(path) for paths in check.dropped.values() for path in paths)
        for line in check.messages():  # said now, and kept in the result's warnings
            reporter.message(line)
            setup.warnings.append(line)
    setup.files = list(dataset.files)
    setup.classes = len(dataset.classes)
    setup.images = len(setup.files)
    if setup.images // spec.workers_total < spec.batch_size:
        raise UsageError(
            f"the data set has {setup.images} usable samples: too few for {spec.workers_total} worker(s) "
            f"x batch size {spec.batch_size}"
        )
    setup.total_bytes = sum(path.stat().st_size for path in setup.files)
    if not pagecache.fits_in_memory(setup.total_bytes):
        available = pagecache.available_memory_bytes()
        setup.not_separable_reason = (
            f"the data set ({setup.total_bytes / 1e9:.1f} GB) does not fit in available memory "
            f"({available / 1e9:.1f} GB), so it cannot be measured fully cached"
        )
    return setup


def refuse_unreadable(files: list[Path], root: Path) -> None:
    """A text data set's files that cannot be read, refused in one line before any run (a worker found them
    in the middle of one and blamed a change of the data set)."""
    unreadable = unreadable_files(files)
    if unreadable:
        path, why = unreadable[0]
        raise UsageError(
            f"{len(unreadable)} of {len(files)} text files under {root} cannot be read, e.g. "
            f"{one_line(path.relative_to(root) if path.is_relative_to(root) else path)}: {why}"
        )


VIRTUAL_TOPS = ("/proc", "/sys", "/dev")  # the kernel's own file systems, not data on a disk


def script_data(spec: ProfileSpec) -> DataSetup:
    """A script reads its own data: the files under --data-dir are what the page cache is set for."""
    from stash_core.engine.script_job import NO_DATA_DIR

    if not spec.data_dir:
        return DataSetup(images=spec.dataset_images, not_separable_reason=NO_DATA_DIR)
    root = Path(spec.data_dir)
    setup = DataSetup(root=root, images=spec.dataset_images)
    real = os.path.realpath(root)
    if any(real == top or real.startswith(top + os.sep) for top in VIRTUAL_TOPS):  # files that never end
        raise UsageError(f"--data-dir {one_line(root)} is a virtual file system (no disk holds files "
                         "there): give the folder the script reads its data from")  # fmt: skip
    try:
        setup.files = files_under(root)
        setup.total_bytes = sum(path.stat().st_size for path in setup.files)
    except OSError as exc:  # a folder under it this user may not look into (--data-dir / reaches /proc)
        reason = (exc.strerror or str(exc)).lower()
        raise UsageError(f"--data-dir {one_line(root)}: cannot look at {one_line(exc.filename or root)}: "
                         f"{reason}") from None  # fmt: skip
    if not setup.files:
        raise UsageError(f"--data-dir {root}: no files in it")
    if not pagecache.fits_in_memory(setup.total_bytes):
        setup.not_separable_reason = (
            f"the files of --data-dir ({setup.total_bytes / 1e9:.1f} GB) do not fit in available memory, "
            "so they cannot be measured fully cached"
        )
    return setup


def iterations_per_epoch(spec: ProfileSpec, doc: dict) -> int | None:
    """Synchronous steps per epoch of the profiled job: its image data set's full batches per worker, or for
    a script the optimizer steps per epoch its own DataLoader gave in the runs of all the job's workers (a
    DistributedSampler's share depends on them); None when not known."""
    if spec.script is not None:
        return _script_iterations_per_epoch(doc.get("phases") or [], spec.workers_total)
    images = doc["spec"].get("dataset_images")
    if not images or not spec.batch_size:
        return None
    return per_epoch(images, spec.batch_size, spec.workers_total)


def _script_iterations_per_epoch(records: list[dict], workers_total: int) -> int | None:
    found = Counter(
        (record.get("script") or {}).get("iterations_per_epoch")
        for record in records
        # a record's workers are every machine's
        if record.get("status") == "completed" and record.get("workers") == workers_total
    )
    found.pop(None, None)
    return found.most_common(1)[0][0] if found else None


def set_cache_state(plan: PhasePlan, data: DataSetup, warnings: list[str]) -> float:
    """Make the data set resident (cached run) or evict exactly its files (cold run); measure it."""

    if plan.data == "cached":
        pagecache.make_resident(data.files)
    else:
        pagecache.evict(data.files)
    fraction = pagecache.resident_fraction(data.files)
    if plan.data == "cached" and fraction < MIN_CACHED_RESIDENT_FRACTION:
        warnings.append(f"{plan.name}: only {fraction:.0%} of the data set stayed in the page cache")
    if plan.data == "cold" and fraction > 1 - MIN_CACHED_RESIDENT_FRACTION:
        warnings.append(f"{plan.name}: {fraction:.0%} of the data set was still cached after eviction")
    return fraction


class disk_cap:
    """Context manager giving a preexec function that puts the run in a read-throttled cgroup."""

    def __init__(self, spec: ProfileSpec, plan: PhasePlan, data: DataSetup) -> None:
        self.active = spec.disk_read_mbps is not None and plan.data != "synthetic"
        self.spec, self.data, self.cap = spec, data, None

    def __enter__(self):
        if not self.active:
            return None

        self.cap = DiskReadCap(self.data.root, self.spec.disk_read_mbps)
        self.cap.__enter__()
        cap = self.cap
        return lambda: cap.add_pid(os.getpid())

    def __exit__(self, *exc_info) -> None:
        if self.cap is not None:
            self.cap.__exit__(*exc_info)


def check_remote_cache_state(plan: PhasePlan, fraction: float | None, warnings: list[str]) -> None:
    if fraction is None:
        return
    if plan.data == "cached" and fraction < MIN_CACHED_RESIDENT_FRACTION:
        warnings.append(f"{plan.name}: only {fraction:.0%} of the data set stayed in the page cache")
    if plan.data == "cold" and fraction > 1 - MIN_CACHED_RESIDENT_FRACTION:
        warnings.append(f"{plan.name}: {fraction:.0%} of the data set was still cached after eviction")


def started_cached(record: dict) -> bool | None:
    """Whether a cold run's data was still in the page cache at the start of a launch of it (as its warning
    says: more than 1 - MIN_CACHED_RESIDENT_FRACTION of the data set); None where no share was measured."""
    known = _start_fractions(record)
    return max(known) > 1 - MIN_CACHED_RESIDENT_FRACTION if known else None


def _start_fractions(record: dict) -> list[float]:
    """The share of the data set cached at the start of each pooled launch of a run (the record's own where
    it has no launches), where measured."""
    launches = [launch for launch in record.get("launches") or [record] if launch.get("pooled", True)]
    fractions = [launch.get("resident_fraction_start") for launch in launches]
    return [fraction for fraction in fractions if isinstance(fraction, (int, float))]


def cold_start_cached(fractions: Iterable[float | None]) -> float | None:
    """The largest share of the data set cached at the start of the cold run's launches, when it is more than
    MAX_COLD_RESIDENT_FRACTION (the disk stall is then not separable); else None."""
    known = [fraction for fraction in fractions if isinstance(fraction, (int, float))]
    return max(known) if known and max(known) > MAX_COLD_RESIDENT_FRACTION else None


def cold_run_not_separable(doc: dict) -> dict[str, str]:
    """{"disk": why} when the cold run R2 started (mostly) with its data in the page cache, in any launch:
    its time is then that of reads from memory, and the disk stall would be a figure of nothing."""
    cached = cold_start_cached(
        fraction
        for record in doc.get("phases") or []
        if record.get("name") == "R2" and record.get("status") == "completed"
        for fraction in _start_fractions(record)
    )
    if cached is None:
        return {}
    dataset = (doc.get("spec") or {}).get("dataset")
    local = "hosts" not in doc
    filesystem = pagecache.memory_filesystem(dataset) if dataset and local else None
    cause = (
        f"the data set is on {filesystem}, which keeps its files in memory"
        if filesystem
        else "its pages could not be evicted (held by another process, or a file system that keeps them "
        "in memory)"
    )
    return {
        "disk": f"the cold run (R2) started with {cached:.0%} of the data set in the page cache: "
        f"{cause}, so R2 read from memory, not from the disk"
    }


def _kept_in() -> str:
    """Where a generated data set is kept (docs/commands.md says how to reclaim the space)."""
    from stash_core.pathargs import dataset_cache_root

    return f" in {dataset_cache_root()} (kept for the next profile)"
