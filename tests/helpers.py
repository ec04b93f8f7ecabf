import shutil


def have_nvcc() -> bool:
    return shutil.which("nvcc") is not None
