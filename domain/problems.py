"""A problem a check finds with a key of the stack file, and how a check reports several: the lowest floor of
domain/, so that a check on any floor (a class's calendar, a disk, a lab) reports at the key it names."""

from collections.abc import Sequence


class FieldProblem(ValueError):
    """A problem that a field validator finds with another key of its model: `key` is that key's path in the model
    (e.g. "schedule", "classes[1].warmSeats", "learnerPod.cpu"), where the message is reported."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


class Problems(ValueError):
    """Every problem one check found, each a line of its own: a FieldProblem at the key it names, any other ValueError
    at the key the check validates."""

    def __init__(self, problems: Sequence[ValueError]):
        super().__init__("; ".join(map(str, problems)))
        self.problems = list(problems)


def report(problems: Sequence[ValueError]) -> None:
    """Raises what a check found, if anything: one problem as itself, several as Problems."""
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise Problems(problems)
