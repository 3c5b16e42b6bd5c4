"""A resumable batch in local mode: three inputs, one bad line, the same batch again, a mistyped id.

python examples/batch_local.py [FOLDER]
"""

import json
import sys
import tempfile
from pathlib import Path

import anyio

from toolbridge.batch import run_batch
from toolbridge.errors import ConfigError

MANIFEST = Path(__file__).parent / "manifests" / "batch-notes.yaml"


async def main(folder: Path) -> None:
    inputs = folder / "in.jsonl"
    inputs.write_text(
        '{"id": "a", "input": "Summarise"}\n"What is on the list?"\nnot json\n{"id": 7, "input": "x"}\n'
    )
    out = folder / "out.jsonl"
    summary = await run_batch(MANIFEST, inputs=inputs, out=out, batch_id="demo", new=True, concurrency=2)
    print(f"ran {summary.ran}: {summary.succeeded} succeeded, {summary.input_errors} input error")
    for item in sorted(map(json.loads, out.read_text().splitlines()), key=lambda x: x["line"]):
        print(item["line"], item["id"], item["outcome"], item["errorCode"] or item["text"])
    again = await run_batch(MANIFEST, inputs=inputs, out=out, batch_id="demo")
    print(f"resumed: ran {again.ran}, still {again.succeeded} succeeded")
    try:
        await run_batch(MANIFEST, inputs=inputs, out=out, batch_id="dmeo")  # a typo never starts a batch
    except ConfigError as exc:
        print(f"refused: {exc.code}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(main, Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp))
