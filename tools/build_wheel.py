#!/usr/bin/env python3
"""Builds the `ontrain` Python wheel offline from the built extension and the package sources.

A wheel is a zip file: the package (ontrain/*.py and ontrain/_ontrain.so) plus a
.dist-info folder (METADATA, WHEEL, RECORD with each file's sha256 and size). It is tagged for the Python
that runs this script (e.g. cp311-cp311-linux_x86_64), since the extension is built against its headers.

  tools/build_wheel.sh [OUT_DIR]        # builds the extension with Bazel, then calls this
  build_wheel.py --extension PATH --package DIR --out DIR [--version V]
"""
import argparse
import base64
import hashlib
import os
import sys
import sysconfig
import zipfile

NAME = "ontrain"


def tag():
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{impl}-{platform}"


def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build(extension, package, out, version):
    files = {}
    for name in sorted(os.listdir(package)):  # every module of the package
        if name.endswith(".py"):
            with open(os.path.join(package, name), "rb") as f:
                files[f"{NAME}/{name}"] = f.read()
    with open(extension, "rb") as f:
        files[f"{NAME}/_ontrain.so"] = f.read()
    info = f"{NAME}-{version}.dist-info"
    files[f"{info}/METADATA"] = (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {version}\n"
        "Summary: A training engine for ONNX models with ONNX Runtime's training API\n"
        "Requires-Python: >=3.11\n"
        "Requires-Dist: numpy\n").encode()
    files[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\n"
        "Generator: ontrain tools/build_wheel.py\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {tag()}\n").encode()
    record = "".join(f"{p},{digest(d)},{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"{NAME}-{version}-{tag()}.whl")
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in files.items():
            z.writestr(p, d)
    os.replace(tmp, path)  # atomic: a reader never sees half a wheel
    return path


def main():
    p = argparse.ArgumentParser(description="Builds the ontrain wheel offline.")
    p.add_argument("--extension", required=True, help="the built _ontrain.so")
    p.add_argument("--package", required=True, help="the folder with __init__.py and api.py")
    p.add_argument("--out", required=True)
    p.add_argument("--version", default="0.1.0")
    a = p.parse_args()
    for f in (a.extension, os.path.join(a.package, "api.py")):
        if not os.path.isfile(f):
            sys.exit(f"build_wheel: {f} does not exist")
    print(build(a.extension, a.package, a.out, a.version))


if __name__ == "__main__":
    main()
