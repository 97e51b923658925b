"""`helm template`, answered from a cache of earlier results where `$GPULAB_HELM_CACHE` names one, and run many
times in one process where `$GPULAB_HELM_BATCH` names helm-batch (devtools/helmbatch).

helm gives the same result for the same inputs: its binary, the chart's files, its arguments and the values on stdin
(the render's stand-ins for the random values a chart makes up keep that true of every chart here, and
tests/test_render.py renders each stack twice without the cache to show it). So a result is kept under the digest of
all four, and found again only for exactly those inputs. The tests set the cache (tests/conftest.py): their check that
every Helm value is read templates each release several hundred times, nearly all with the inputs of the last run.
Without `$GPULAB_HELM_CACHE`, as for the render, every call runs helm.

helm-batch is helm's own `helm template` (the pinned helm's Go module), many calls in one process: a helm process spent
most of a run of these charts starting up. The tests use it where `make test` built it; it answers each call as the
helm binary does (tests/test_helm_batch.py), and its results are kept under its own digest.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple, cast


class Call(NamedTuple):
    """`helm template <arguments>` of the chart folder (named in `arguments`), with `values` on stdin."""

    chart: Path
    arguments: list[str]
    values: str


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def template(helm: Path, call: Call) -> Result:
    (result,) = template_all(helm, [call])
    return result


def template_all(helm: Path, calls: Sequence[Call]) -> list[Result]:
    """The Result of each call: those the cache holds from it, the others run two at a time, each half of them in one
    helm-batch process where `$GPULAB_HELM_BATCH` names one, else in one helm process per call."""
    batch = os.environ.get("GPULAB_HELM_BATCH")
    binary = Path(batch) if batch else helm
    folder = os.environ.get("GPULAB_HELM_CACHE")
    entries = [_entry(Path(folder).expanduser(), binary, call) if folder else None for call in calls]
    results: list[Result | None] = [_cached(entry) for entry in entries]
    missing = [i for i, result in enumerate(results) if result is None]
    # Two at a time keeps both cores busy.
    halves = [missing[0::2], missing[1::2]]
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = pool.map(lambda half: _run_all(binary, bool(batch), [calls[i] for i in half]), halves)
    for half, answers in zip(halves, done, strict=True):
        for i, result in zip(half, answers, strict=True):
            results[i] = result
            if (entry := entries[i]) is not None:
                _keep(entry, result)
    assert None not in results
    return cast(list[Result], results)


def _entry(folder: Path, binary: Path, call: Call) -> Path:
    chart, arguments, values = call
    # The paths of the binary and the chart stand for their content, which the digest holds instead.
    inputs = [_file_digest(binary), _folder_digest(chart), [a for a in arguments if a != str(chart)], values]
    return folder / f"{hashlib.sha256(json.dumps(inputs).encode()).hexdigest()}.json.gz"


def _cached(entry: Path | None) -> Result | None:
    if entry is None:
        return None
    try:
        return Result(*json.loads(gzip.decompress(entry.read_bytes())))
    except (OSError, EOFError, ValueError, TypeError):  # not there yet, or cut short by a process that died writing it
        return None


def _keep(entry: Path, result: Result) -> None:
    entry.parent.mkdir(parents=True, exist_ok=True)
    # Written whole under another name first: test processes in parallel read and write the same entries.
    partial = entry.with_name(f"{entry.name}.{os.getpid()}")
    partial.write_bytes(gzip.compress(json.dumps(result).encode()))
    partial.replace(entry)


def _run_all(binary: Path, batch: bool, calls: list[Call]) -> list[Result]:
    if not batch:
        return [_run(binary, call.arguments, call.values) for call in calls]
    if not calls:
        return []
    requests = json.dumps([{"args": call.arguments, "stdin": call.values} for call in calls])
    done = subprocess.run([str(binary)], input=requests, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{binary} failed: {done.stderr.strip()}")
    # helm's output as text mode reads it from a helm process, with universal newlines: a template with CRLF line
    # ends (jupyterhub's image-puller ServiceAccount) comes out with LF.
    return [Result(r["returncode"], _newlines(r["stdout"]), _newlines(r["stderr"])) for r in json.loads(done.stdout)]


def _newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


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
