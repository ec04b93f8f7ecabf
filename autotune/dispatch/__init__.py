"""The Python API (autotune.matmul, autotune.load): the dispatch over stored records, the model
for shapes never tuned, and the differential fuzzer that checks the dispatch."""
