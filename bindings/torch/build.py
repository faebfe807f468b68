#!/usr/bin/env python3
"""Builds the PyTorch extension `pagedattn` (docs/pages/pytorch.md) from a kit.

    python3 bindings/torch/build.py --kit DIR --out DIR [--verbose]

The kit is the folder the CMake target pagedattn_torch_kit fills (<build>/bindings/torch/kit, in a
build configured with -DPAGEDATTN_TORCH=ON): the project's libraries the extension links, compiled
with position-independent code, and kit.json, their link order. torch.utils.cpp_extension compiles
bindings/torch/pagedattn_torch.cpp against this python3's torch and links the kit into
<out>/pagedattn.so; `import pagedattn` then works with <out> on sys.path (PYTHONPATH). Its own ninja
build in <out> rebuilds only what changed. The CMake target pagedattn_torch runs this script; on a
GPU machine without the project's toolchain (Eigen, Boost, Catch2), a kit built elsewhere and this
script are all it takes, with python3's torch, a CUDA toolkit and a C++ compiler there.

Exit 0 when the module was built, 1 when it was not (the reason on stderr), 2 for a bad argument.
"""

import argparse
import json
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent


def read_kit(kit: pathlib.Path) -> tuple[list[str], str, list[str], str]:
    """The kit's archives (paths, in link order), include folder, link flags and CUDA
    architectures ("90"), from kit.json; ValueError naming what is missing, in the form of the
    project's errors."""
    manifest = kit / "kit.json"
    if not manifest.is_file():
        raise ValueError(f"build.py: --kit: expected a folder holding kit.json (cmake --build <build> --target "
                 f"pagedattn_torch_kit fills <build>/bindings/torch/kit), got {kit} without it")
    description = json.loads(manifest.read_text())
    archives = [kit / name for name in description["archives"]]
    include = kit / description["include"]
    missing = [str(path) for path in archives + [include / "api" / "decode.h"] if not path.is_file()]
    if missing:
        raise ValueError(f"build.py: --kit: expected every archive and header kit.json names, got {kit} without "
                         f"{', '.join(missing)}")
    return ([str(path) for path in archives], str(include), list(description.get("link_flags", [])),
            str(description.get("cuda_architectures", "")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kit", required=True, type=pathlib.Path, help="the kit folder (kit.json and its archives)")
    parser.add_argument("--out", required=True, type=pathlib.Path, help="where pagedattn.so and its build files go")
    parser.add_argument("--verbose", action="store_true", help="print the compiler's commands")
    args = parser.parse_args()
    try:
        archives, include, link_flags, architectures = read_kit(args.kit.resolve())
    except ValueError as bad:
        print(bad, file=sys.stderr)
        return 2
    try:
        from torch.utils import cpp_extension
    except ImportError as missing:
        print(f"build.py: python3 ({sys.executable}) does not import torch: {missing}", file=sys.stderr)
        return 1
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    # cpp_extension asks for the GPU's architectures even with no CUDA source to compile, and
    # where there is no GPU it finds none and fails: take the kit's ("90" is sm_90, "9.0" to torch).
    if "TORCH_CUDA_ARCH_LIST" not in os.environ and architectures.isdigit():
        os.environ["TORCH_CUDA_ARCH_LIST"] = f"{architectures[:-1]}.{architectures[-1]}"
    cpp_extension.load(
        name="pagedattn",
        sources=[str(HERE / "pagedattn_torch.cpp")],
        # The headers the kit's archives were compiled with (api/decode.h, common/), not this
        # tree's, which may be at another revision.
        extra_include_paths=[include],
        # The project's headers are C++20 (cpp_extension's own -std=c++17 comes first; the last
        # -std wins). Warnings are not errors, unlike everywhere else in the project (--verbose
        # shows them): this compiles with whichever compiler the torch machine has, which CI never
        # sees (the binding builds without one under g++ 12 with -Werror; torch's headers are -isystem).
        extra_cflags=["-O2", "-std=c++20", "-Wall", "-Wextra"],
        # The kit's archives as one group (their order is kit.json's), their symbols kept out of
        # the module's dynamic symbol table so they can clash with nothing else in the process.
        extra_ldflags=["-Wl,--start-group", *archives, "-Wl,--end-group", "-Wl,--exclude-libs,ALL", *link_flags],
        build_directory=str(out),
        with_cuda=True,  # the current CUDA stream (c10/cuda), and the CUDA runtime the kit calls
        verbose=args.verbose,
    )
    print(f"build.py: {out / 'pagedattn.so'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
