"""The prices the workspace's rules count a lab's nodes at (gpulab:instance_price_usd_per_hour; through it the spend
the hub's spend gate and the budget alerts add up, and what each lab's GPU limit costs per hour): the on-demand prices
of the stack's region where the program read them (`pulumi preview`, `pulumi up`: components/live_prices.py), else
domain/cost/prices.py's us-east-1 list (the render, the tests), each said in the alerts' descriptions.

The rule file holds prices, not the day they were read: the Price List API answers the same on-demand prices from one
preview to the next until AWS changes them, so the workspace's rules change only then (a preview's date is in the
book's source, which the rule file leaves out).

A spot node is counted at on-demand, as before: EC2's spot prices move every few minutes (DescribeSpotPriceHistory's
entries, components/live_prices.py), so a rule file carrying them would change at every preview and be rewritten at
every `pulumi up`, and a price written at an up is wrong minutes later, for every minute the meter then records.
On-demand is what Karpenter itself prices a spot offering at before its first spot update (price_book.py
SPOT_AT_ON_DEMAND) and an upper bound of what a spot node is billed in practice, so the gate stops a lab early rather
than late (that EC2 Fleet never bills a spot node above on-demand was not confirmed here).
"""

import dataclasses
from types import MappingProxyType

from domain.cost.price_book import LIST, PriceBook


def rule_book(book: PriceBook, stack_region: str) -> PriceBook:
    """`book`'s on-demand prices as the rules count them, `source` saying where from without a date: a type the
    region's Price List has no price for at the us-east-1 list, named; offline the list, said so where the stack is
    elsewhere. No spot prices."""
    if book.live:
        borrowed = sorted(t for t in book.missing if t in LIST.on_demand)
        source = f"{book.region} on-demand prices (AWS Price List API, as `pulumi up` read them)" + (
            f"; {', '.join(borrowed)} at the {LIST.region} list ({LIST.source}): no {book.region} price"
            if borrowed
            else ""
        )
        on_demand = {**{t: LIST.on_demand[t] for t in borrowed}, **book.on_demand}
    else:
        source = book.source + (
            f", not {stack_region}'s: the render has no {stack_region} prices; `pulumi up` writes {stack_region}'s"
            if book.region != stack_region
            else ""
        )
        on_demand = dict(book.on_demand)
    return dataclasses.replace(
        book, source=source, on_demand=MappingProxyType(on_demand), missing=MappingProxyType({}), spot={}
    )
