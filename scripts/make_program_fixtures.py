"""Make tests/program/data/: a real ExecuTorch CUDA program of the demo MLP, and its weights.

Needs a CUDA GPU, torch with CUDA and the executorch wheel (1.5.1 was used) with its Python dependencies
(flatbuffers, torchao 0.18, ruamel.yaml, hydra-core, omegaconf, kgb, expecttest, parameterized,
pytorch-tokenizers). The committed files were made on the lent H200 (torch 2.11.0+cu130, driver 580.159.04)
with ``CXX=/usr/bin/g++ python scripts/make_program_fixtures.py tests/program/data`` (docs/program.md says why
the compiler is named). Output: ``demo_mlp_cuda.pte`` (about 500 KB: the AOTInductor-compiled library as named
data ``<sha256>_so_blob``, with its kernels embedded as sm_90a/compute_90a fatbins) and ``aoti_cuda_blob.ptd``
(the weights).
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(out: Path) -> None:
    import torch
    from executorch.backends.cuda.cuda_backend import CudaBackend
    from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    from cudaship.program.export import DEMO_MODELS

    model, inputs = DEMO_MODELS["demo-mlp"](torch)
    exported = torch.export.export(model.eval(), inputs)
    partitioner = CudaPartitioner([CudaBackend.generate_method_name_compile_spec("forward")])
    program = to_edge_transform_and_lower(
        exported, partitioner=[partitioner], compile_config=EdgeCompileConfig(_check_ir_validity=False)
    ).to_executorch()
    out.mkdir(parents=True, exist_ok=True)
    (out / "demo_mlp_cuda.pte").write_bytes(program.buffer)
    program.write_tensor_data_to_file(str(out))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/program/data"))
