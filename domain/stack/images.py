"""Container image references as containerd names them, for the images a lab pre-pulls onto its nodes."""

import re

DOCKER_HUB = "docker.io"
# Grammar from distribution/reference, the parser containerd and kubelet both normalise references with.
_DOMAIN_RE = re.compile(
    r"(?:localhost|[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)(?::[0-9]+)?"
)
_PATH_COMPONENT_RE = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
# The grammar admits any algorithm and 32 or more hex digits, but reference.Parse then checks the digest with
# opencontainers/go-digest (Digest.Validate): an algorithm it knows, and lowercase hex of that hash's length.
_DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
# reference.NameTotalLengthMax: the name (registry and repository) is at most 255 characters.
NAME_TOTAL_LENGTH_MAX = 255


def qualify_image(reference: str) -> str:
    """Return `reference` as containerd names it (`docker.io/library/ubuntu:22.04` for `ubuntu:22.04`).

    `ctr` does not apply Docker Hub's short-name rules, and the CRI plugin stores images under the normalised name, so a
    pre-pulled image only counts as present for a pod if it was pulled under the fully qualified name. A tag or digest
    is required: without one kubelet's default pull policy for the image is Always and pre-pulling buys nothing.
    """
    if not reference or reference != reference.strip() or any(ch.isspace() for ch in reference):
        raise ValueError(f"image reference {reference!r} must be non-empty and contain no whitespace")
    name, _, digest = reference.partition("@")
    if digest and not _DIGEST_RE.fullmatch(digest):
        raise ValueError(f"image reference {reference!r} has a malformed digest {digest!r}")
    if digest and (problem := _digest_problem(digest)):
        raise ValueError(f"image reference {reference!r} has a digest containerd refuses: {problem}")
    if len(name) > NAME_TOTAL_LENGTH_MAX:
        raise ValueError(
            f"image reference {reference!r} has a name of {len(name)} characters; containerd takes at most "
            f"{NAME_TOTAL_LENGTH_MAX}"
        )
    last_slash = name.rfind("/")
    repository, colon, tag = name.rpartition(":") if ":" in name[last_slash + 1 :] else (name, "", "")
    if colon and not _TAG_RE.fullmatch(tag):
        raise ValueError(f"image reference {reference!r} has a malformed tag {tag!r}")
    if not tag and not digest:
        raise ValueError(f"image reference {reference!r} needs an explicit tag or digest (e.g. ubuntu:22.04)")

    first, slash, rest = repository.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        domain, path = first, rest
    else:
        domain, path = DOCKER_HUB, repository
    if domain == "index.docker.io":
        domain = DOCKER_HUB
    if domain == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    if not _DOMAIN_RE.fullmatch(domain):
        raise ValueError(f"image reference {reference!r} has a malformed registry {domain!r}")
    if not all(_PATH_COMPONENT_RE.fullmatch(part) for part in path.split("/")):
        raise ValueError(f"image reference {reference!r} has a malformed repository {path!r} (lowercase only)")

    return f"{domain}/{path}" + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def _digest_problem(digest: str) -> str | None:
    algorithm, _, encoded = digest.partition(":")
    if algorithm not in _DIGEST_HEX:
        return f"{algorithm} is not a digest algorithm it knows ({', '.join(_DIGEST_HEX)})"
    if not re.fullmatch(f"[0-9a-f]{{{_DIGEST_HEX[algorithm]}}}", encoded):
        return f"a {algorithm} digest is {_DIGEST_HEX[algorithm]} lowercase hex digits, got {len(encoded)} characters"
    return None
