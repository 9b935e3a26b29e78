"""Hostile parser stubs for the isolation tests (imported inside spawned children)."""

import os


def parse(path, fmt, limits):
    with open(path, "rb") as fh:
        what = fh.read().strip().decode()
    log = os.environ.get("KGR_STUB_LOG")
    if log:
        with open(log, "a") as fh:
            fh.write(os.path.basename(path) + "\n")
    if what == "alloc":
        blob = bytearray(4 * 1024**3)
        return str(len(blob)), {}
    if what == "loop":
        while True:
            pass
    if what == "recurse":

        def down(n):
            return down(n + 1) + 1

        return str(down(0)), {}
    if what == "segv":
        import ctypes

        ctypes.string_at(0)
    return f"# {what}\n\nparsed fine\n", {}
