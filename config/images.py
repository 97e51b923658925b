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
