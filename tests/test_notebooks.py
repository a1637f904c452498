"""Every notebook under notebooks/ runs top to bottom, offline, in a fresh kernel, and
prints what only comes out when BeeWeave did its part."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT = 300  # seconds per cell: the first one loads tokenizer + embedding model
#: Per notebook, what its printed output must show.  Each line depends on BeeWeave's own
#: work, not on the scripted (fake) models: a value linked between tool calls, a thread
#: restored from the checkpointer after reopening, a fact recalled from another session.
EXPECTED = {
    "langchain_quickstart": [
        r"refund arguments reuse values from: \[.*CUST-8812",
        r"\d+ messages restored; first: Please refund order ORD-11499\.",
    ],
    "llamaindex_quickstart": [
        r"250 EUR is 270\.00 USD; with 20% tax: 324\.00 USD\.",
        r"(?m)^Parquet, partitioned by month\.$",
        r"recalled from session planning",
    ],
}


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ is empty"
    assert {p.stem for p in NOTEBOOKS} == set(EXPECTED), "say what each notebook must print"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_offline(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # the kernel inherits this environment: its data goes to a temp home, and nothing
    # may reach out to the network (model hubs, telemetry)
    monkeypatch.setenv("BEEWEAVE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ANONYMIZED_TELEMETRY", "False")
    monkeypatch.setenv("PYTHONWARNINGS", "ignore")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})  # fmt: skip
    client.execute()  # raises CellExecutionError with the failing cell's traceback
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]  # fmt: skip
    assert not errors
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.get("outputs", []) if o.get("output_type") == "stream")  # fmt: skip
    missing = [p for p in EXPECTED[path.stem] if not re.search(p, printed)]
    assert not missing, f"{path.name} did not print {missing}:\n{printed}"
