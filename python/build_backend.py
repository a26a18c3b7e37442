"""Builds the PyTorch backend (python/csrc/*.cpp) into eagertpu/_backend.so.

The backend links libeagertpu_ffi.so (the C ABI, built by cargo), copied next
to it. Objects are rebuilt only when a source or header is newer. Run by make.
"""

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

# Importing torch would autoload the installed backend (the torch.backends entry
# point) and map the very files this script replaces.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

import torch  # noqa: E402
from torch.utils.cpp_extension import include_paths, library_paths

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CSRC = os.path.join(HERE, "csrc")
BUILD = os.path.join(ROOT, "target", "python-backend")
PACKAGE = os.path.join(HERE, "eagertpu")
FFI = os.path.join(ROOT, "target", "ffi", "libeagertpu_ffi.so")
OUT = os.path.join(PACKAGE, "_backend.so")

CXX = os.environ.get("CXX", "g++")
FLAGS = [
    "-std=c++20",
    "-O2",
    "-fPIC",
    "-Wall",
    "-Wno-unused-parameter",
    f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
    "-I" + os.path.join(ROOT, "include"),
    "-I" + CSRC,
    "-I" + __import__("sysconfig").get_paths()["include"],
    # Kineto's plugin interface (profiler.cpp), which PyTorch's headers include bare.
    "-I" + os.path.join(os.path.dirname(torch.__file__), "include", "kineto"),
] + ["-I" + p for p in include_paths()]


def newest(paths):
    return max(os.path.getmtime(p) for p in paths)


def replace(src, dst):
    """Copies by rename, so a process that has the old file mapped keeps it intact."""
    if os.path.exists(dst) and os.path.getmtime(dst) >= os.path.getmtime(src):
        return
    tmp = dst + ".tmp"
    shutil.copy2(src, tmp)
    os.replace(tmp, dst)


def compile_one(src, headers):
    obj = os.path.join(BUILD, os.path.basename(src) + ".o")
    if os.path.exists(obj) and os.path.getmtime(obj) >= newest([src] + headers):
        return obj
    print(f"  c++ {os.path.relpath(src, ROOT)}", flush=True)
    r = subprocess.run([CXX, *FLAGS, "-c", src, "-o", obj], capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise SystemExit(f"compiling {src} failed")
    return obj


def main():
    if not os.path.exists(FFI):
        raise SystemExit(f"{FFI} is missing: run `cargo build --profile ffi -p eagertpu-ffi` first")
    os.makedirs(BUILD, exist_ok=True)
    sources = sorted(os.path.join(CSRC, f) for f in os.listdir(CSRC) if f.endswith(".cpp"))
    headers = [os.path.join(CSRC, f) for f in os.listdir(CSRC) if f.endswith(".h")]
    headers.append(os.path.join(ROOT, "include", "eagertpu.h"))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        objects = list(pool.map(lambda s: compile_one(s, headers), sources))
    replace(FFI, os.path.join(PACKAGE, "libeagertpu_ffi.so"))
    if os.path.exists(OUT) and os.path.getmtime(OUT) >= newest(objects + [FFI]):
        return
    libs = ["-L" + p for p in library_paths()] + ["-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python"]
    tmp = OUT + ".tmp"
    cmd = [CXX, "-shared", *objects, "-L" + PACKAGE, "-leagertpu_ffi", *libs, "-Wl,-rpath,$ORIGIN", "-o", tmp]
    print(f"  link {os.path.relpath(OUT, ROOT)}", flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise SystemExit("linking the backend failed")
    os.replace(tmp, OUT)


if __name__ == "__main__":
    main()
