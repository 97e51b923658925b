"""The AWS calls of gpulab's read-only reports (reports/preflight.py, reports/reconcile.py), asked of AWS through boto3
or answered from a file of recorded answers (`--aws-answers FILE`, which the tests use: no test calls AWS).

A file of answers is JSON keyed by call and argument, `{"<call>": {"<key>": <answer>}}`, each answer as AWS returns it
or `{"Error": {"Code": ..., "Message": ...}}`. boto3 is imported only without one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

# A call as boto3 makes it: (boto3 client, its method, the parameters from the call's key).
Call = tuple[str, str, Callable[[str], dict[str, Any]]]


class AwsError(Exception):
    """AWS refused a call (or there are no credentials): its error code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class Aws(Protocol):
    def call(self, operation: str, key: str) -> dict[str, Any]: ...


@dataclass
class Recorded:
    """Answers from a file: {"<call>": {"<key>": <answer>}}; the caller's identity's key is ""."""

    answers: Mapping[str, Mapping[str, Any]]
    source: str

    def call(self, operation: str, key: str) -> dict[str, Any]:
        try:
            answer = self.answers[operation][key]
        except KeyError:
            raise AwsError("NotRecorded", f"{self.source} has no answer to {operation} {key!r}") from None
        if "Error" in answer:
            raise AwsError(answer["Error"]["Code"], answer["Error"]["Message"])
        return dict(answer)


class Boto3:
    """AWS itself, with the credentials boto3 finds (environment, profile, SSO, instance role), for the `calls` a
    report makes."""

    def __init__(self, region: str, calls: Mapping[str, Call]) -> None:
        import boto3  # only here: the recorded answers need no AWS SDK
        import botocore.exceptions

        self.session = boto3.Session(region_name=region)
        self.errors = botocore.exceptions
        self.calls = calls
        self.clients: dict[str, Any] = {}

    def call(self, operation: str, key: str) -> dict[str, Any]:
        service, method, parameters = self.calls[operation]
        try:
            client = self.clients.setdefault(service, self.session.client(service))
            answer: dict[str, Any] = getattr(client, method)(**parameters(key))
        except self.errors.ClientError as error:
            raise AwsError(error.response["Error"]["Code"], error.response["Error"]["Message"]) from None
        except self.errors.BotoCoreError as error:  # no credentials, no region, no connection
            raise AwsError(type(error).__name__, str(error)) from None
        return answer
