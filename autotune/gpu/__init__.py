"""The device runtime: compile, load, launch, time and check kernels on the GPU."""
