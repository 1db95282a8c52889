"""Reading this machine's NVIDIA driver and GPUs (for ``cudaship doctor``), without PyTorch.

:func:`cudaship.probe.gpus.probe` asks the CUDA driver API (``libcuda.so.1`` / ``nvcuda.dll`` through ctypes)
for each GPU's name, compute capability, memory and memory-pool support, and NVML (``nvidia-ml-py`` when
installed, else ``libnvidia-ml.so.1`` / ``nvml.dll`` through ctypes) for the driver's version string.
"""
