"""The Run page's data fields: what a profile reads (JPEG images it generates once, a data set folder, or
nothing), the size of the generated images, and the loader processes that read and decode them."""

import streamlit as st

from pages._run_model import number_field
from stash_core.views.run_form import FIRST_SYNTHETIC_IMAGES

DATA_SOURCES = {
    "synthetic": "Synthetic images (JPEG files made once)",
    "dataset": "A data set folder (one sub-folder per class)",
    "none": "None (batches made on the device: compute and interconnect only)",
}


def data_fields() -> dict:
    """The data source and its settings, as RunForm's fields (a setting the source does not use is left out,
    so it keeps the spec's default)."""
    source = st.radio("Data", list(DATA_SOURCES), format_func=DATA_SOURCES.get, key="run-data",
                      persist_state="session")  # fmt: skip
    if source == "none":
        return {"data_source": source}
    cols = st.columns([1, 1, 1] if source == "synthetic" else [2, 1])
    if source == "synthetic":
        fields = {
            "synthetic_images": number_field(
                cols[0], "Number of images", "synthetic_images", FIRST_SYNTHETIC_IMAGES, key="run-images"
            ),
            "image_px": number_field(cols[1], "Image side (px)", "image_px", key="run-image-px",
                                     help="each generated image is a square JPEG of this side"),
        }  # fmt: skip
    else:
        fields = {"dataset": cols[0].text_input("Data set folder", placeholder="/data/imagenet/train",
                                                key="run-dataset", persist_state="session")}  # fmt: skip
    fields["loader_workers"] = number_field(
        cols[-1], "Loader processes per worker", "loader_workers", key="run-loader",
        help="DataLoader processes that read and decode the data for each worker; 0: the worker itself",
    )  # fmt: skip
    return {"data_source": source, **fields}
