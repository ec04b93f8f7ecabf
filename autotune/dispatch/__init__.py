"""The Python API (autotune.matmul, autotune.load) over stored records, and its fuzzer."""
