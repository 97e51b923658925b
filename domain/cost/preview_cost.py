"""The cost figures a `pulumi preview` resolved at the prices of the stack's region, in a file for the pull-request
comment (reports/preview_comment.py): the workflow's preview step names the file in GPULAB_PREVIEW_COST, the program
writes it once AWS has answered its price look-ups (program.py), and the comment's cost tables read it instead of
the offline render's figures at the us-east-1 list (docs/cost.md, "In a pull request").

Only figures made from price look-ups, which a preview resolves (the Price List and spot look-ups are invokes, answered
at preview): never a resource's id or name, which a preview may not know, and an apply over an unknown value does not
run at preview (pulumi 3.272.0, the version requirements.txt pins, sdk/python/lib/pulumi/output.py `Output.apply`:
"Only perform the apply if the engine was able to give us an actual value", CONFIRMED in the installed package). The
file has the render's outputs.json shape for these keys (`cost`, `labs.<lab>.cost`), beside the `region` priced and
the prices themselves (`book`), at which the comment makes the whole stack's table as the render makes it at the list.
"""

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeGuard

from domain.cost.price_book import Gp3, MeterPrices, Origin, PriceBook, SpotPrice

ENV = "GPULAB_PREVIEW_COST"


def write(
    path: Path,
    region: str,
    cluster: str,
    book: PriceBook,
    found: tuple[Mapping[str, Mapping[str, Any]], Mapping[str, Any]],
) -> None:
    """Writes `found` (each lab's `cost` output and the stack's, program.py figures) priced in `region` at `book` to
    `path`, its directory made if need be: a preview whose render failed must not fail for want of it. `cluster` is
    the cluster's name as the stack configures it (known at preview): a reader tells one stack's file from another's by
    it, as by the outputs' clusterName."""
    labs, stack = found
    path.parent.mkdir(parents=True, exist_ok=True)
    figures = {
        "region": region,
        "clusterName": cluster,
        "book": book_output(book),
        "cost": stack,
        "labs": {name: {"cost": cost} for name, cost in labs.items()},
    }
    path.write_text(json.dumps(figures, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


def read(path: Path | None) -> dict[str, Any] | None:
    """The figures at `path`; None without a path or without the file (the preview did not run, failed before its
    prices were known, or ran from a fork without credentials)."""
    if path is None or not path.is_file():
        return None
    figures: dict[str, Any] = json.loads(path.read_text())
    return figures


def is_written(found: object) -> TypeGuard[dict[str, Any]]:
    """Whether `found` (a JSON file's content) has the shape `write` gives the file: the `region` priced and its prices
    (`book`) beside the labs' figures. A stack's outputs have neither `region` nor `book` at the top (program.py
    exports), so a reader that takes both (rehearsal/spot.py, `rehearse --prices`) tells them apart by this; both have
    the labs' figures at `labs.<lab>.cost`."""
    return (
        isinstance(found, dict)
        and isinstance(found.get("region"), str)
        and isinstance(found.get("book"), dict)
        and isinstance(found.get("labs"), dict)
    )


def book_output(book: PriceBook) -> dict[str, Any]:
    """The prices as JSON: each field of PriceBook by its name."""
    return {
        "region": book.region,
        "live": book.live,
        "source": book.source,
        "on_demand": dict(book.on_demand),
        "missing": dict(book.missing),
        "spot": {kind: {zone: asdict(price) for zone, price in zones.items()} for kind, zones in book.spot.items()},
        "gp3": asdict(book.gp3),
        "gp3_from": asdict(book.gp3_from),
        "clb_per_hour": book.clb_per_hour,
        "clb_per_gb": book.clb_per_gb,
        "clb_from": asdict(book.clb_from),
        "eks_per_hour": dict(book.eks_per_hour),
        "eks_from": asdict(book.eks_from),
        "meter": asdict(book.meter),
    }


def book_from(found: Mapping[str, Any]) -> PriceBook:
    """The prices book_output wrote."""
    return PriceBook(
        region=found["region"],
        live=found["live"],
        source=found["source"],
        on_demand=found["on_demand"],
        missing=found["missing"],
        spot={kind: {zone: SpotPrice(**p) for zone, p in zones.items()} for kind, zones in found["spot"].items()},
        gp3=Gp3(**found["gp3"]),
        gp3_from=Origin(**found["gp3_from"]),
        clb_per_hour=found["clb_per_hour"],
        clb_per_gb=found["clb_per_gb"],
        clb_from=Origin(**found["clb_from"]),
        eks_per_hour=found["eks_per_hour"],
        eks_from=Origin(**found["eks_from"]),
        meter=MeterPrices(**found["meter"]),
    )
