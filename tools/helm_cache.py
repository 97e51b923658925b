"""`helm template`, answered from a cache of earlier results where `$GPULAB_HELM_CACHE` names one.

helm gives the same result for the same inputs: its binary, the chart's files, its arguments and the values on stdin
(the render's stand-ins for the random values a chart makes up keep that true of every chart here, and
tests/test_render.py renders each stack twice without the cache to show it). So a result is kept under the digest of
all four, and found again only for exactly those inputs. The tests set the cache (tests/conftest.py): their check that
every Helm value is read templates each release several hundred times, nearly all with the inputs of the last run.
Without `$GPULAB_HELM_CACHE`, as for the render, every call runs helm.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import NamedTuple


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def template(helm: Path, chart: Path, arguments: list[str], values: str) -> Result:
    """`helm template <arguments>` of the chart folder (named in `arguments`), with `values` on stdin."""
    folder = os.environ.get("GPULAB_HELM_CACHE")
    if not folder:
        return _run(helm, arguments, values)
    # The paths of the binary and the chart stand for their content, which the digest holds instead.
    inputs = [_file_digest(helm), _folder_digest(chart), [a for a in arguments if a != str(chart)], values]
    entry = Path(folder).expanduser() / f"{hashlib.sha256(json.dumps(inputs).encode()).hexdigest()}.json.gz"
    try:
        return Result(*json.loads(gzip.decompress(entry.read_bytes())))
    except (OSError, EOFError, ValueError, TypeError):  # not there yet, or cut short by a process that died writing it
        pass
    result = _run(helm, arguments, values)
    entry.parent.mkdir(parents=True, exist_ok=True)
    # Written whole under another name first: test processes in parallel read and write the same entries.
    partial = entry.with_name(f"{entry.name}.{os.getpid()}")
    partial.write_bytes(gzip.compress(json.dumps(result).encode()))
    partial.replace(entry)
    return result


def _run(helm: Path, arguments: list[str], values: str) -> Result:
    done = subprocess.run([str(helm), *arguments], input=values, capture_output=True, text=True, check=False)
    return Result(done.returncode, done.stdout, done.stderr)


@functools.cache
def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@functools.cache
def _folder_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        digest.update(f"{path.relative_to(folder)}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()
