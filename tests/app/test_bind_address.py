"""The dashboard binds 127.0.0.1 whatever folder `streamlit run app.py` is started in: Streamlit reads the
.streamlit/config.toml beside the script (docs/dashboard.md says so)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import REPO

READ_ADDRESS = (
    "import sys\n"
    "from streamlit import config\n"
    "config._main_script_path = sys.argv[1]\n"
    "print(config.get_option('server.address'))\n"
)


def test_started_from_another_folder_it_still_binds_this_machine_only(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", READ_ADDRESS, str(REPO / "app.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert done.stdout.strip() == "127.0.0.1"
