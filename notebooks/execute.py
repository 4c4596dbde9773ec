# SPDX-License-Identifier: Apache-2.0
"""Execute the notebooks top to bottom and store them with their outputs.

    python notebooks/execute.py            # every notebook in this folder
    python notebooks/execute.py 02*.ipynb  # some of them

Each runs in a fresh Jupyter kernel of this interpreter, with the notebook's folder as working
directory; without a GPU the notebooks take their simulator / CPU paths (they say so). The hash
of the code cells is stored in the notebook's metadata (``numba_mathdx.source_sha256``), so a
test can tell a notebook whose code changed after it was executed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNEL = "numba-mathdx-notebooks"


def source_hash(nb) -> str:
    """SHA-256 of the notebook's code cells' sources, in order."""
    h = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            h.update(cell.source.encode() + b"\0")
    return h.hexdigest()


def kernel_spec(folder: Path) -> None:
    """Write a Jupyter kernel spec running this interpreter under ``folder/kernels/``."""
    spec = folder / "kernels" / KERNEL
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"})
    )


def execute(path: Path, timeout: int = 600):
    """Run ``path`` in a fresh kernel (JUPYTER_PATH must hold :func:`kernel_spec`'s folder) and
    return the executed notebook with the source hash in its metadata. Raises nbclient's
    CellExecutionError (the cell and its traceback) on the first failing cell."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    spec = nb.metadata.get("kernelspec")
    client = NotebookClient(
        nb,
        kernel_name=KERNEL,
        timeout=timeout,  # per cell: a cold cache compiles a descriptor in ~10 s, a GEMM link ~30 s
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    if spec is not None:  # keep the notebook's own kernelspec (python3), not the runner's
        nb.metadata["kernelspec"] = spec
    nb.metadata["numba_mathdx"] = {"source_sha256": source_hash(nb)}
    return nb


def main(argv: list[str]) -> int:
    import nbformat

    paths = [Path(a).resolve() for a in argv] or sorted(HERE.glob("*.ipynb"))
    with tempfile.TemporaryDirectory() as tmp:
        kernel_spec(Path(tmp))
        os.environ["JUPYTER_PATH"] = tmp
        os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        for path in paths:
            print(f"executing {path.name} ...", flush=True)
            nb = execute(path)
            nbformat.write(nb, path)
            print(f"stored {path.name} with its outputs", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
