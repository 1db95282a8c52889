"""The floor: plain typed records every layer passes on (buffers, host and device code, one input's report).

Nothing here imports another package of cudaship; every reader, check and renderer may import from here.
"""
